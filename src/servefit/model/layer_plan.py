"""Decode a config's layer pattern into one (mixer kind, ffn kind) pair per decoder layer.

Config families encode the pattern in different keys; the order below is the order we try:

* `hybrid_override_pattern` (Nemotron-H): one char per layer, M = Mamba2, * = attention,
  - = MLP, E = MoE (sglang/srt/configs/nemotron_h.py:NemotronHConfig._pattern_to_list).
* `layers_block_type` (Nemotron-3 v5 schema, Zamba2, transformers-v5 dumps): a list of names.
* `attn_type_list` (MiniMax-M1/Text-01): 0 = lightning (linear) attention, 1 = softmax.
* `linear_attn_config` (Kimi-Linear / Kimi-K3): 1-based `kda_layers` / `full_attn_layers`.
* `full_attention_interval` (Qwen3-Next / Qwen3.5 / 3.6): layer l is full attention iff
  (l + 1) % interval == 0. SGLang decides this way even when `layer_types` is present
  (sglang/srt/configs/qwen3_next.py:Qwen3NextConfig.layers_block_type), so we do too;
  layout_checks.py says what transformers (and so vLLM) refuses or reads instead.
* `layer_types` (gpt-oss, LFM2, Granite-4.0-H, Qwen3.5, ...).
* `attn_layer_period/offset` (Jamba), `attn_layer_indices` (Bamba), `full_attn_idxs` (old LFM2).
* Falcon-H1: every layer is both attention and Mamba2 (sglang/srt/configs/falcon_h1.py:
  linear_layer_ids = full_attention_layer_ids = all layers): mixer "mamba" with a parallel
  "attn" mixer.
* otherwise every layer is attention (MLA when the config has kv_lora_rank; sliding window
  when the config enables one).

Mixer kinds: "attn", "swa", "mla", "gdn", "mamba", "kda", "conv", "lightning", None.
FFN kinds: "mlp", "moe", "auto" (dense or MoE by the config's MoE layer rules), None.
"""

from __future__ import annotations

from servefit.errors import ConfigError, UnsupportedModelError
from servefit.frozen import frozen
from servefit.model.fields import MAX_LAYERS, Fields


@frozen
class LayerKind:
    mixer: str | None
    ffn: str | None = "auto"
    parallel: str | None = None  # a second mixer in the same layer (Falcon-H1, Zamba2 hybrid)


GDN_FAMILIES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")
MAMBA_KEYS = (
    "mamba_num_heads",
    "mamba_n_heads",
    "n_mamba_heads",
    "mamba_d_state",
    "ssm_state_size",
    "mamba_d_conv",
    "mamba_expand",
    "state_size",
)


def attention_kind(t: Fields, model_type: str) -> str:
    """Softmax attention flavour used by the model's attention layers."""
    if t.has("kv_lora_rank"):
        return "mla"
    window = t.get("sliding_window")
    has_window = isinstance(window, int) and not isinstance(window, bool) and window > 0
    # Qwen2-style configs carry a window but disable it with use_sliding_window: false;
    # gpt-oss marks its sliding layers in layer_types instead.
    enabled = t.bool("use_sliding_window", default=True) and model_type != "gpt_oss"
    return "swa" if has_window and enabled else "attn"


def linear_kind(t: Fields, model_type: str) -> str:
    """What a "linear_attention" layer is in this family."""
    if t.has("linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim"):
        return "gdn"
    if model_type.startswith("kimi") or t.has("linear_attn_config", "linear_num_heads"):
        return "kda"
    if model_type.startswith("minimax"):
        return "lightning"
    if t.has(*MAMBA_KEYS) or model_type in ("nemotron_h", "granitemoehybrid", "zamba2", "bamba"):
        return "mamba"
    raise UnsupportedModelError(
        "config has linear-attention layers but no linear-attention fields "
        "(linear_num_value_heads, linear_attn_config, mamba_* ...)"
    )


