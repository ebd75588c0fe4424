"""SGLang rules that are identical in every mirrored release (0.5.9 and 0.5.23).

Only code that reads the same in both wheels lives here; anything that differs is in the
version module. Citations are paths inside the wheels (`pip download --no-deps sglang==V`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from servefit._plan.schema import Consumer
from servefit.errors import EngineRejection
from servefit.frozen import frozen
from servefit.model.cache import by_identity
from servefit.model.layers import MLA
from servefit.model.spec import ModelSpec
from servefit.units import DTYPE_BYTES, GiB

# An error the engine itself raises while resolving args; str() is the engine's text.
EngineError = EngineRejection


# the dtype names the SGLang profiles size mamba state in (conv / ssm)
STATE_DTYPES = frozenset({"float32", "bfloat16", "float16"})

# torch dtype names SGLang prints ("Using KV cache dtype: torch.bfloat16").
KV_DTYPES: dict[str, tuple[str, float]] = {
    "bfloat16": ("torch.bfloat16", 2),
    "float16": ("torch.float16", 2),
    "float32": ("torch.float32", 4),
    "fp8_e4m3": ("torch.float8_e4m3fn", 1),
    "fp8_e5m2": ("torch.float8_e5m2", 1),
    "fp4_e2m1": ("torch.float4_e2m1fn_x2", 1),
}


def kv_cache_dtype(model: ModelSpec, flag: str) -> str:
    """Resolve --kv-cache-dtype to a key of KV_DTYPES.

    sglang/srt/model_executor/model_runner.py:configure_kv_cache_dtype (0.5.9; same rules in
    0.5.23's kv-cache dtype resolution): "auto" is the model dtype unless the checkpoint's
    quant config has kv_cache_quant_algo == "FP8", then float8_e4m3fn.
    """
    if flag in ("auto", None):
        if model.quant.kv_cache_fp8:
            return "fp8_e4m3"
        return model.dtype if model.dtype in KV_DTYPES else "bfloat16"
    if flag in ("bf16", "bfloat16"):
        return "bfloat16"
    if flag in ("fp8_e4m3", "fp8_e5m2", "fp4_e2m1"):
        return flag
    raise EngineRejection(f"ValueError: Unsupported kv_cache_dtype: {flag}.")


def element_size(kv_dtype: str) -> int:
    # torch._utils._element_size: float4_e2m1fn_x2 packs two values in one byte.
    return int(KV_DTYPES[kv_dtype][1])


def context_len(model: ModelSpec, context_length: int | None, env: dict[str, str]) -> int:
    """sglang/srt/configs/model_config.py:ModelConfig._derive_context_length (same in both).

    Raises the engine's ValueError text when the user asks for more than the derived length.
    """
    derived = derived_context_len(model)
    if context_length is None:
        return derived
    if context_length > derived and env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") not in (
        "1",
        "true",
        "True",
    ):
        msg = (
            f"Warning: User-specified context_length ({context_length}) is greater than the derived "
            f"context_length ({derived}). This may lead to incorrect model outputs or CUDA errors. "
            "Note that the derived context_length may differ from max_position_embeddings in the "
            "model's config."
        )
        raise EngineError(
            f"ValueError: {msg} To allow overriding this maximum, set the env var "
            "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
        )
    return context_length


def derived_context_len(model: ModelSpec) -> int:
    # sglang/srt/utils/hf_transformers_utils.py:get_context_length
    cfg = model.text_config or model.raw_config
    rope = cfg.get("rope_scaling") or (
        cfg.get("rope_parameters") if "rope_scaling" not in cfg else None
    )
    factor = 1
    if isinstance(rope, dict) and rope:
        factor = rope.get("factor", 1) or 1
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1
    for key in (
        "max_sequence_length",
        "seq_length",
        "max_seq_len",
        "model_max_length",
        "max_position_embeddings",
    ):
        val = cfg.get(key)
        if val is not None:
            return int(factor * val)
    return 2048


def decode_capture_bs(max_bs: int, speculative: bool, disable_padding: bool = False) -> list[int]:
    """sglang/srt/server_args.py:ServerArgs._generate_cuda_graph_batch_sizes (0.5.9); a new
    list each time (callers append to it)."""
    return list(_decode_capture_bs(max_bs, speculative, disable_padding))


@lru_cache(maxsize=256)  # fit resolves the same few max batch sizes thousands of times
def _decode_capture_bs(max_bs: int, speculative: bool, disable_padding: bool) -> tuple[int, ...]:
    if disable_padding:
        bs = list(range(1, max_bs + 1))
    elif not speculative:
        bs = (
            [1, 2, 4, 8, 12]
            + list(range(16, 257, 8))
            + list(range(272, 512, 16))
            + list(range(512, max_bs + 1, 32))
        )
    else:
        bs = (
            list(range(1, 9))
            + list(range(10, 33, 2))
            + list(range(40, 65, 4))
            + list(range(72, 257, 8))
            + list(range(272, max_bs + 1, 16))
        )
    return tuple(b for b in bs if b <= max_bs)


_PREFILL_GRAPH_STEPS = (
    range(4, 33, 4),
    range(48, 257, 16),
    range(288, 513, 32),
    range(576, 1025, 64),
    range(1280, 4097, 256),
)


def prefill_graph_tokens(max_tokens: int) -> list[int]:
    """sglang/srt/server_args.py:ServerArgs._generate_piecewise_cuda_graph_tokens (0.5.9)."""
    sizes = [s for r in _PREFILL_GRAPH_STEPS for s in r] + list(range(4608, max_tokens + 1, 512))
    return [s for s in sizes if s <= max_tokens]


@lru_cache(maxsize=256)  # asked on every plan with the same few chunk sizes
def prefill_graph_count(max_tokens: int) -> int:
    """len(prefill_graph_tokens(max_tokens)), without building the list: a huge
    --chunked-prefill-size would otherwise cost gigabytes here."""
    fixed = sum(1 for r in _PREFILL_GRAPH_STEPS for s in r if s <= max_tokens)
    return fixed + len(range(4608, max_tokens + 1, 512))


def vlm_adjusted_fraction(
    mem_fraction_static: float, vision_config: dict[str, Any] | None
) -> float:
    """ServerArgs.adjust_mem_fraction_for_vlm (0.5.9 server_args.py; same formula in 0.5.23).

    The engine reads getattr(vision_config, "num_hidden_layers", 24): Qwen3.5's vision config
    names its depth `depth`, so 24 is used. The result is not re-rounded.
    """
    if vision_config is None:
        return mem_fraction_static
    layers = vision_config.get("num_hidden_layers", 24)
    hidden = vision_config.get("hidden_size", 1024)
    ratio = layers * hidden**2 / (24 * 1024**2)
    factor = max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return mem_fraction_static * (0.95 * factor)


@frozen
class StateCost:
    """Recurrent state bytes per request on one rank (BaseLinearStateParams.mamba_cache_per_req)."""

    layers: int
    conv_bytes: int  # all layers
    ssm_bytes: int  # all layers
    conv_dtype: str
    ssm_dtype: str
    conv_shapes: tuple[tuple[int, ...], ...]
    temporal_shape: tuple[int, ...]

    @property
    def per_req(self) -> int:
        return self.conv_bytes + self.ssm_bytes


# Config classes whose mamba2_cache_params pass dtype=mamba2_state_dtype(self), i.e. honour the
# config's mamba_ssm_dtype (sglang/srt/configs/{qwen3_next,nemotron_h,falcon_h1,lfm2,jet_nemotron}.py).
# GraniteMoeHybrid, KimiLinear and Bailing build their params without it: env/flag only.
_CONFIG_DTYPE_TYPES = (
    "qwen3_next",
    "qwen3_5",
    "qwen3_5_text",
    "qwen3_5_moe",
    "qwen3_5_moe_text",
    "nemotron_h",
    "falcon_h1",
    "lfm2",
    "lfm2_moe",
    "jet_nemotron",
)


def state_cost(
    model: ModelSpec, attn_tp: int, ssm_dtype_flag: str | None, env: dict[str, str]
) -> StateCost | None:
    """Per-request recurrent state on one attention-TP rank.

    sglang/srt/configs/mamba_utils.py:BaseLinearStateParams.mamba_cache_per_req =
    (sum(prod(conv)) * conv.itemsize + prod(temporal) * temporal.itemsize) * len(layers);
    dtypes from mamba_utils.py:mamba2_state_dtype: conv = SGLANG_MAMBA_CONV_DTYPE (bfloat16),
    ssm = float32 -> config mamba_ssm_dtype -> SGLANG_MAMBA_SSM_DTYPE (set by --mamba-ssm-dtype,
    server_args.py:_handle_environment_variables).
    """
    if not model.recurrent_layer_ids:
        return None
    conv_env, ssm_env = env.get("SGLANG_MAMBA_CONV_DTYPE"), env.get("SGLANG_MAMBA_SSM_DTYPE")
    key = ("sgl_state", attn_tp, ssm_dtype_flag, conv_env, ssm_env)
    return by_identity(model, key, lambda: _state_cost(model, attn_tp, ssm_dtype_flag, env))


def _state_cost(
    model: ModelSpec, attn_tp: int, ssm_dtype_flag: str | None, env: dict[str, str]
) -> StateCost:
    ids = model.recurrent_layer_ids
    mixer = model.recurrent_mixer(ids[0])
    shapes = mixer.state_shapes(attn_tp)
    conv_dtype = env.get("SGLANG_MAMBA_CONV_DTYPE", "bfloat16")
    if conv_dtype not in STATE_DTYPES:
        conv_dtype = "bfloat16"
    ssm_dtype = "float32"
    if model.mamba_ssm_dtype in STATE_DTYPES and model.model_type in _CONFIG_DTYPE_TYPES:
        ssm_dtype = model.mamba_ssm_dtype
    override = ssm_dtype_flag or env.get("SGLANG_MAMBA_SSM_DTYPE")
    if override in STATE_DTYPES:
        ssm_dtype = override
    n = len(ids)
    return StateCost(
        layers=n,
        conv_bytes=shapes.conv_elems * DTYPE_BYTES[conv_dtype] * n,
        ssm_bytes=shapes.temporal_elems * DTYPE_BYTES[ssm_dtype] * n,
        conv_dtype=conv_dtype,
        ssm_dtype=ssm_dtype,
        conv_shapes=shapes.conv,
        temporal_shape=shapes.temporal,
    )


def kv_cell_size(model: ModelSpec, attn_tp: int, num_layers: int, kv_dtype: str) -> int:
    """Bytes of KV per token on one rank.

    sglang/srt/model_executor/model_runner_kv_cache_mixin.py:get_cell_size_per_token (0.5.9;
    0.5.23 pool_configurator.py:_compute_cell_size): MHA/GQA
    get_num_kv_heads(attn_tp) * (head_dim + v_head_dim) * layers * kv_size; MLA
    (kv_lora_rank + qk_rope_head_dim) * layers * kv_size; fp4 halves plus scales.
    """
    attn = model.first_attention()
    if attn is None:
        return 0
    kv_size = element_size(kv_dtype)
    if isinstance(attn, MLA):
        cell = (attn.kv_lora_rank + attn.qk_rope_head_dim) * num_layers * kv_size
        if kv_dtype == "fp4_e2m1":
            cell = (
                cell // 2
                + ((attn.kv_lora_rank + attn.qk_rope_head_dim) // 16) * num_layers * kv_size
            )
        return cell
    cell = attn.kv_elems_per_token(attn_tp) * num_layers * kv_size
    if kv_dtype == "fp4_e2m1":
        n = attn.kv_heads_per_rank(attn_tp)
        cell = cell // 2 + (n * attn.head_dim * num_layers * 2 * kv_size) // 16
    return cell


def gib(nbytes: float) -> float:
    return nbytes / GiB


def f2(x: float) -> str:
    """SGLang's `{x:.2f}` formatting."""
    return f"{x:.2f}"


def floor_div(a: float, b: float) -> int:
    return int(math.floor(a / b)) if b else 0


def pp_indices(num_layers: int, pp_rank: int, pp_size: int) -> tuple[int, int]:
    """sglang/srt/distributed/utils.py:get_pp_indices (no SGLANG_PP_LAYER_PARTITION):
    the last `remainder` stages get one extra layer."""
    base, rem = divmod(num_layers, pp_size)
    if pp_rank >= pp_size - rem:
        start = pp_rank * (base + 1) - (pp_size - rem)
        return start, start + base + 1
    start = pp_rank * base
    return start, start + base


def most_per_stage(model: ModelSpec, kind: str, pp_size: int) -> int:
    """The most attention (`kind` "attention") or recurrent ("recurrent") layers one PP stage
    holds under pp_indices' split: the stage the engine sizes its pools for. Kept per model
    object: fit asks it of every candidate."""
    return by_identity(model, ("sgl_stage", kind, pp_size), lambda: _most(model, kind, pp_size))


def _most(model: ModelSpec, kind: str, pp_size: int) -> int:
    ids = model.attention_layer_ids if kind == "attention" else model.recurrent_layer_ids
    stages = [pp_indices(model.num_layers, r, pp_size) for r in range(pp_size)]
    return max(sum(1 for i in ids if s <= i < e) for s, e in stages)


def static_consumers(
    weights_gib: float, reserved_gib: float, pre_gib: float, frac: float
) -> list[Consumer]:
    """The two consumers every SGLang release has: the weights, and what mem_fraction_static
    leaves outside the static pools (pre-load free x (1 - fraction))."""
    return [
        Consumer(
            name="weights",
            gib=weights_gib,
            formula="target weights on this rank",
            flags=["--tp-size", "--pp-size", "--quantization"],
        ),
        Consumer(
            name="reserved (outside the static fraction)",
            gib=reserved_gib,
            formula=f"pre-load free {pre_gib:.2f} GiB x (1 - mem_fraction_static {frac:.4g})",
            flags=["--mem-fraction-static"],
        ),
    ]
