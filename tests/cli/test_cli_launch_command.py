"""The launch command is the whole launch: its CUDA_VISIBLE_DEVICES prefix and its `--config FILE`
reach plan, explain, fit, doctor --command and launch through the one command reader.

Refusal texts are the engines' own (tests/engines/test_command_env.py and test_command_config.py
cite them): vllm/config/parallel.py:ParallelConfig.__post_init__ for a TP larger than the
visible GPUs, SGLang's torch set_device in ModelRunner for a rank on a GPU it cannot see.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.hardware import nvml
from servefit.launch.rundir import list_runs
from tests.clihelp import run

MODEL = "meta-llama/Meta-Llama-3.1-8B"  # bundled catalog config: planned offline
VLLM = ("--gpu", "H100", "--engine", "vllm==0.33.0")
SGLANG = ("--gpu", "H100", "--engine", "sglang==0.5.23")
WORLD_2_OF_1 = (
    "ValueError: World size (2) is larger than the number of available GPUs (1) in this node."
)
DOCTOR_LOG = Path(__file__).parents[1] / "doctor" / "logs" / "sglang_0_5_9_seed_085_fail.log"


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working directory of its own: the engines read --config relative to theirs."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _plan(capsys, *argv):
    code, out, err = run(capsys, "plan", "--format", "json", "--no-fix", *argv)
    return code, json.loads(out), err


def test_plan_a_tp_the_visible_gpus_cannot_hold_fails_as_the_engine_does(capsys):
    code, p, _ = _plan(
        capsys, *VLLM, "--", "CUDA_VISIBLE_DEVICES=0", "vllm", "serve", MODEL, "-tp", "2"
    )
    assert code == 1 and p["verdict"] == "fail" and p["error"].startswith(WORLD_2_OF_1)
    code, p, _ = _plan(
        capsys, *SGLANG, "--", "CUDA_VISIBLE_DEVICES=0", "python", "-m", "sglang.launch_server",
        "--model-path", MODEL, "--tp-size", "2",
    )  # fmt: skip
    assert code == 1 and p["error"].startswith(
        "CUDA error: invalid device ordinal (the TP rank 1 runs on GPU 1 and "
        "CUDA_VISIBLE_DEVICES=0 exposes 1 GPU;"
    )


def test_plan_two_visible_gpus_hold_tp_2(capsys):
    code, p, _ = _plan(
        capsys, *VLLM, "--", "CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", MODEL, "-tp", "2"
    )
    assert code == 0 and p["verdict"] == "ok" and p["hardware"]["num_gpus"] == 2


def test_plan_reads_a_vllm_config_file_and_the_command_line_wins(capsys, here):
    (here / "serve.yaml").write_text(
        f"model: {MODEL}\ntensor_parallel_size: 2\ngpu_memory_utilization: 0.8\n"
        "max-model-len: 8192\n"
    )
    code, p, _ = _plan(capsys, *VLLM, "--", "vllm", "serve", "--config", "serve.yaml")
    assert code == 0 and p["hardware"]["tp_size"] == 2 and p["hardware"]["num_gpus"] == 2
    assert p["user_args"]["gpu_memory_utilization"] == 0.8
    assert p["resolved_args"]["max_model_len"] == 8192
    code, p, _ = _plan(
        capsys, *VLLM, "--", "vllm", "serve", "--config", "serve.yaml", "-tp", "1",
        "--gpu-memory-utilization", "0.7",
    )  # fmt: skip
    assert code == 0 and p["hardware"]["tp_size"] == 1
    assert p["user_args"]["gpu_memory_utilization"] == 0.7


def test_plan_reads_an_sglang_config_file_and_the_command_line_wins(capsys, here):
    (here / "serve.yaml").write_text(
        f"model-path: {MODEL}\ntp-size: 2\nmem-fraction-static: 0.8\ncontext-length: 8192\n"
    )
    launch = ("python", "-m", "sglang.launch_server", "--config", "serve.yaml")
    code, p, _ = _plan(capsys, *SGLANG, "--", *launch)
    assert code == 0 and p["hardware"]["tp_size"] == 2
    assert p["user_args"]["mem_fraction_static"] == 0.8 and p["pools"]["context_len"] == 8192
    code, p, _ = _plan(capsys, *SGLANG, "--", *launch, "--mem-fraction-static", "0.7")
    assert p["user_args"]["mem_fraction_static"] == 0.7 and p["hardware"]["tp_size"] == 2


def test_a_config_file_that_cannot_be_read_is_one_line_and_exit_2(capsys, here):
    (here / "bad.yaml").write_text("tp-size: [2\n")
    for name in ("bad.yaml", "missing.yaml"):
        code, out, err = run(
            capsys, "plan", *SGLANG, "--", "python", "-m", "sglang.launch_server",
            "--model-path", MODEL, "--config", name,
        )  # fmt: skip
        assert code == 2 and out == ""
        assert err.startswith(f"servefit: error: --config {name}") and err.count("\n") == 1
    assert (
        "is not valid YAML: while parsing a flow sequence"
        in run(
            capsys,
            "plan",
            *SGLANG,
            "--",
            "sglang",
            "serve",
            "--model-path",
            MODEL,
            "--config",
            "bad.yaml",
        )[2]
    )


def test_explain_plans_the_config_file(capsys, here):
    (here / "serve.yaml").write_text("gpu_memory_utilization: 0.8\nmax-model-len: 8192\n")
    code, out, _ = run(
        capsys, "explain", *VLLM, "--format", "json", "--",
        "vllm", "serve", MODEL, "--config", "serve.yaml",
    )  # fmt: skip
    e = json.loads(out)
    assert code == 0 and e["plan"]["user_args"]["gpu_memory_utilization"] == 0.8


def test_fit_refuses_a_baseline_the_visible_gpus_cannot_hold(capsys, here):
    (here / "serve.yaml").write_text("tensor_parallel_size: 2\nmax-model-len: 8192\n")
    code, out, _ = run(
        capsys, "fit", *VLLM, "--",
        "CUDA_VISIBLE_DEVICES=0", "vllm", "serve", MODEL, "--config", "serve.yaml",
    )  # fmt: skip
    assert code == 1 and WORLD_2_OF_1 in " ".join(out.split())


def test_doctor_compares_the_log_with_the_config_file(capsys, here):
    # the log's launch ran --mem-fraction-static 0.85; this command's file says 0.88
    (here / "serve.yaml").write_text(
        "model-path: /root/models/Qwen3.6-27B\ntp-size: 2\nmem-fraction-static: 0.88\n"
        "api-key: sk-not-to-be-printed\n"
    )
    code, out, _ = run(
        capsys, "doctor", str(DOCTOR_LOG), "--gpu", "A6000", "--format", "json", "--command",
        "python -m sglang.launch_server --config serve.yaml",
    )  # fmt: skip
    findings = {f["code"]: f for f in json.loads(out)["findings"]}
    assert (
        "mem_fraction_static: 0.85 in the log, 0.88 in --command"
        in (findings["command_mismatch"]["detail"])
    )
    assert "sk-not-to-be-printed" not in out and code == 1


def test_doctor_says_when_the_command_cannot_see_the_gpus_its_layout_needs(capsys):
    # the seed's serving log ran TP 2 on two GPUs; the same command behind
    # CUDA_VISIBLE_DEVICES=0 gives rank 1 a GPU that does not exist: SGLang's ModelRunner sets
    # device 1 and CUDA answers "invalid device ordinal" (engines/devices.py), as plan says
    serve = DOCTOR_LOG.with_name("sglang_0_5_9_seed_088_serve.log")
    launch = "python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp-size 2"
    found = {}
    for visible in ("0", "0,1"):
        code, out, _ = run(
            capsys, "doctor", str(serve), "--gpu", "A6000", "--format", "json",
            "--command", f"CUDA_VISIBLE_DEVICES={visible} {launch}",
        )  # fmt: skip
        found[visible] = {f["code"]: f for f in json.loads(out)["findings"]}
    detail = found["0"]["command_devices"]["detail"]
    assert detail.startswith(
        "with the environment in --command the engine stops at start-up: CUDA error: invalid "
        "device ordinal (the TP rank 1 runs on GPU 1 and CUDA_VISIBLE_DEVICES=0 exposes 1 GPU"
    )
    assert "command_devices" not in found["0,1"]


def test_launch_is_refused_before_anything_starts(capsys, here, monkeypatch):
    monkeypatch.setattr(nvml, "local_gpus", lambda: nvml.LocalGPUs(reason="NVML library not found"))
    (here / "serve.yaml").write_text("tensor_parallel_size: 2\n")
    runs = here / "runs"
    code, out, _ = run(
        capsys, "launch", *VLLM, "--runs-dir", str(runs), "--",
        "CUDA_VISIBLE_DEVICES=0", "vllm", "serve", MODEL, "--config", "serve.yaml",
    )  # fmt: skip
    text = " ".join(out.split())
    assert code == 1 and f"the engine would reject this launch: {WORLD_2_OF_1}" in text
    assert "not launched" in text and list_runs(runs) == []


def test_gpu_local_is_narrowed_to_the_gpus_the_engine_sees(capsys, monkeypatch):
    h100 = nvml.LocalGPU(0, "NVIDIA H100 80GB HBM3", 81559, 81000, 559, uuid="GPU-h100")
    a6000 = nvml.LocalGPU(1, "NVIDIA RTX A6000", 49140, 48600, 540, uuid="GPU-a6000")
    monkeypatch.setattr(nvml, "local_gpus", lambda: nvml.LocalGPUs(devices=(h100, a6000)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    serve = ("vllm", "serve", MODEL, "--max-model-len", "8192")
    local = ("--gpu", "local", "--engine", "vllm==0.33.0")
    # the engine's GPU 0 is NVML's GPU 1: the plan is of an A6000
    code, p, _ = _plan(capsys, *local, "--", "CUDA_VISIBLE_DEVICES=1", *serve)
    assert code == 0 and p["hardware"]["memory_mib"] == 49140
    # this machine has two GPUs: TP 4 does not fit, and an ordinal past them ends the list
    code, p, _ = _plan(capsys, *local, "--", *serve, "-tp", "4")
    assert code == 1 and p["error"].startswith(
        "ValueError: World size (4) is larger than the number of available GPUs (2) in this node."
    )
    code, p, _ = _plan(capsys, *local, "--", "CUDA_VISIBLE_DEVICES=0,7,1", *serve, "-tp", "2")
    assert code == 1 and p["error"].startswith(WORLD_2_OF_1)
