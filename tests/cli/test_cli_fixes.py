"""Every FAILS ends with the fix: `plan` prints the best single-flag change and the one closest to
what the user asked (the same search as `explain`), more GPUs of the same kind when the weights
alone do not fit, and the fixed command to paste. `--format shell` prints only that command."""

from __future__ import annotations

import json

import pytest

from servefit._explain.outcome import memory_gib, outcome
from servefit._plan.planner import PlanRequest, plan, with_args
from servefit.hardware.nvml import LocalGPUs
from tests.clihelp import run
from tests.seedcase import MTP_ARGV, SEED_TARGET_ARGV

SEED_085 = [
    *SEED_TARGET_ARGV,
    "--",
    "python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "Qwen/Qwen3.6-27B",
    "--tp-size",
    "2",
    "--context-length",
    "32768",
    *MTP_ARGV,
    "--mem-fraction-static",
    "0.85",
]
VLLM_1024 = ["--gpu", "A6000", "--engine", "vllm==0.33.0", "--", "vllm", "serve",
             "Qwen/Qwen3.6-27B", "--tensor-parallel-size", "2", "--max-model-len", "32768",
             "--max-num-seqs", "1024"]  # fmt: skip


def test_plan_fails_then_ends_with_the_fix(capsys):
    code, out, _ = run(capsys, "plan", *SEED_085)
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == "FAILS: the engine stops at start-up: RuntimeError: Not enough memory."
    fix = next(x for x in lines if x.startswith("  - fix: "))
    assert fix.startswith("  - fix: --max-running-requests 12 (10.31 full-context requests")
    closest = next(x for x in lines if x.startswith("  - closest to what you asked: "))
    assert "--mem-fraction-static 0.93" in closest
    # the verdict again at the end, then the command with the fix, one flag per line
    end = lines.index("The launch with the best fix:")
    assert lines[end - 4] == lines[0] and lines[end - 2] == fix
    assert lines[end + 1] == "python -m sglang.launch_server \\"
    assert "    --max-running-requests 12 \\" in lines[end + 1 :]
    assert "    --mem-fraction-static 0.85 \\" in lines[end + 1 :]
    assert not any("--host" in x for x in lines[end + 1 :])  # the engine's default bind


def test_plan_format_shell_is_the_fixed_command(capsys):
    code, out, _ = run(capsys, "plan", "--format", "shell", *SEED_085)
    assert code == 1
    assert out.splitlines()[0] == "python -m sglang.launch_server \\"
    assert "--max-running-requests 12" in out and "FAILS" not in out


def test_plan_json_carries_the_fix_the_table_shows(capsys):
    code, out, _ = run(capsys, "plan", "--format", "json", *SEED_085)
    data = json.loads(out)
    assert code == 1 and data["verdict"] == "fail"
    assert data["fix"]["best"]["command_flags"] == "--max-running-requests 12"
    assert "--mem-fraction-static 0.93" in data["fix"]["minimal"]["command_flags"]
    code, out, _ = run(capsys, "plan", "--format", "json", "--no-fix", *SEED_085)
    assert code == 1 and "fix" not in json.loads(out)
    # a launch that starts with its floors met needs none
    code, out, _ = run(capsys, "plan", "--format", "json", *VLLM_1024[:-2])
    assert code == 0 and "fix" not in json.loads(out)


def test_vllm_closest_is_bisected_to_the_exact_value():
    """vLLM 0.33.0 refuses --max-num-seqs 1024 on 2x A6000 (272 Mamba blocks); fewer sequences
    also shrink the sampler's profiling peak (max_num_seqs x vocabulary), which frees blocks,
    so the largest value that starts is more than 272: the bisection finds it exactly."""
    from servefit._explain.analysis import explain_request

    req = PlanRequest(
        model="Qwen/Qwen3.6-27B",
        gpu="A6000",
        engine="vllm==0.33.0",
        args={"tensor_parallel_size": 2, "max_model_len": 32768, "max_num_seqs": 1024},
    )
    fix = explain_request(req).fix
    closest = fix.minimal
    n = closest.changes[0].new
    assert closest.command_flags == f"--max-num-seqs {n}" and 272 < n < 1024
    at = outcome(plan(with_args(req, max_num_seqs=n)))
    over = plan(with_args(req, max_num_seqs=n + 1))
    assert at.verdict == "ok" and at.free_gib >= 1.0
    assert over.verdict == "fail" or outcome(over).free_gib < 1.0
    # the best keeps 13 whole 32K requests at once with the most sequences: vLLM's own default
    # for a GPU under 70 GiB (get_batch_defaults: 256)
    assert fix.best.command_flags == "--max-num-seqs 256"
    assert int(fix.best.outcome.effective_concurrency) == 13


