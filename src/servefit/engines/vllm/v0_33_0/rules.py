"""What vLLM 0.33.0 decides its own way (paths inside the 0.33.0 wheel).

The shared flow is servefit/engines/vllm/resolve.py (engine args) and planning.py (memory).
"""

from __future__ import annotations

from math import lcm
from typing import Any

from servefit._plan.schema import Change
from servefit.engines.vllm import common
from servefit.engines.vllm.common import StateTensor
from servefit.engines.vllm.device import capability, cuda_total_gib
from servefit.errors import ArgumentError, EngineRejection, UnsupportedModelError
from servefit.hardware.spec import GPUSet
from servefit.model.layers import KDA, MLA, GatedDeltaNet, Mamba2, ShortConv
from servefit.model.spec import ModelSpec

VERSION = "0.33.0"
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vllm/config/cache.py:CacheConfig.gpu_memory_utilization
DEFAULT_BLOCK_SIZE = 16  # vllm/config/cache.py:CacheConfig.DEFAULT_BLOCK_SIZE
# model_executor/models/config.py:MODELS_CONFIG_MAP -> Qwen3_5ForConditionalGenerationConfig, and Qwen3_5ForCausalLMConfig for the text-only archs: the config's mamba_ssm_dtype
# (float32 in the Qwen3.5/3.6 configs) becomes mamba_ssm_cache_dtype when it is "auto"
QWEN35_SSM_DTYPE_ARCHS = frozenset(
    {
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
    }
)
# vllm/v1/attention/backends/gdn_attn.py
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
# vllm/config/cache.py: the deprecation message --mamba-cache-mode prints
MAMBA_CACHE_MODE_DEPRECATED = (
    "--mamba-cache-mode is deprecated and will be removed in v0.33.0. It has no effect: Mamba "
    "prefix caching follows --enable-prefix-caching."
)


def derived_max_model_len(model: ModelSpec) -> tuple[int, str | None]:
    """derive_max_model_len_and_key, then _get_and_verify_max_len (0.33.0): x the RoPE factor
    unless rope_type is su / longrope / llama3 / yarn / deepseek_yarn / deepseek_llama_scaling
    (YaRN's max_position_embeddings is already scaled)."""
    derived, key = common.derive_max_model_len_and_key(model)
    cfg = model.text_config or model.raw_config
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    unscaled = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
    if isinstance(rope, dict) and rope and "gemma3" not in model.model_type:
        nested = all(isinstance(x, dict) for x in rope.values())
        factor = 1.0
        for rp in rope.values() if nested else [rope]:
            if rp.get("rope_type", rp.get("type", "default")) not in unscaled:
                factor = rp.get("factor", factor) or 1.0
        derived *= factor
    return int(derived), key


def batch_defaults(gpus: GPUSet) -> tuple[int, int, str]:
    """vllm/engine/arg_utils.py:EngineArgs.get_batch_defaults, OPENAI_API_SERVER (vllm serve):
    >= 160 GiB: 16384 tokens / 1024 seqs; >= 70 GiB, not an A100, not GB10 (capability 12.1):
    8192 / 1024; else 2048 / 256."""
    total = cuda_total_gib(gpus.gpu)
    gb10 = capability(gpus.gpu) == (12, 1)
    if total >= 160:
        return 16384, 1024, f"{total:.1f} GiB device (>= 160 GiB): 16384 tokens, 1024 seqs"
    if total >= 70 and "a100" not in gpus.gpu.name.lower() and not gb10:
        return 8192, 1024, f"{total:.1f} GiB device, not an A100 or GB10: 8192 tokens, 1024 seqs"
    return 2048, 256, f"{total:.1f} GiB device (< 70 GiB, an A100 or a GB10): 2048 tokens, 256 seqs"


