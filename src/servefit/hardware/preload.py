"""Free GPU memory right before weights load, per rank (the engine's pre-load baseline).

SGLang measures it after torch.distributed/NCCL init and before weights and logs it as
"Load weight begin. avail mem=X GB" (GB = GiB); it is `pre_model_load_memory` (v0.5.23) /
`min_per_gpu_memory` (v0.5.9), min-reduced over ranks (shared/reference/sglang-memory.md §2.1).
vLLM's counterpart is `init_snapshot.free_memory`, taken after NCCL init and the cuBLAS warm-up
(shared/reference/vllm-memory.md §1.1); vLLM only compares it with `total × utilization`.

Model, per rank, in MiB (nvidia-smi units):

    free = memory_mib − context − nccl_per_peer × peers − comm_base − custom_all_reduce

Every constant below is fitted to a ground-truth log (shared/ground-truth) or read from engine
source; docs/gpus.md has the fit table with the residual per log.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, TypedDict

from servefit.errors import ArgumentError, EngineVersionError, HardwareError
from servefit.frozen import frozen
from servefit.hardware.spec import GPUSet, GPUSpec

if TYPE_CHECKING:
    from typing_extensions import Unpack

ENGINES = ("sglang", "vllm")

# Memory gone before the baseline on one GPU: driver reservation hidden from CUDA, CUDA context,
# torch/engine init. By context class (gpus.json "context_class"). Fits, MiB:
CONTEXT_MIB: dict[str, float] = {
    # sgl_qwen38_27b_fp8_1xh100_v0518 (SGLang 0.5.18, TP1): 81559 − (50.01 + 28.47) × 1024 = 1195.5
    "nvidia-hbm": 1195.0,
    # mean of two points: L4 TP4 (sgl_qwq32b_4xL4_tp4_g6_12xlarge): 23034 − 21.63×1024 − 0.13×1024
    # (logged NCCL init) = 751.8; RTX 3090 TP1 (vllm_v0_llama31_8b_1x3090_maxlen20k_v10517):
    # 24576 − (23.58 − (15.34 − 14.9888)) × 1024 = 789.7
    "nvidia-gddr": 771.0,
    # sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm: 294896 − (258.78 + 28.49) × 1024 = 731.5
    "amd": 732.0,
    # sgl_qwen35_35b_a3b_int4_dflash_1xgb10_extra_buffer: 122570 − (92.51 + 20.44) × 1024 = 6909.2.
    # Unified memory: SGLang reads psutil available memory, so this is the OS + desktop share.
    "unified": 6909.0,
}

# NCCL communicator buffers per extra peer (TP peers, plus one per extra PP/DP stage).
# L4 TP4, custom all-reduce off: "Init torch distributed ends. mem usage=0.13 GB" = 133 MiB / 3.
PER_PEER_MIB: dict[str, float] = {"nvidia": 44.0, "amd": 0.0}

# Fixed extra once world_size > 1. MI355X TP2 (sgl_qwen38_27b_fp8_2xmi355x_tp2_v0517rocm):
# 294896 − (264.75 + 14.49) × 1024 − 732 − 24 (custom AR) = 8198.2. One point: whether it is fixed
# or per peer cannot be told apart; fixed is chosen (per peer would give 57 GiB at TP8).
COMM_BASE_MIB: dict[str, float] = {"nvidia": 0.0, "amd": 8198.0}

# Custom all-reduce buffers from the engine source, not fitted: max_size = 8 MiB
# (sglang/srt/distributed/device_communicators/custom_all_reduce.py and the vLLM file of the same
# name): meta buffer (meta_size + max_size) + shared buffer (max_size) + rank_data (8 MiB).
CUSTOM_AR_MIB = 24.0
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)


@frozen
class PreloadBreakdown:
    """The components of the pre-load free memory of one rank, MiB."""

    gpu_key: str
    engine: str
    world_size: int
    tp: int
    total_mib: float
    context_mib: float
    nccl_mib: float
    nccl_peers: int
    comm_base_mib: float
    custom_ar_mib: float
    custom_ar_note: str

    @property
    def free_mib(self) -> float:
        return (
            self.total_mib
            - self.context_mib
            - self.nccl_mib
            - self.comm_base_mib
            - self.custom_ar_mib
        )

    @property
    def free_gib(self) -> float:
        return self.free_mib / 1024.0


def custom_all_reduce_on(
    gpu: GPUSpec, tp: int, *, engine: str = "sglang", enable_p2p_check: bool = False
) -> tuple[bool, str]:
    """Whether the engine's custom all-reduce comes up, and why (CustomAllreduce.__init__ rules)."""
    if tp == 1:
        return False, "TP1: no all-reduce"
    if tp not in CUSTOM_AR_WORLD_SIZES:
        return False, f"TP{tp} not in {CUSTOM_AR_WORLD_SIZES}"
    if gpu.unified_memory:
        return False, "GB10 peers are separate nodes: no CUDA IPC"
    if tp > 2 and not gpu.fully_connected:
        return False, "off: more than two PCIe-only GPUs"
    # SGLang assumes P2P unless --enable-p2p-check; vLLM always checks. Stock GeForce drivers
    # have no P2P, so the check fails there.
    if (engine == "vllm" or enable_p2p_check) and "geforce" in gpu.name.lower():
        return False, "off: P2P check fails on GeForce"
    return True, "on"