def _num_layers(t: Fields) -> int | None:
    return t.opt_int("num_hidden_layers", "num_layers", "n_layer", "n_layers", minimum=1)


def _check_len(t: Fields, n_pattern: int, key: str) -> None:
    n = _num_layers(t)
    if n is not None and n != n_pattern:
        raise ConfigError(f"{key} has {n_pattern} entries but num_hidden_layers is {n}")


def _require_layers(t: Fields) -> int:
    n = _num_layers(t)
    if n is None:
        raise UnsupportedModelError("config has no num_hidden_layers / layer pattern")
    if n > MAX_LAYERS:
        raise ConfigError(f"num_hidden_layers is implausibly large ({n})")
    return n


_NEMOTRON_CHARS = {
    "M": LayerKind("mamba", None),
    "*": LayerKind("attn", None),
    "-": LayerKind(None, "mlp"),
    "E": LayerKind(None, "moe"),
}


def _from_named(name: str, t: Fields, model_type: str, attn: str) -> LayerKind:
    """One entry of layer_types / layers_block_type."""
    n = name.strip().lower()
    block_schema = model_type in ("nemotron_h", "zamba2")  # mixer-or-ffn per entry
    if n in ("full_attention", "attention", "global", "global_attention", "full"):
        # a pattern that names its layers says which slide: a "full" entry never does, whatever
        # `sliding_window` the config carries (Gemma 3's global layers; vLLM's model classes,
        # e.g. gemma3.py:Gemma3Attention.__init__, and transformers read it the same way)
        full = "attn" if attn == "swa" else attn
        return LayerKind(full, None if block_schema else "auto")
    if n in (
        "sliding_attention",
        "sliding_window",
        "local",
        "local_attention",
        "chunked_attention",
    ):
        return LayerKind("swa", "auto")
    if n in ("linear_attention", "linear", "mamba", "mamba2", "ssm", "kda", "deltanet"):
        kind = "mamba" if n in ("mamba", "mamba2", "ssm") else linear_kind(t, model_type)
        return LayerKind(kind, None if block_schema else "auto")
    if n in ("conv", "short_conv", "shortconv"):
        return LayerKind("conv", "auto")
    if n == "moe":
        return LayerKind(None, "moe")
    if n in ("mlp", "dense"):
        return LayerKind(None, "mlp")
    if n == "hybrid":  # Zamba2: Mamba2 + the shared attention/MLP block
        return LayerKind("mamba", "mlp", parallel="attn")
    raise ConfigError(f"unknown layer type {name!r:.40} in config")


def _kimi_linear(t: Fields, lac: Fields) -> list[LayerKind]:
    kda: list[int] = lac.int_list("kda_layers", minimum=1) or []
    full: list[int] = lac.int_list("full_attn_layers", minimum=1) or []
    n = _num_layers(t) or max(kda + full, default=0)
    if n == 0:
        raise UnsupportedModelError("config has no num_hidden_layers / layer pattern")
    if n > MAX_LAYERS or max(kda + full, default=0) > n:
        raise ConfigError("linear_attn_config lists layers beyond num_hidden_layers")
    kda_set = set(kda)
    if kda_set & set(full):
        raise ConfigError("linear_attn_config lists a layer as both KDA and full attention")
    attn = "mla" if t.has("kv_lora_rank") else "attn"
    # sglang/srt/configs/kimi_linear.py:is_kda_layer: (idx + 1) in kda_layers; the rest are
    # full (MLA) layers.
    return [LayerKind("kda" if i in kda_set else attn) for i in range(1, n + 1)]


