"""`servefit plan` with vLLM launch commands: `vllm serve MODEL ...`, the api_server module, the
JSON pools fields, --compare, exit codes and one-line errors. Expected numbers are the block
arithmetic of tests/engines/vllm (reference §6.4 with --kv-cache-memory-bytes 50 GiB)."""

from __future__ import annotations

import json

from tests.clihelp import run
from tests.seedcase import SEED_SIZING_ARGV, SEED_TARGET_ARGV

GiB = 1 << 30


def test_vllm_serve_command_with_positional_model(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "--gpu",
        "H200",
        "--engine",
        "vllm==0.24.0",
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-Next-80B-A3B-Thinking",
        "-tp",
        "4",
        "--max_model_len",
        "262144",
        "--kv-cache-memory-bytes",
        str(50 * GiB),
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
    )
    p = json.loads(out)
    assert code == 0 and p["verdict"] == "ok"
    assert p["engine"] == {"name": "vllm", "version": "0.24.0", "profile": "0.24.0", "note": None}
    assert p["hardware"]["tp_size"] == 4
    # 50 GiB // (12 x 278,528 B) = 16,062 blocks of 272 tokens, 16,062 / 967 = 16.61x
    assert p["pools"]["block_size"] == 272
    assert p["pools"]["num_blocks"] == 16062
    assert p["pools"]["mamba_blocks"] == 16062
    assert round(p["pools"]["max_concurrency"], 2) == 16.61


def test_api_server_module_and_model_flag(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "--gpu",
        "H200",
        "--format",
        "json",
        "--",
        "python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "Qwen/Qwen3-Next-80B-A3B-Thinking",
        "--tensor-parallel-size",
        "4",
        "--kv-cache-memory-bytes",
        str(50 * GiB),
    )
    p = json.loads(out)
    # no --engine: the command's engine at its default profile (registry DEFAULT_VERSION)
    assert code == 0 and p["engine"]["name"] == "vllm" and p["engine"]["profile"] == "0.33.0"
    assert p["pools"]["num_blocks"] == 13653  # reference §6.4, 0.33.0 on Hopper


def test_predicted_failure_exits_1_with_the_engine_text(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "--gpu",
        "H200",
        "--engine",
        "vllm==0.24.0",
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-Next-80B-A3B-Thinking",
        "-tp",
        "4",
        "--kv-cache-memory-bytes",
        str(1000 * 12 * 278528),
    )
    p = json.loads(out)
    assert code == 1
    assert p["error"].startswith(
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (1000)."
    )


def test_bad_vllm_flag_value_is_the_engines_rejection(capsys):
    code, out, err = run(
        capsys,
        "plan",
        "--gpu",
        "H200",
        "--engine",
        "vllm==0.33.0",
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-Next-80B-A3B-Thinking",
        "--max-num-seqs",
        "lots",
    )
    # vLLM's argparse stops there: a plan that fails with its error, not bad input
    p = json.loads(out)
    assert code == 1 and err == "" and p["verdict"] == "fail"
    assert p["error"] == ("vllm serve: error: argument --max-num-seqs: expects an int, got 'lots'")


def test_compare_sglang_with_vllm(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        *SEED_TARGET_ARGV,
        "--compare",
        "vllm==0.33.0",
        "--format",
        "json",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        *SEED_SIZING_ARGV,
        "--mem-fraction-static",
        "0.88",
        "--max-running-requests",
        "16",
    )
    doc = json.loads(out)
    sgl, vll = doc["plans"]
    assert code == 0
    assert (sgl["engine"]["name"], vll["engine"]["name"]) == ("sglang", "vllm")
    # carried by meaning: TP, context length, running requests, MTP with 3 draft steps
    assert doc["carried_args"]["tensor_parallel_size"] == 2
    assert doc["carried_args"]["max_model_len"] == 32768
    assert doc["carried_args"]["max_num_seqs"] == 16
    assert doc["carried_args"]["speculative_config"] == {
        "method": "mtp",
        "num_speculative_tokens": 3,
    }
    assert "mem_fraction_static" in doc["not_carried"]
    assert vll["resolved_args"]["num_speculative_tokens"] == 3
    assert vll["hardware"]["tp_size"] == 2 and vll["pools"]["context_len"] == 32768


def test_compare_table_shows_both_engines(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "--gpu",
        "H200",
        "--engine",
        "vllm==0.24.0",
        "--compare",
        "sglang==0.5.23",
        "-m",
        "Qwen/Qwen3-Next-80B-A3B-Thinking",
        "--tensor-parallel-size",
        "2",
    )
    assert code == 0
    assert "Side by side" in out and "vllm 0.24.0" in out and "sglang 0.5.23" in out
