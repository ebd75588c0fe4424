"""What vLLM 0.24.0 decides its own way (paths inside the 0.24.0 wheel).

The shared flow is servefit/engines/vllm/resolve.py (engine args) and planning.py (memory).
"""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Change
from servefit.engines.vllm import common
from servefit.engines.vllm.common import StateTensor, cdiv
from servefit.engines.vllm.device import capability, cuda_total_gib
from servefit.errors import EngineRejection, UnsupportedModelError
from servefit.hardware.spec import GPUSet
from servefit.model.layers import KDA, MLA, GatedDeltaNet, Mamba2, ShortConv
from servefit.model.spec import ModelSpec

VERSION = "0.24.0"
# vllm/config/cache.py:CacheConfig.gpu_memory_utilization (0.92 since 0.21.0, PR #38284)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_BLOCK_SIZE = 16  # vllm/config/cache.py:CacheConfig.DEFAULT_BLOCK_SIZE
# model_executor/models/config.py:MODELS_CONFIG_MAP -> Qwen3_5ForConditionalGenerationConfig for the two ForConditionalGeneration archs: the config's mamba_ssm_dtype
# (float32 in the Qwen3.5/3.6 configs) becomes mamba_ssm_cache_dtype when it is "auto"
QWEN35_SSM_DTYPE_ARCHS = frozenset(
    {"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}
)
# Architectures that declare SupportsMambaPrefixCaching in 0.24.0 (model_executor/models/*.py);
# with prefix caching on they get Mamba cache mode "all", every other hybrid "align".
MAMBA_PREFIX_CACHING = frozenset(
    {
        "NemotronHForCausalLM",
        "JambaForCausalLM",
        "Mamba2ForCausalLM",
        "MambaForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "Zamba2ForCausalLM",
    }
)
# get_mamba_state_shape_from_config passes num_spec (speculative tokens) for these Mamba2 models
# only (nemotron_h.py, mamba2.py); granitemoehybrid / falcon_h1 / zamba2 do not in 0.24.0.
_MAMBA2_NUM_SPEC = frozenset({"NemotronHForCausalLM", "Mamba2ForCausalLM"})


def derived_max_model_len(model: ModelSpec) -> tuple[int, str | None]:
    """vllm/transformers_utils/model_arch_config_convertor.py:derive_max_model_len_and_key (the
    smallest length key; model_max_length wins), then _get_and_verify_max_len's RoPE scaling:
    x factor unless rope_type is su / longrope / llama3; yarn starts from
    original_max_position_embeddings (0.24.0)."""
    derived, key = common.derive_max_model_len_and_key(model)
    cfg = model.text_config or model.raw_config
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if isinstance(rope, dict) and rope and "gemma3" not in model.model_type:
        nested = all(isinstance(x, dict) for x in rope.values())
        factor = 1.0
        for rp in rope.values() if nested else [rope]:
            rtype = rp.get("rope_type", rp.get("type", "default"))
            if rtype not in ("su", "longrope", "llama3"):
                factor = rp.get("factor", factor) or 1.0
                if rtype == "yarn":
                    derived = rp["original_max_position_embeddings"]
        derived *= factor
    return int(derived), key


def batch_defaults(gpus: GPUSet) -> tuple[int, int, str]:
    """vllm/engine/arg_utils.py:EngineArgs.get_batch_defaults, OPENAI_API_SERVER (vllm serve):
    8192 tokens / 1024 seqs when device memory >= 70 GiB and "a100" is not in the device name,
    else 2048 / 256."""
    total = cuda_total_gib(gpus.gpu)
    if total >= 70 and "a100" not in gpus.gpu.name.lower():
        return 8192, 1024, f"{total:.1f} GiB device, not an A100: 8192 tokens, 1024 seqs"
    return 2048, 256, f"{total:.1f} GiB device (< 70 GiB or an A100): 2048 tokens, 256 seqs"


def prefix_caching_default(model: ModelSpec) -> tuple[bool, str]:
    """vllm/config/model.py:ModelConfig.is_prefix_caching_supported: False for attn_type
    "hybrid" ("Hybrid models do not support prefix caching since the feature is still
    experimental.")."""
    if model.is_hybrid and not model.attention_layer_ids:
        return False, "attention-free models do not support prefix caching"
    if model.is_hybrid:
        return False, "0.24.0 turns prefix caching off by default for hybrid models"
    return True, "generative models support prefix caching"


def mamba_cache_mode(
    model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
) -> str:
    """vllm/model_executor/models/config.py:MambaModelConfig.verify_and_update_config."""
    mode = v.get("mamba_cache_mode") or "none"
    supports_all = model.architecture in MAMBA_PREFIX_CACHING
    if v["enable_prefix_caching"]:
        if mode == "none":
            mode = "all" if supports_all else "align"
            log = (
                f"Mamba cache mode is set to '{mode}' for {model.architecture} by default when "
                "prefix caching is enabled"
            )
            logs.append(log)
            changes.append(
                Change(
                    arg="mamba_cache_mode",
                    old="none",
                    new=mode,
                    log=log,
                    reason="prefix caching is on",
                )
            )
        if mode == "all" and not supports_all:
            mode = "align"
            logs.append(
                "Hybrid or mamba-based model detected without support for prefix caching "
                "with Mamba cache 'all' mode: falling back to 'align' mode."
            )
        if mode == "align" and not v["enable_chunked_prefill"]:
            raise EngineRejection(
                "AssertionError: Chunked prefill is required for mamba cache mode 'align'."
            )
        logs.append(
            f"Warning: Prefix caching in Mamba cache '{mode}' mode is currently enabled. "
            "Its support for Mamba layers is experimental. Please report any issues you "
            "may observe."
        )
        return mode
    if mode != "none":
        logs.append("Mamba cache mode is set to 'none' when prefix caching is disabled")
    return "none"


def mamba_state(
    model: ModelSpec, tp: int, num_spec: int, conv_dtype: str, ssm_dtype: str
) -> tuple[StateTensor, ...]:
    """get_mamba_state_shape_from_config / _dtype_from_config of the model class, via
    vllm/model_executor/layers/mamba/mamba_utils.py (0.24.0)."""
    layer = model.first_recurrent()
    ssm_dtype = conv_dtype if ssm_dtype == "auto" else ssm_dtype  # _mamba_state_dtype
    if isinstance(layer, GatedDeltaNet):
        return common.gdn_state(layer, tp, num_spec, conv_dtype, ssm_dtype)
    if isinstance(layer, Mamba2):
        if layer.n_groups == 0:  # Mamba-1 (Jamba)
            return common.mamba1_state(layer, tp, conv_dtype, ssm_dtype)
        spec = num_spec if model.architecture in _MAMBA2_NUM_SPEC else 0
        return common.mamba2_state(layer, tp, spec, conv_dtype, ssm_dtype)
    if isinstance(layer, KDA):
        # kda_state_shape: conv (K - 1, (heads x dim x 3) / tp), no num_spec; kda_state_dtype:
        # the recurrent state is always float32.
        dim = common.divide(3 * layer.num_heads * layer.head_dim, tp, "KDA conv dim")
        rec = (common.divide(layer.num_heads, tp, "KDA heads"), layer.head_dim, layer.head_dim)
        return StateTensor((layer.conv_kernel - 1, dim), conv_dtype), StateTensor(rec, "float32")
    if isinstance(layer, ShortConv):
        return common.short_conv_state(model, layer, tp, conv_dtype)
    kind = layer.kind if layer is not None else "this model"
    raise UnsupportedModelError(f"{model.name}: vLLM {VERSION} has no Mamba state for {kind}")


def block_alignment(model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> tuple[int, int]:
    """(Phase-1 block size, kernel alignment) of Platform.update_block_size_for_backend /
    _align_hybrid_block_size: the backend's preferred size is 16 (FLASH_ATTN MultipleOf(16), or
    [16, 32, 64] for hybrids with a float32 Mamba state; FLASHINFER / TRITON_ATTN 16);
    FLASHINFER_MLA, the MLA default on SM10x, supports [32, 64]. The alignment is
    max(that minimum, cache_config.block_size)."""
    cap = capability(gpus.gpu)
    smallest = (
        32
        if isinstance(model.first_attention(), MLA) and cap and cap[0] == 10
        else DEFAULT_BLOCK_SIZE
    )
    block = v.get("block_size") or smallest
    return block, max(smallest, block)


def mamba_blocks_per_request(model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> int:
    """MambaSpec.max_memory_usage_bytes / page (0.24.0): none 1 + k, align 2 + k,
    all cdiv(max_model_len, mamba_block_size) + k."""
    k = v["num_speculative_tokens"]
    mode = v["mamba_cache_mode"]
    if mode == "all":
        return cdiv(v["max_model_len"], v["mamba_block_size"]) + k
    return (2 if mode == "align" else 1) + k


def graph_counts(gpus: GPUSet, v: dict[str, Any]) -> dict[str, int]:
    """Graphs per mode in gpu_model_runner.py:profile_cudagraph_memory (V1 runner, which 0.24.0
    uses for hybrids): PIECEWISE every capture size; FULL the uniform-decode sizes of
    cudagraph_dispatcher.py (q <= size <= max_num_seqs x q); with speculative decoding and FULL
    decode graphs the sizes are first rounded to multiples of q
    (CompilationConfig.adjust_cudagraph_sizes_for_spec_decode)."""
    mode = v["cudagraph_mode"]
    q = 1 + v["num_speculative_tokens"]
    sizes = common.capture_sizes(v, 512)
    if q > 1 and mode in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL") and sizes:
        top = sizes[-1]
        sizes = sorted({cdiv(s, q) * q for s in sizes if cdiv(s, q) * q <= top}) or (
            [q] if q <= top else []
        )
    out: dict[str, int] = {}
    if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") and sizes:
        out["PIECEWISE"] = len(sizes)
        v["_piecewise_largest"] = sizes[-1]
    if mode in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL"):
        full = [s for s in sizes if q <= s <= q * v["max_num_seqs"]]
        if full:
            out["FULL"] = len(full)
            v["_full_largest"] = full[-1]
    return out


# Planning (servefit/engines/vllm/planning.py)
# kv_cache_utils.py:get_kv_cache_configs checks each worker's available memory as is.
NULL_BLOCK_IN_CHECK = False
# Hybrids run on the V1 model runner in 0.24.0, whose profile_cudagraph_memory logs both lines.
V1_GRAPH_LOGS = True


def capacity_logs(tokens: int, max_model_len: int, concurrency: float) -> list[str]:
    """kv_cache_utils.py:get_kv_cache_configs (0.24.0): two lines."""
    return [
        f"GPU KV cache size: {tokens:,} tokens",
        f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x",
    ]
