"""Local GPUs through NVML (nvidia-ml-py, imported lazily). Never raises: when NVML is missing,
the driver is absent or no GPU is found, the result is empty and `reason` says why.

NVML indexes every GPU of the machine and ignores CUDA_VISIBLE_DEVICES. MiB figures are
floor(bytes / 2**20), as nvidia-smi prints them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from servefit.frozen import frozen
from servefit.hardware.spec import GPUSpec

_MIB = 1 << 20
# pynvml maps NVML_VALUE_NOT_AVAILABLE to None; older bindings leave 2**64 - 1 in place.
_NOT_AVAILABLE = (1 << 64) - 1


@frozen
class GPUProcess:
    """A process holding memory on a GPU. used_mib is None where the driver hides it
    (containers without the host PID namespace, Windows WDDM)."""

    pid: int
    name: str
    used_mib: int | None


@frozen
class LocalGPU:
    index: int
    name: str
    total_mib: int | None  # None where NVML does not report memory (GB10 unified memory)
    free_mib: int | None
    used_mib: int | None
    processes: tuple[GPUProcess, ...] = ()
    uuid: str | None = None
    note: str | None = None  # a per-device query that failed


@frozen
class LocalGPUs:
    """The GPUs NVML sees. Empty with a `reason` when it cannot be asked."""

    devices: tuple[LocalGPU, ...] = ()
    reason: str | None = None
    driver_version: str | None = None

    def __len__(self) -> int:
        return len(self.devices)

    def __iter__(self) -> Iterator[LocalGPU]:
        return iter(self.devices)

    def __getitem__(self, i: int) -> LocalGPU:
        return self.devices[i]

    def __bool__(self) -> bool:
        return bool(self.devices)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _mib(value: Any) -> int | None:
    if value is None or not isinstance(value, int) or value >= _NOT_AVAILABLE or value < 0:
        return None
    return value // _MIB


def _init_reason(exc: BaseException) -> str:
    kind = type(exc).__name__
    if "LibraryNotFound" in kind:
        return "NVML library not found (no NVIDIA driver on this machine)"
    if "DriverNotLoaded" in kind:
        return "NVIDIA driver is not loaded"
    if "NoPermission" in kind:
        return "no permission to query NVML"
    return f"NVML init failed: {kind}: {exc}"


def _process_name(nvml: Any, pid: int) -> str:
    try:
        name = _text(nvml.nvmlSystemGetProcessName(pid))
        if name:
            return name
    except Exception:
        pass
    try:  # other PID namespace or no permission: try /proc
        with open(f"/proc/{pid}/comm", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _processes(nvml: Any, handle: Any) -> tuple[GPUProcess, ...]:
    seen: dict[int, int | None] = {}
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        fn = getattr(nvml, getter, None)
        if fn is None:
            continue
        try:
            procs = fn(handle) or ()
        except Exception:
            continue
        for p in procs:
            pid = int(getattr(p, "pid", -1))
            used = _mib(getattr(p, "usedGpuMemory", None))
            prev = seen.get(pid)
            seen[pid] = used if prev is None else max(prev, used or 0)
    return tuple(
        GPUProcess(pid=pid, name=_process_name(nvml, pid), used_mib=used)
        for pid, used in sorted(seen.items())
    )


def _device(nvml: Any, index: int) -> LocalGPU:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(nvml.nvmlDeviceGetName(handle))
    uuid = None
    with contextlib.suppress(Exception):
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
    total = free = used = None
    note = None
    try:
        mem = nvml.nvmlDeviceGetMemoryInfo(handle)
        total, free, used = _mib(mem.total), _mib(mem.free), _mib(mem.used)
    except Exception as exc:
        note = f"memory info unavailable: {type(exc).__name__}: {exc}"
    return LocalGPU(
        index=index,
        name=name,
        total_mib=total,
        free_mib=free,
        used_mib=used,
        processes=_processes(nvml, handle),
        uuid=uuid,
        note=note,
    )


def local_gpus() -> LocalGPUs:
    """Query NVML once. Never raises."""
    try:
        import pynvml as nvml
    except Exception:
        return LocalGPUs(reason="nvidia-ml-py is not installed (pip install nvidia-ml-py)")
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return LocalGPUs(reason=_init_reason(exc))
    try:
        driver = None
        with contextlib.suppress(Exception):
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        count = int(nvml.nvmlDeviceGetCount())
        if count == 0:
            return LocalGPUs(reason="NVML sees no GPU", driver_version=driver)
        devices, failed = [], []
        for i in range(count):
            try:
                devices.append(_device(nvml, i))
            except Exception as exc:
                failed.append(f"GPU {i}: {type(exc).__name__}: {exc}")
        reason = "; ".join(failed) if failed else None
        return LocalGPUs(devices=tuple(devices), reason=reason, driver_version=driver)
    except Exception as exc:
        return LocalGPUs(reason=f"NVML query failed: {type(exc).__name__}: {exc}")
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def gpu_spec_from_local(dev: LocalGPU) -> GPUSpec:
    """The catalog spec for an NVML device, with NVML's total memory; a generic spec (real
    memory, unknown bandwidth/TFLOP/s) when the name is not in the catalog.
    Raises HardwareError only for an unknown GPU whose memory NVML does not report."""
    from servefit.hardware.catalog import generic_gpu, match_nvml_name, with_memory_mib

    spec = match_nvml_name(dev.name, dev.total_mib)
    if spec is None:
        vendor = "amd" if "amd" in dev.name.lower() else "nvidia"
        if dev.total_mib is None:
            from servefit.errors import HardwareError

            raise HardwareError(
                f"GPU {dev.index} ({dev.name}) is not in the catalog and NVML reports no memory "
                "total; pass --gpu-mem-mib"
            )
        return generic_gpu(dev.name, dev.total_mib, vendor=vendor)
    if dev.total_mib and dev.total_mib != spec.memory_mib and not spec.unified_memory:
        spec = with_memory_mib(spec, dev.total_mib)
    return spec
