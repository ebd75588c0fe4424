"""This machine's CPU as an engine device (vLLM's CPU platform): memory and the ISA flags the
engine reads (torch.cpu._is_avx512_bf16_supported, _is_amx_tile_supported)."""

from __future__ import annotations

from pathlib import Path

from servefit.errors import HardwareError
from servefit.hardware.spec import GPUSpec

# the /proc/cpuinfo flags an engine's CPU platform branches on
ENGINE_FLAGS = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"})


def local_cpu(
    cpuinfo: Path = Path("/proc/cpuinfo"), meminfo: Path = Path("/proc/meminfo")
) -> GPUSpec:
    """The CPU this runs on: model name, MemTotal (the node memory vLLM's CPU worker reports as
    its total), and the engine-relevant ISA flags."""
    try:
        info = cpuinfo.read_text(encoding="utf-8", errors="replace")
        mem = meminfo.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise HardwareError(f"--device cpu: cannot read this machine's CPU ({exc})") from exc
    name, flags = "CPU", frozenset[str]()
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and name == "CPU":
            name = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = frozenset(value.split()) & ENGINE_FLAGS
    kib = next(
        (int(line.split()[1]) for line in mem.splitlines() if line.startswith("MemTotal:")), 0
    )
    if kib <= 0:
        raise HardwareError("--device cpu: no MemTotal in /proc/meminfo")
    return GPUSpec(
        key="cpu",
        name=name,
        memory_mib=kib // 1024,
        bandwidth_gbs=0.0,
        bf16_tflops=0.0,
        vendor="cpu",
        context_mib=0.0,
        features=flags,
    )