def prefix_caching_default(model: ModelSpec) -> tuple[bool, str]:
    """vllm/config/model.py:ModelConfig.is_prefix_caching_supported: "Generative hybrid models
    support prefix caching." (on by default since PR #50991)."""
    if model.is_hybrid and not model.attention_layer_ids:
        return False, "attention-free models do not support prefix caching"
    if model.is_hybrid:
        return True, "0.33.0 turns prefix caching on for hybrid models (Mamba cache mode align)"
    return True, "generative models support prefix caching"


def mamba_cache_mode(
    model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
) -> str:
    """vllm/model_executor/models/config.py:MambaModelConfig.verify_and_update_config: "align"
    with prefix caching, "none" without; --mamba-cache-mode is deprecated and ignored."""
    if v.get("mamba_cache_mode") is not None:
        logs.append(MAMBA_CACHE_MODE_DEPRECATED)
    if v["enable_prefix_caching"]:
        if not v["enable_chunked_prefill"]:
            raise EngineRejection(
                "AssertionError: Chunked prefill is required for Mamba prefix caching."
            )
        log = (
            f"Mamba cache mode is set to 'align' for {model.architecture} by default when "
            "prefix caching is enabled"
        )
        logs.append(log)
        changes.append(
            Change(
                arg="mamba_cache_mode",
                old="none",
                new="align",
                log=log,
                reason="prefix caching is on",
            )
        )
        return "align"
    return "none"


def mamba_state(
    model: ModelSpec, tp: int, num_spec: int, conv_dtype: str, ssm_dtype: str
) -> tuple[StateTensor, ...]:
    """get_mamba_state_shape_from_config / _dtype_from_config (0.33.0 mamba_utils.py): every
    Mamba2 family now passes num_spec; KDA's conv state gets num_spec and its recurrent state
    is float32 unless --mamba-ssm-cache-dtype says bfloat16/float32 (kda_state_dtype)."""
    layer = model.first_recurrent()
    if isinstance(layer, KDA):
        dim = common.divide(3 * layer.num_heads * layer.head_dim, tp, "KDA conv dim")
        rec = (common.divide(layer.num_heads, tp, "KDA heads"), layer.head_dim, layer.head_dim)
        if ssm_dtype not in ("auto", "float32", "bfloat16"):
            raise ArgumentError(
                f"KDA recurrent state supports only auto, float32, and bfloat16; got {ssm_dtype}"
            )
        rec_dtype = "float32" if ssm_dtype == "auto" else ssm_dtype
        return (
            StateTensor((layer.conv_kernel - 1 + num_spec, dim), conv_dtype),
            StateTensor(rec, rec_dtype),
        )
    ssm_dtype = conv_dtype if ssm_dtype == "auto" else ssm_dtype  # _mamba_state_dtype
    if isinstance(layer, GatedDeltaNet):
        return common.gdn_state(layer, tp, num_spec, conv_dtype, ssm_dtype)
    if isinstance(layer, Mamba2):
        if layer.n_groups == 0:  # Mamba-1 (Jamba)
            return common.mamba1_state(layer, tp, conv_dtype, ssm_dtype)
        return common.mamba2_state(layer, tp, num_spec, conv_dtype, ssm_dtype)
    if isinstance(layer, ShortConv):
        return common.short_conv_state(model, layer, tp, conv_dtype)
    kind = layer.kind if layer is not None else "this model"
    raise UnsupportedModelError(f"{model.name}: vLLM {VERSION} has no Mamba state for {kind}")


def _flashinfer_gdn(model: ModelSpec, gpus: GPUSet) -> bool:
    """qwen_gdn_linear_attn.py:_resolve_gdn_prefill_backend ("auto"): FlashInfer on SM90; on
    the SM10x and SM12x families only with linear_key_head_dim 128 and CUDA runtime >= 13 (the
    0.33.0 PyPI wheel depends on cu13 packages, so that holds)."""
    cap = capability(gpus.gpu)
    if cap is None:
        return False
    if cap == (9, 0):
        return True
    layer = model.first_recurrent()
    return cap[0] in (10, 12) and isinstance(layer, GatedDeltaNet) and layer.state_size == 128