def test_concurrency_floor(capsys):
    """With --concurrency 16 no fix runs fewer than 16 requests."""
    code, out, _ = run(capsys, "explain", "--concurrency", "16", "--format", "json", *SEED_085)
    fix = json.loads(out)["fix"]
    for c in [fix["best"], fix["minimal"], *fix["alternatives"]]:
        assert c["outcome"]["max_running_requests"] >= 16
    assert "at least 16 running requests" in fix["ranking"]


def test_weights_need_more_gpus(capsys):
    """Qwen3.6-27B in bf16 (50.96 GiB of weights at TP 1) on RTX 4090s (23.24 GiB free before
    the weights): the engine dies loading them. Searched count by count, not doubled."""
    code, out, _ = run(
        capsys, "plan", "-m", "Qwen/Qwen3.6-27B", "--gpu", "4090", "--engine", "sglang==0.5.23",
        "--context-length", "32768",
    )  # fmt: skip
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == (
        "FAILS: the weights alone need 50.96 GiB per GPU and 23.24 GiB is free before they "
        "load: the engine runs out of memory loading them (CUDA out of memory)"
    )
    assert lines[1].startswith(
        "  - the weights need at least 3 GPUs of this kind (NVIDIA GeForce RTX 4090); the "
        "smallest layout that starts: TP 1 x PP 3 on 3 GPUs with --mem-fraction-static 0.91"
    )
    # 3 GPUs hold the weights (PP 3: a third each) but no layout of 3 starts as asked: SGLang
    # cannot build TP 3 (16 vision heads), and PP 3 leaves no full-context request at once
    # under the default fraction; its own fix, a higher fraction, makes it start
    base = PlanRequest(
        model="Qwen/Qwen3.6-27B",
        gpu="4090",
        engine="sglang==0.5.23",
        args={"context_length": 32768},
        num_gpus=3,
    )
    pp3 = plan(with_args(base, pp_size=3))
    assert pp3.per_rank.weights_gib < pp3.per_rank.pre_load_free_gib
    o = outcome(pp3)
    assert o.verdict != "ok" or o.effective_concurrency < 1 or o.free_gib < 2.0
    assert plan(with_args(base, tp_size=3)).error.startswith(
        "AssertionError: 16 is not divisible by 3"
    )
    fixed = outcome(plan(with_args(base, pp_size=3, mem_fraction_static=0.91)))
    assert fixed.verdict == "ok" and fixed.effective_concurrency >= 1 and fixed.free_gib >= 2.0
    # what the HTML draws below zero for it: the weights beyond the memory free before them
    one = plan(with_args(base, pp_size=1))
    r = one.per_rank
    assert memory_gib(one)["short"] == pytest.approx(r.weights_gib - r.pre_load_free_gib)
    assert round(memory_gib(one)["short"], 2) == round(50.96 - 23.24, 2)
    end = lines.index("The launch with more GPUs:")
    assert lines[end + 3 : end + 7] == [
        "    --tp-size 1 \\", "    --pp-size 3 \\", "    --context-length 32768 \\",
        "    --mem-fraction-static 0.91 \\",
    ]  # fmt: skip


def test_gpu_local_without_a_gpu_is_a_note(capsys, monkeypatch):
    monkeypatch.setattr(
        "servefit.hardware.nvml.local_gpus", lambda: LocalGPUs(reason="NVML library not found")
    )
    code, out, err = run(
        capsys, "plan", "-m", "Qwen/Qwen3.5-9B", "--gpu", "local", "--context-length", "32768"
    )
    assert code == 0 and err == ""
    assert out.startswith("note: --gpu local: no GPU visible on this machine (NVML library not")
    row = next(x for x in out.splitlines() if x.startswith("rtx-a6000 "))
    assert "starts" in row


def test_explain_and_fit_format_shell(capsys):
    code, out, _ = run(capsys, "explain", "--format", "shell", *SEED_085)
    assert code == 1 and out.startswith("python -m sglang.launch_server \\\n")
    assert "--max-running-requests 12" in out
    code, out, _ = run(capsys, "fit", "--format", "shell", "--concurrency", "16", *SEED_085)
    assert code == 0 and out.startswith("python -m sglang.launch_server \\\n")
    assert "--max-running-requests 16" in out and "--mem-fraction-static 0.9" in out
    assert "#" not in out  # one node: nothing but the command


def test_vllm_plan_fix(capsys):
    code, out, _ = run(capsys, "plan", *VLLM_1024)
    lines = out.splitlines()
    assert code == 1 and lines[0].startswith(
        "FAILS: the engine stops at start-up: ValueError: max_num_seqs (1024) exceeds available "
        "Mamba cache blocks (272)."
    )
    assert any(x.startswith("  - fix: --max-num-seqs 256 (13 full-context") for x in lines)
    assert "    --max-num-seqs 256 \\" in lines[-4:]
