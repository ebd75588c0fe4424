"""NVML discovery with a fake pynvml module: present, absent and failing paths."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from servefit.errors import HardwareError
from servefit.hardware.nvml import LocalGPU, gpu_spec_from_local, local_gpus

MIB = 1 << 20


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 - pynvml's own class name
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    pass


def fake_pynvml(devices, *, init_error=None, driver=b"580.95.05", calls=None):
    """A stand-in for pynvml. devices: list of dicts (name, total, free, procs, gprocs, mem_error)."""
    calls = calls if calls is not None else []
    m = types.ModuleType("pynvml")

    def init():
        calls.append("init")
        if init_error:
            raise init_error

    def handle(i):
        if devices[i].get("handle_error"):
            raise NVMLError("Unknown Error")
        return i

    def mem(h):
        d = devices[h]
        if d.get("mem_error"):
            raise NVMLError_NotSupported("Not Supported")
        return SimpleNamespace(total=d["total"], free=d["free"], used=d["total"] - d["free"])

    def proc_name(pid):
        if pid == 999:
            raise NVMLError("Not Found")
        return f"proc{pid}".encode()

    m.nvmlInit = init
    m.nvmlShutdown = lambda: calls.append("shutdown")
    m.nvmlSystemGetDriverVersion = lambda: driver
    m.nvmlDeviceGetCount = lambda: len(devices)
    m.nvmlDeviceGetHandleByIndex = handle
    m.nvmlDeviceGetName = lambda h: devices[h]["name"]
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h}"
    m.nvmlDeviceGetMemoryInfo = mem
    m.nvmlSystemGetProcessName = proc_name
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        SimpleNamespace(pid=p, usedGpuMemory=u) for p, u in devices[h].get("procs", [])
    ]
    m.nvmlDeviceGetGraphicsRunningProcesses = lambda h: [
        SimpleNamespace(pid=p, usedGpuMemory=u) for p, u in devices[h].get("gprocs", [])
    ]
    return m


A6000 = {"name": "NVIDIA RTX A6000", "total": 49140 * MIB, "free": 48000 * MIB}


def test_present_devices_and_processes(monkeypatch):
    calls: list[str] = []
    devs = [
        dict(A6000, procs=[(1234, 1100 * MIB), (999, None)], gprocs=[(1234, 1000 * MIB)]),
        {"name": b"NVIDIA H100 80GB HBM3", "total": 81559 * MIB, "free": 81000 * MIB},
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(devs, calls=calls))
    res = local_gpus()
    assert res.reason is None and res.driver_version == "580.95.05"
    assert len(res) == 2 and bool(res)
    a, h = res[0], res[1]
    assert (a.index, a.name, a.total_mib, a.free_mib, a.used_mib) == (
        0,
        "NVIDIA RTX A6000",
        49140,
        48000,
        1140,
    )
    assert [(p.pid, p.used_mib) for p in a.processes] == [(999, None), (1234, 1100)]
    assert a.processes[1].name == "proc1234"
    assert h.name == "NVIDIA H100 80GB HBM3" and h.uuid == "GPU-1" and h.processes == ()
    assert calls == ["init", "shutdown"]


def test_module_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    res = local_gpus()
    assert len(res) == 0 and not res
    assert "nvidia-ml-py" in res.reason


def test_driver_missing(monkeypatch):
    fake = fake_pynvml([], init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found"))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    res = local_gpus()
    assert res.devices == () and "no NVIDIA driver" in res.reason


def test_other_init_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([], init_error=RuntimeError("boom")))
    res = local_gpus()
    assert res.devices == () and "boom" in res.reason


def test_no_gpus(monkeypatch):
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([], calls=calls))
    res = local_gpus()
    assert res.devices == () and res.reason == "NVML sees no GPU"
    assert calls == ["init", "shutdown"]


def test_count_error_does_not_raise(monkeypatch):
    fake = fake_pynvml([])

    def bad_count():
        raise NVMLError("GPU is lost")

    fake.nvmlDeviceGetCount = bad_count
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    res = local_gpus()
    assert res.devices == () and "GPU is lost" in res.reason


def test_per_device_failures_are_reported_not_raised(monkeypatch):
    devs = [
        {"name": "NVIDIA GB10", "total": 0, "free": 0, "mem_error": True},
        {"name": "x", "total": 1, "free": 1, "handle_error": True},
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(devs))
    res = local_gpus()
    assert len(res) == 1 and "GPU 1" in res.reason
    gb10 = res[0]
    assert gb10.total_mib is None and "Not Supported" in gb10.note
    # GB10 without an NVML total: the catalog's unified-memory figure stands.
    assert gpu_spec_from_local(gb10).key == "gb10"


def test_real_call_never_raises():
    res = local_gpus()
    if not res:  # this dev machine / CI: no NVIDIA driver
        assert res.reason
    for d in res:
        assert d.name


def _dev(name, total):
    return LocalGPU(index=0, name=name, total_mib=total, free_mib=total, used_mib=0)


def test_spec_from_local_uses_catalog_and_nvml_total():
    s = gpu_spec_from_local(_dev("NVIDIA H100 80GB HBM3", 81559))
    assert s.key == "h100-sxm" and s.memory_mib == 81559 and s.bandwidth_gbs == 3350
    s = gpu_spec_from_local(_dev("NVIDIA RTX A6000", 49000))  # NVML's figure wins
    assert s.key == "rtx-a6000" and s.memory_mib == 49000
    assert gpu_spec_from_local(_dev("NVIDIA H20", 143771)).key == "h20-141g"


def test_spec_from_local_unknown_gpu():
    s = gpu_spec_from_local(_dev("NVIDIA GeForce RTX 4080 SUPER", 16376))
    assert s.memory_mib == 16376 and s.name == "NVIDIA GeForce RTX 4080 SUPER"
    assert s.bandwidth_gbs == 0.0
    with pytest.raises(HardwareError, match="--gpu-mem-mib"):
        gpu_spec_from_local(_dev("NVIDIA Mystery", None))
