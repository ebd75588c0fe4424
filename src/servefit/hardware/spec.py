"""GPU description used by the planners."""

from __future__ import annotations

from servefit.frozen import frozen
from servefit.hardware.host import HostMemory


@frozen
class GPUSpec:
    """One GPU model.

    memory_mib is the total as `nvidia-smi --query-gpu=memory.total` prints it (MiB); SGLang's
    heuristics read exactly that (sglang/srt/utils/common.py:get_nvgpu_memory_capacity).
    `context_mib` is the memory gone before weights load on a single-GPU launch (CUDA context,
    allocator, kernels' workspaces); `per_peer_mib` is added per extra TP/PP peer for NCCL and
    custom all-reduce buffers. Both are fitted to ground-truth logs (docs/gpus.md).
    """

    key: str
    name: str
    memory_mib: int
    bandwidth_gbs: float
    bf16_tflops: float
    vendor: str = "nvidia"
    unified_memory: bool = False
    context_mib: float = 600.0
    per_peer_mib: float = 0.0
    # Added for the pre-load model (servefit/hardware/preload.py, docs/gpus.md):
    comm_base_mib: float = 0.0  # fixed extra once world_size > 1 (fitted on MI355X; 0 on NVIDIA)
    # all GPUs of a node peer-linked (NVSwitch / xGMI): the engines' custom all-reduce runs at TP>2
    fully_connected: bool = False
    # vendor "cpu" (an engine's CPU platform): the ISA flags that change what the engine sizes
    # ("avx512_bf16", "amx_tile"; /proc/cpuinfo's names)
    features: frozenset[str] = frozenset()
    # vendor "cpu" read on this machine: the memory facts of the node the engine's worker binds
    # (hardware/cpu.py); None for a device known only by its total (a log, --gpu-mem-mib)
    host: HostMemory | None = None

    def with_memory(self, memory_mib: int) -> GPUSpec:
        from dataclasses import replace

        return replace(self, memory_mib=memory_mib, host=None)


@frozen
class GPUSet:
    """The GPUs an engine instance runs on (one kind; count = world size on this node)."""

    gpu: GPUSpec
    count: int
    free_gib_override: float | None = None  # --free-gib: free memory before weights, per GPU
    source: str = "catalog"  # "catalog" | "nvml" | "override" | "cpu"
