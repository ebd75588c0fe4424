"""What vLLM sees of a GPU: the total memory CUDA reports, and the compute capability.

vLLM sizes everything from `torch.cuda.mem_get_info()` (vllm/utils/mem_utils.py:
MemorySnapshot.measure): `gpu_memory_utilization` is a fraction of that *total*, which is
smaller than nvidia-smi's memory.total (the GPU catalog's `memory_mib`) by what the driver keeps
for itself. That gap is fitted to the ground-truth logs, per memory class (MiB):

* GDDR: 430 -- vllm_v0_llama31_8b_1x3090_maxlen20k_v10517 prints `total_gpu_memory=23.58GiB` on
  an RTX 3090 (24576 MiB in nvidia-smi): 24576 - 23.58 x 1024 = 430.
* HBM: 616 -- vllm_qwen3coder480b_fp8_8xh20_dp8ep_util{090,095}_recipes12: raising
  gpu_memory_utilization by 0.05 raised "available KV cache memory" by 55.65 - 48.66 = 6.99 GiB,
  so total = 139.8 GiB on the H20 141 GB (143771 MiB): 143771 - 139.8 x 1024 = 616 (+-205 from
  the 2-decimal rounding of the two logged figures).
* Unified memory (GB10): 0 -- the catalog's memory_mib is already the OS-visible total.

The compute capability decides attention/GDN kernel choices that change the block size
(vllm/platforms/cuda.py, vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:
_resolve_gdn_prefill_backend); it is public NVIDIA data, keyed by the catalog's GPU keys.
"""

from __future__ import annotations

from servefit.hardware.spec import GPUSpec

GIB_MIB = 1024.0
CUDA_RESERVED_MIB = {"gddr": 430.0, "hbm": 616.0, "unified": 0.0, "amd": 0.0}

# catalog key -> ((major, minor), memory class)
_DEVICES: dict[str, tuple[tuple[int, int], str]] = {
    "rtx-a6000": ((8, 6), "gddr"),
    "a100-40g-sxm": ((8, 0), "hbm"),
    "a100-40g-pcie": ((8, 0), "hbm"),
    "a100-80g-sxm": ((8, 0), "hbm"),
    "a100-80g-pcie": ((8, 0), "hbm"),
    "l4": ((8, 9), "gddr"),
    "l40s": ((8, 9), "gddr"),
    "rtx-3090": ((8, 6), "gddr"),
    "rtx-4090": ((8, 9), "gddr"),
    "rtx-5070-ti": ((12, 0), "gddr"),
    "rtx-5090": ((12, 0), "gddr"),
    "rtx-5090-d": ((12, 0), "gddr"),
    "rtx-pro-6000": ((12, 0), "gddr"),
    "rtx-6000-ada": ((8, 9), "gddr"),
    "h100-sxm": ((9, 0), "hbm"),
    "h100-pcie": ((9, 0), "hbm"),
    "h100-nvl": ((9, 0), "hbm"),
    "h800": ((9, 0), "hbm"),
    "h20": ((9, 0), "hbm"),
    "h20-141g": ((9, 0), "hbm"),
    "h200": ((9, 0), "hbm"),
    "b200": ((10, 0), "hbm"),
    "gb10": ((12, 1), "unified"),
    "t4": ((7, 5), "gddr"),
    "a10": ((8, 6), "gddr"),
}


def memory_class(gpu: GPUSpec) -> str:
    if gpu.vendor == "amd":
        return "amd"
    if gpu.unified_memory:
        return "unified"
    return _DEVICES.get(gpu.key, ((0, 0), "gddr"))[1]


def capability(gpu: GPUSpec) -> tuple[int, int] | None:
    """(major, minor) of an NVIDIA GPU in the catalog; None for AMD or an unknown card."""
    if gpu.vendor != "nvidia" or gpu.key not in _DEVICES:
        return None
    return _DEVICES[gpu.key][0]


def cuda_total_gib(gpu: GPUSpec) -> float:
    """`torch.cuda.mem_get_info()[1]` for this GPU, GiB."""
    return (gpu.memory_mib - CUDA_RESERVED_MIB[memory_class(gpu)]) / GIB_MIB


def device_name(gpu: GPUSpec) -> str:
    """`current_platform.get_device_name()` as vLLM compares it ("a100" in name)."""
    return gpu.name


def is_cpu(gpu: GPUSpec) -> bool:
    """The device is vLLM's CPU platform (platforms/cpu.py:CpuPlatform), not a GPU."""
    return gpu.vendor == "cpu"