def block_alignment(model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> tuple[int, int]:
    """(Phase-1 block size, kernel alignment), Platform._align_hybrid_block_size (0.33.0): the
    backends' smallest kernel block (16: FLASH_ATTN MultipleOf(16), FLASHINFER [16, 32, 64]),
    at least cache_config.block_size; >= 128 for MLA; and in align mode the lcm with every
    Mamba layer's prefill-checkpoint alignment (64 for Qwen GDN on the FlashInfer prefill path,
    get_mamba_prefill_checkpoint_alignment; Mamba2 declares none)."""
    smallest = DEFAULT_BLOCK_SIZE
    block = v.get("block_size") or smallest
    align = max(smallest, block)
    if isinstance(model.first_attention(), MLA):
        align = max(align, 128)
    if v.get("mamba_cache_mode") == "align" and _gdn_checkpoints(model, gpus, v):
        align = lcm(align, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
    return block, align


def _gdn_checkpoints(model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> bool:
    """QwenGatedDeltaNetAttention._exports_checkpoints: align mode + FlashInfer GDN prefill,
    and every Mamba layer of the model is such a layer."""
    return (
        v.get("mamba_cache_mode") == "align"
        and isinstance(model.first_recurrent(), GatedDeltaNet)
        and _flashinfer_gdn(model, gpus)
    )


def mamba_blocks_per_request(model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> int:
    """MambaSpec.max_memory_usage_bytes / page (0.33.0): none 1 + k; align 2 + k + the prefill
    checkpoint block (Mamba2: always 1, mamba_mixer2.py; Qwen GDN: 1 when it exports
    checkpoints; KDA: 1 only with a checkpointing prefill backend, taken as none here)."""
    k = v["num_speculative_tokens"]
    if v["mamba_cache_mode"] != "align":
        return 1 + k
    layer = model.first_recurrent()
    ckpt = 0
    if isinstance(layer, GatedDeltaNet):
        ckpt = int(_gdn_checkpoints(model, gpus, v))
    elif isinstance(layer, Mamba2) and layer.n_groups != 0:
        ckpt = 1
    return 2 + k + ckpt


def graph_counts(gpus: GPUSet, v: dict[str, Any]) -> dict[str, int]:
    """Graphs the V2 runner captures (vllm/v1/worker/gpu/cudagraph_utils.py): PIECEWISE every
    capture size of VllmConfig._set_cudagraph_sizes (largest default 1024 on the SM100 family,
    else 512), FULL the uniform-decode sizes (<= max_num_seqs x (1 + k)). The speculative
    decode tiers of 0.33.0 are counted as one tier; only the 1 MiB-per-graph term depends on it."""
    cap = capability(gpus.gpu)
    q = 1 + v["num_speculative_tokens"]
    sizes = common.capture_sizes(v, 1024 if cap is not None and cap[0] == 10 else 512)
    mode = v["cudagraph_mode"]
    out: dict[str, int] = {}
    if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") and sizes:
        out["PIECEWISE"] = len(sizes)
    if mode in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL"):
        full = [s for s in sizes if q <= s <= q * v["max_num_seqs"]]
        if full:
            out["FULL"] = len(full)
    return out


# Planning (servefit/engines/vllm/planning.py)
# kv_cache_planning.py:get_kv_cache_configs checks available - one block (the null block).
NULL_BLOCK_IN_CHECK = True
# Hybrids run on Model Runner V2, whose CUDA-graph profiling logs neither V1 line.
V1_GRAPH_LOGS = False


def capacity_logs(tokens: int, max_model_len: int, concurrency: float) -> list[str]:
    """kv_cache_utils.py:update_kv_cache_capacity (0.33.0): one line, "%s KV cache size" with the
    device name, "GPU" on CUDA."""
    return [
        f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {max_model_len:,} tokens "
        f"per request: {concurrency:.2f}x"
    ]