def layer_plan(t: Fields, model_type: str) -> tuple[list[LayerKind], str]:
    """Per-layer kinds and the config key the pattern came from."""
    attn = attention_kind(t, model_type)

    pattern = t.get("hybrid_override_pattern")
    if pattern is not None and t.get("layers_block_type") is None:
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError("config field hybrid_override_pattern must be a non-empty string")
        if len(pattern) > MAX_LAYERS:
            raise ConfigError("hybrid_override_pattern is implausibly long")
        bad = sorted(set(pattern) - set(_NEMOTRON_CHARS))
        if bad:
            raise ConfigError(f"hybrid_override_pattern has unknown layer code(s) {''.join(bad)!r}")
        # SGLang takes the pattern length as the layer count (nemotron_h.py, with a warning).
        return [_NEMOTRON_CHARS[c] for c in pattern], "hybrid_override_pattern"

    blocks = t.str_list("layers_block_type")
    if blocks is not None:
        if not blocks:
            raise ConfigError("config field layers_block_type is empty")
        if model_type not in ("nemotron_h", "zamba2"):
            _check_len(t, len(blocks), "layers_block_type")
        return [
            _from_named(b, t, model_type if model_type == "zamba2" else "nemotron_h", attn)
            for b in blocks
        ], "layers_block_type"

    types = t.list("attn_type_list")
    if types is not None:
        _check_len(t, len(types), "attn_type_list")
        kinds = []
        for v in types:
            if v in (0, 1) and not isinstance(v, bool):
                kinds.append(LayerKind("lightning" if v == 0 else "attn"))
            else:
                raise ConfigError(f"attn_type_list entries must be 0 or 1, got {v!r:.40}")
        return kinds, "attn_type_list"

    lac = t.dict("linear_attn_config")
    if lac is not None and Fields(lac, "linear_attn_config").has("kda_layers", "full_attn_layers"):
        return _kimi_linear(t, Fields(lac, "linear_attn_config")), "linear_attn_config"

    gdn = model_type in GDN_FAMILIES or t.has("linear_num_value_heads")
    if gdn and (t.has("full_attention_interval") or t.get("layer_types") is None):
        n = _require_layers(t)
        interval = t.int("full_attention_interval", default=4)  # Qwen3NextConfig default
        return [LayerKind("attn" if (i + 1) % interval == 0 else "gdn") for i in range(n)], (
            "full_attention_interval"
        )

    names = t.str_list("layer_types")
    if names is not None:
        if not names:
            raise ConfigError("config field layer_types is empty")
        _check_len(t, len(names), "layer_types")
        return [_from_named(x, t, model_type, attn) for x in names], "layer_types"

    if model_type == "falcon_h1":
        n = _require_layers(t)
        return [LayerKind("mamba", "mlp", parallel="attn") for _ in range(n)], "falcon_h1"

    if t.has("attn_layer_period"):  # Jamba
        n = _require_layers(t)
        period = t.int("attn_layer_period")
        offset = t.int("attn_layer_offset", default=0, minimum=0)
        return [LayerKind("attn" if i % period == offset else "mamba") for i in range(n)], (
            "attn_layer_period"
        )

    if model_type == "bamba" or "attn_layer_indices" in t.data:
        n = _require_layers(t)
        idx = set[int](t.int_list("attn_layer_indices") or [])
        return [LayerKind("attn" if i in idx else "mamba") for i in range(n)], "attn_layer_indices"

    idxs = t.int_list("full_attn_idxs")
    if idxs is not None:
        n = _require_layers(t)
        full = set(idxs)
        return [LayerKind("attn" if i in full else "conv") for i in range(n)], "full_attn_idxs"

    if model_type in ("mamba2", "mamba", "falcon_mamba"):
        n = _require_layers(t)
        return [LayerKind("mamba", None) for _ in range(n)], model_type

    if model_type.startswith(
        ("lfm2", "kimi_linear", "nemotron_h", "minimax")
    ) and model_type not in ("minimax_m2",):
        raise UnsupportedModelError(
            f"{model_type} config has no layer pattern (layer_types / hybrid_override_pattern / "
            "linear_attn_config / attn_type_list)"
        )

    n = _require_layers(t)
    return [LayerKind(attn) for _ in range(n)], "num_hidden_layers"