class EngineOptions(TypedDict, total=False):
    """What else `breakdown` reads, as keywords the other functions here pass on to it."""

    engine: str
    custom_all_reduce: bool | None
    enable_p2p_check: bool


@lru_cache(maxsize=256)  # a pure function of its arguments, asked again for every plan of fit
def breakdown(
    gpu: GPUSpec,
    *,
    world_size: int,
    tp: int,
    engine: str = "sglang",
    custom_all_reduce: bool | None = None,
    enable_p2p_check: bool = False,
) -> PreloadBreakdown:
    """Components of the pre-load free memory. `custom_all_reduce=False` mirrors
    --disable-custom-all-reduce; None applies the engine's own rules."""
    if engine not in ENGINES:
        raise EngineVersionError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if tp < 1 or world_size < 1 or world_size % tp:
        raise ArgumentError(
            f"world_size={world_size} must be a positive multiple of tp={tp} (TP x PP x DP)"
        )
    if gpu.memory_mib <= 0:
        raise HardwareError(f"{gpu.name}: memory_mib must be positive, got {gpu.memory_mib}")
    if custom_all_reduce is None:
        car, note = custom_all_reduce_on(gpu, tp, engine=engine, enable_p2p_check=enable_p2p_check)
    else:
        car = custom_all_reduce and tp > 1
        note = "on (forced)" if car else "off (--disable-custom-all-reduce)"
    peers = (tp - 1) + (world_size // tp - 1)
    return PreloadBreakdown(
        gpu_key=gpu.key,
        engine=engine,
        world_size=world_size,
        tp=tp,
        total_mib=float(gpu.memory_mib),
        context_mib=gpu.context_mib,
        nccl_mib=gpu.per_peer_mib * peers,
        nccl_peers=peers,
        comm_base_mib=gpu.comm_base_mib if world_size > 1 else 0.0,
        custom_ar_mib=CUSTOM_AR_MIB if car else 0.0,
        custom_ar_note=note,
    )


def pre_load_free_gib(
    gpu: GPUSpec, *, world_size: int, tp: int, **options: Unpack[EngineOptions]
) -> float:
    """Predicted free GiB per rank before weights load ("Load weight begin. avail mem")."""
    b = breakdown(gpu, world_size=world_size, tp=tp, **options)
    if b.free_mib <= 0:
        raise HardwareError(
            f"{gpu.name}: nothing left before weights ({b.free_mib:.0f} MiB); check --gpu-mem-mib"
        )
    return b.free_gib


def pre_load_free_gib_for(gpus: GPUSet, *, tp: int, **options: Unpack[EngineOptions]) -> float:
    """Same, for a GPUSet (world size = gpus.count): a user's --free-gib override wins."""
    if gpus.free_gib_override is not None:
        if gpus.free_gib_override <= 0:
            raise HardwareError(f"--free-gib must be positive, got {gpus.free_gib_override}")
        return gpus.free_gib_override
    return pre_load_free_gib(gpus.gpu, world_size=gpus.count, tp=tp, **options)


def describe(gpu: GPUSpec, *, world_size: int, tp: int, **options: Unpack[EngineOptions]) -> str:
    """Multi-line explanation of the pre-load figure, for `servefit explain`."""
    b = breakdown(gpu, world_size=world_size, tp=tp, **options)
    where = (
        'SGLang "Load weight begin. avail mem"'
        if b.engine == "sglang"
        else "vLLM init snapshot free memory"
    )
    amd = gpu.vendor == "amd"
    if gpu.unified_memory:
        total_label, ctx_label = "OS-visible unified memory", "OS + runtime share"
    else:
        total_label = "rocm-smi VRAM total" if amd else "nvidia-smi memory.total"
        ctx_label = "driver + HIP context" if amd else "driver + CUDA context"
    peers = f"{b.nccl_peers} peer" + ("" if b.nccl_peers == 1 else "s")
    rows = [
        (total_label, b.total_mib, ""),
        (f"- {ctx_label}", b.context_mib, "fitted, docs/gpus.md"),
        (f"- {'RCCL' if amd else 'NCCL'} buffers ({peers})", b.nccl_mib, ""),
    ]
    if b.comm_base_mib:
        rows.append(("- multi-GPU base (ROCm)", b.comm_base_mib, "fitted on MI355X TP2"))
    rows.append(("- custom all-reduce", b.custom_ar_mib, b.custom_ar_note))
    lines = [
        f"Free memory before weights, per rank ({where}), {gpu.name}, TP{tp}/world {world_size}:"
    ]
    for label, mib, note in rows:
        lines.append(f"  {label:<34} {mib:>9.0f} MiB  {note}".rstrip())
    lines.append(f"  {'= free before weights':<34} {b.free_mib:>9.0f} MiB  ({b.free_gib:.2f} GiB)")
    lines.append(
        "  Boot-to-boot spread is about 0.1-0.3 GiB; pass --free-gib to use a measured value."
    )
    return "\n".join(lines)
