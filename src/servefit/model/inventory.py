"""Build a ModelSpec from a HF config dict: layers, dimensions, dtype, quantization, params.

Nested configs: VLMs keep the language model in `text_config` (Qwen3.5, LFM2-VL, Kimi-K3) or
`llm_config` (InternVL / Nemotron-VL) and the vision tower in `vision_config`. Fields the
language model needs are read from the text config; `tie_word_embeddings`, `dtype`,
`mamba_ssm_dtype` and `quantization_config` may sit at either level (text config wins, except
for tie_word_embeddings where the top-level value decides: that is the config the model class
is built from).

is_multimodal rule: the config has a non-empty `vision_config` and the architecture is a VLM
class (name contains "ForConditionalGeneration", "VL", "Vision", "Llava" or "Omni"), and the
config does not say `language_model_only: true`. Vision weights then count as loaded.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from servefit.errors import ConfigError, ServefitError, UnsupportedModelError
from servefit.model.fields import MAX_LAYERS, Fields
from servefit.model.layer_plan import layer_plan
from servefit.model.layers import (
    FFN,
    KDA,
    MLA,
    DenseMLP,
    FullAttention,
    GatedDeltaNet,
    Layer,
    LightningAttention,
    Mamba2,
    Mixer,
    MoE,
    ShortConv,
    SlidingWindowAttention,
)
from servefit.model.layout_checks import layout_issues
from servefit.model.quant import parse_quant
from servefit.model.quant_checks import quant_issues
from servefit.model.spec import ModelSpec

_DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}
# transformers defaults for tie_word_embeddings when a config omits the key.
_TIED_BY_DEFAULT = ("lfm2", "lfm2_moe", "lfm2_vl", "zamba2", "gemma", "gemma2", "gemma3_text")
_VLM_ARCH = re.compile(r"ForConditionalGeneration|VL|Vision|Llava|Omni")


def split_config(config: dict[str, Any]) -> tuple[Fields, Fields, dict[str, Any] | None]:
    """(top-level fields, text-model fields, vision_config)."""
    top = Fields(config)
    text = top
    for key in ("text_config", "llm_config", "language_config"):
        nested = top.get(key)
        if nested is not None:
            text = Fields(nested, key)
            break
    vision = top.get("vision_config")
    if vision is not None and not isinstance(vision, dict):
        raise ConfigError("config field vision_config must be an object")
    return top, text, vision or None


def _architecture(top: Fields, text: Fields) -> str:
    for f in (top, text):
        archs = f.get("architectures")
        if isinstance(archs, list) and archs and isinstance(archs[0], str):
            return archs[0]
        if archs is not None and not isinstance(archs, list):
            raise ConfigError("config field architectures must be a list of strings")
    return ""


def _dtype(top: Fields, text: Fields) -> str:
    raw = text.get("dtype", "torch_dtype") or top.get("dtype", "torch_dtype")
    if raw is None or raw == "auto":
        return "bfloat16"
    if not isinstance(raw, str) or raw.removeprefix("torch.") not in _DTYPES:
        raise ConfigError(
            f"unsupported dtype {raw!r:.40} in config (expected bfloat16/float16/float32)"
        )
    return _DTYPES[raw.removeprefix("torch.")]


def _hidden(t: Fields) -> int:
    return t.int("hidden_size", "d_model", "n_embd", "dim")


def _head_dim(t: Fields, hidden: int, heads: int) -> int:
    hd = t.opt_int("head_dim", "attention_head_dim", minimum=1)
    if hd is not None:
        return hd
    if hidden % heads:
        raise ConfigError(f"hidden_size {hidden} is not divisible by num_attention_heads {heads}")
    return hidden // heads


def _attention(t: Fields, kind: str, hidden: int) -> Mixer:
    heads = t.int("num_attention_heads", "n_head", "num_heads")
    if kind == "mla":
        return MLA(
            num_heads=heads,
            kv_lora_rank=t.int("kv_lora_rank"),
            qk_rope_head_dim=t.int("qk_rope_head_dim"),
            qk_nope_head_dim=t.int("qk_nope_head_dim"),
            v_head_dim=t.int("v_head_dim"),
        )
    kv = t.int("num_key_value_heads", "num_query_groups", default=heads)
    # Grouped-query attention shares each KV head among heads / kv query heads: a config where
    # that is not a whole number describes a model no engine (nor transformers) can build.
    if kv > heads:
        raise ConfigError(
            f"num_key_value_heads {kv} exceeds num_attention_heads {heads}: "
            "the attention layers cannot be built"
        )
    if heads % kv:
        raise ConfigError(
            f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}: "
            "the attention layers cannot be built"
        )
    hd = _head_dim(t, hidden, heads)
    if kind == "swa":
        window = t.opt_int("sliding_window", minimum=1) or 0
        return SlidingWindowAttention(heads, kv, hd, hd, window=window)
    return FullAttention(heads, kv, hd, hd)


def _mamba(t: Fields, model_type: str, hidden: int) -> Mamba2:
    """Mamba2 shapes; field names differ per family (see sglang/srt/configs/*.py)."""
    if t.has("mamba_num_heads"):  # Nemotron-H (configs/nemotron_h.py:mamba2_cache_params)
        heads, hd = t.int("mamba_num_heads"), t.int("mamba_head_dim")
        return Mamba2(
            heads,
            hd,
            t.int("n_groups", default=1),
            t.int("ssm_state_size"),
            t.int("conv_kernel", default=4),
            heads * hd,
        )
    if t.has("mamba_n_heads"):  # Granite-4.0-H, Bamba, Falcon-H1
        heads = t.int("mamba_n_heads")
        inter = t.int("mamba_d_ssm", default=0) or t.int("mamba_expand", default=2) * hidden
        d_head = t.get("mamba_d_head")
        hd = inter // heads if d_head in (None, "auto") else t.int("mamba_d_head")
        return Mamba2(
            heads,
            hd,
            t.int("mamba_n_groups", default=1),
            t.int("mamba_d_state"),
            t.int("mamba_d_conv", default=4),
            inter,
        )
    if t.has("n_mamba_heads"):  # Zamba2
        inter = t.int("mamba_expand", default=2) * hidden
        return Mamba2(
            t.int("n_mamba_heads"),
            t.int("mamba_headdim"),
            t.int("mamba_ngroups", default=1),
            t.int("mamba_d_state"),
            t.int("mamba_d_conv", default=4),
            inter,
        )
    if t.has("mamba_d_state") and not t.has("mamba_d_head", "mamba_headdim"):
        # Mamba-1 (Jamba): conv (intermediate, K-1), temporal (intermediate, 1, state) -- the
        # Mamba2 shape with head_dim 1 and no groups gives exactly that
        # (sglang/srt/configs/mamba_utils.py:Mamba2StateShape.create_full_rank).
        inter = t.int("mamba_expand", default=2) * hidden
        return Mamba2(inter, 1, 0, t.int("mamba_d_state"), t.int("mamba_d_conv", default=4), inter)
    if t.has("state_size", "num_heads"):  # plain Mamba2 LM
        heads = t.int("num_heads")
        return Mamba2(
            heads,
            t.int("head_dim"),
            t.int("n_groups", default=1),
            t.int("state_size"),
            t.int("conv_kernel", default=4),
            t.int("expand", default=2) * hidden,
        )
    raise UnsupportedModelError(
        f"{model_type or 'config'} has Mamba layers but no mamba_num_heads / mamba_n_heads / "
        "mamba_d_state fields"
    )


def _kda(t: Fields) -> KDA:
    lac = t.dict("linear_attn_config")
    if lac is not None:
        f = Fields(lac, "linear_attn_config")
        return KDA(
            f.int("num_heads"), f.int("head_dim"), f.int("short_conv_kernel_size", default=4)
        )
    return KDA(
        t.int("linear_num_heads"),
        t.int("linear_head_dim"),
        t.int("linear_conv_kernel_dim", default=4),
    )


def _gdn(t: Fields) -> GatedDeltaNet:
    return GatedDeltaNet.from_heads(
        num_k_heads=t.int("linear_num_key_heads"),
        num_v_heads=t.int("linear_num_value_heads"),
        k_head_dim=t.int("linear_key_head_dim"),
        v_head_dim=t.int("linear_value_head_dim"),
        conv_kernel=t.int("linear_conv_kernel_dim", default=4),
    )


class _MixerFactory:
    """Builds each mixer kind once (all layers of a kind share one frozen spec)."""

    def __init__(self, t: Fields, model_type: str, hidden: int) -> None:
        self.t, self.model_type, self.hidden = t, model_type, hidden
        self.cache: dict[str, Any] = {}

    def __call__(self, kind: str | None) -> Mixer | None:
        if kind is None:
            return None
        if kind not in self.cache:
            self.cache[kind] = self._build(kind)
        return self.cache[kind]

    def _build(self, kind: str) -> Mixer:
        t, hidden = self.t, self.hidden
        if kind in ("attn", "swa", "mla"):
            return _attention(t, kind, hidden)
        if kind == "gdn":
            return _gdn(t)
        if kind == "mamba":
            return _mamba(t, self.model_type, hidden)
        if kind == "kda":
            return _kda(t)
        if kind == "conv":
            return ShortConv(hidden, t.int("conv_L_cache", default=3))
        if kind == "lightning":
            heads = t.int("num_attention_heads")
            return LightningAttention(heads, _head_dim(t, hidden, heads))
        raise ConfigError(f"unknown mixer kind {kind}")  # pragma: no cover - internal


# ---------------------------------------------------------------------------- feed-forward


def _lfm2_intermediate(t: Fields) -> int:
    # sglang/srt/models/lfm2.py:Lfm2MLP.__init__ (block_auto_adjust_ff_dim)
    inter = t.int("block_ff_dim", "intermediate_size")
    if t.bool("block_auto_adjust_ff_dim", default=False):
        inter = int(2 * inter / 3)
        mult = t.float("block_ffn_dim_multiplier")
        if mult is not None:
            inter = int(mult * inter)
            m = t.int("block_multiple_of", default=256)
            inter = m * ((inter + m - 1) // m)
    if inter <= 0:
        raise ConfigError("LFM2 feed-forward size is not positive")
    return inter


def _num_experts(t: Fields) -> int:
    return t.opt_int("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts") or 0


def _shared(t: Fields) -> tuple[int, int]:
    """(number of shared experts, intermediate size of each)."""
    size = t.opt_int("shared_expert_intermediate_size")  # Qwen2-MoE / Qwen3-Next / Qwen3.5
    if size is not None:
        return (1, size) if size > 0 else (0, 0)
    n = t.opt_int("n_shared_experts", "num_shared_experts") or 0
    size = t.opt_int("moe_shared_expert_intermediate_size")  # Nemotron-H
    if size is not None:
        return (max(n, 1), size) if size > 0 else (0, 0)
    size = t.opt_int("shared_intermediate_size")  # Granite MoE, MiniMax (0 = none)
    if size is not None:
        return (1, size) if size > 0 else (0, 0)
    if n > 0:  # DeepSeek / Kimi: shared experts have the routed expert size
        return n, t.int("moe_intermediate_size", "intermediate_size")
    return 0, 0


class _FfnRules:
    def __init__(self, t: Fields, model_type: str) -> None:
        self.t, self.model_type = t, model_type
        self.experts = _num_experts(t)
        self.granite = model_type == "granitemoehybrid"
        self._moe: MoE | None = None
        self._dense: DenseMLP | None = None
        self.mlp_only = set[int](t.int_list("mlp_only_layers") or [])
        self.mlp_types = t.str_list("mlp_layer_types")
        self.first_dense = t.opt_int("first_k_dense_replace")
        self.freq = t.get("moe_layer_freq")
        self.sparse_step = t.opt_int("decoder_sparse_step")
        self.expert_period = t.opt_int("expert_layer_period", minimum=1)
        self.expert_offset = t.opt_int("expert_layer_offset") or 0
        self.num_dense = t.opt_int("num_dense_layers")

    def dense(self) -> DenseMLP:
        if self._dense is None:
            t = self.t
            if self.model_type.startswith("lfm2"):
                inter = _lfm2_intermediate(t)
            elif self.granite and self.experts == 0 and t.has("shared_intermediate_size"):
                inter = t.int("shared_intermediate_size")  # Granite's dense "shared_mlp"
            else:
                inter = t.int("intermediate_size", "ffn_hidden_size", "n_inner")
            self._dense = DenseMLP(inter)
        return self._dense

    def moe(self) -> MoE:
        if self._moe is None:
            t = self.t
            if self.experts <= 0:
                raise UnsupportedModelError(
                    "config has MoE layers but no num_experts / n_routed_experts"
                )
            top_k = t.int(
                "num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_topk"
            )
            if top_k > self.experts:
                raise ConfigError(
                    f"num_experts_per_tok {top_k} exceeds the {self.experts} routed experts: "
                    "the router cannot pick that many"
                )
            n_shared, shared_size = _shared(t)
            self._moe = MoE(
                num_experts=self.experts,
                experts_per_token=top_k,
                expert_intermediate_size=t.int("moe_intermediate_size", "intermediate_size"),
                num_shared_experts=n_shared,
                shared_intermediate_size=shared_size,
            )
        return self._moe

    def is_sparse(self, i: int) -> bool:
        if self.experts <= 0:
            return False
        if self.mlp_types is not None and i < len(self.mlp_types):
            return self.mlp_types[i] == "sparse"
        if i in self.mlp_only:
            return False
        if self.first_dense is not None and i < self.first_dense:
            return False
        if self.freq is not None:
            if isinstance(self.freq, list):
                return bool(i < len(self.freq) and self.freq[i])
            freq = self.t.int("moe_layer_freq")
            return i % freq == 0  # deepseek_v2.py: layer_id % moe_layer_freq == 0
        if self.sparse_step is not None and self.sparse_step > 0:
            return (i + 1) % self.sparse_step == 0  # qwen2_moe / qwen3_next decoder_sparse_step
        if self.expert_period is not None:
            return i % self.expert_period == self.expert_offset  # Jamba
        if self.num_dense is not None:
            return i >= self.num_dense  # LFM2-MoE
        return True

    def __call__(self, kind: str | None, i: int) -> FFN:
        if kind is None:
            return None
        if kind == "mlp":
            return self.dense()
        if kind == "moe":
            return self.moe()
        return self.moe() if self.is_sparse(i) else self.dense()


# ---------------------------------------------------------------------------- ModelSpec


def _mtp(t: Fields) -> tuple[int, str]:
    for key in ("mtp_num_hidden_layers", "num_nextn_predict_layers"):
        n = t.opt_int(key)
        if n and n > MAX_LAYERS:
            raise ConfigError(f"config field {key} is implausibly large ({n})")
        if n:
            return n, key
    return 0, ""


def _tied(top: Fields, text: Fields, model_type: str) -> bool:
    if "tie_word_embeddings" in top.data and top.data["tie_word_embeddings"] is not None:
        return top.bool("tie_word_embeddings")
    return text.bool("tie_word_embeddings", default=model_type in _TIED_BY_DEFAULT)


def _ssm_dtype(top: Fields, text: Fields) -> str | None:
    raw = text.get("mamba_ssm_dtype") or top.get("mamba_ssm_dtype")
    if raw is None:
        return None
    if not isinstance(raw, str) or raw.removeprefix("torch.") not in _DTYPES:
        raise ConfigError(f"unsupported mamba_ssm_dtype {raw!r:.40}")
    return _DTYPES[raw.removeprefix("torch.")]


def _is_multimodal(top: Fields, arch: str, vision: dict[str, Any] | None) -> bool:
    if not vision:
        return False
    if top.bool("language_model_only", default=False):
        return False
    return bool(_VLM_ARCH.search(arch))


def _build(config: dict[str, Any], name: str, source: str) -> ModelSpec:
    top, text, vision = split_config(config)
    arch = _architecture(top, text)
    model_type = text.str("model_type") or top.str("model_type")
    hidden = _hidden(text)
    vocab = (
        text.int("vocab_size", "padded_vocab_size")
        if text.has("vocab_size", "padded_vocab_size")
        else top.int("vocab_size")
    )
    # sglang/srt/utils/hf_transformers/common.py:get_context_length falls back to 2048 when a
    # config has no length key (pure Mamba configs); rope scaling is the engines' business.
    max_pos = text.int(
        "max_position_embeddings",
        "max_sequence_length",
        "seq_length",
        "max_seq_len",
        "model_max_length",
        "n_positions",
        default=2048,
    )
    kinds, pattern = layer_plan(text, model_type)
    mixers = _MixerFactory(text, model_type, hidden)
    ffns = _FfnRules(text, model_type)
    layers = tuple(
        Layer(index=i, mixer=mixers(k.mixer), ffn=ffns(k.ffn, i), parallel_mixer=mixers(k.parallel))
        for i, k in enumerate(kinds)
    )
    mtp_layers, mtp_source = _mtp(text)
    spec = ModelSpec(
        name=name,
        architecture=arch,
        model_type=model_type,
        dtype=_dtype(top, text),
        hidden_size=hidden,
        vocab_size=vocab,
        max_position_embeddings=max_pos,
        layers=layers,
        tie_word_embeddings=_tied(top, text, model_type),
        mtp_layers=mtp_layers,
        mtp_source=mtp_source,
        quant=parse_quant(config, text.data),
        mamba_ssm_dtype=_ssm_dtype(top, text),
        is_multimodal=_is_multimodal(top, arch, vision),
        vision_config=vision,
        text_config=text.data,
        raw_config=config,
        source=source,
        issues=layout_issues(text, model_type, kinds, pattern) + quant_issues(top, text),
    )
    from dataclasses import replace

    from servefit.model.params import count_params

    return replace(spec, params=count_params(spec))


def build_model_spec(config: dict[str, Any], *, name: str, source: str) -> ModelSpec:
    """Classify every layer of a HF config and count its parameters.

    Raises only servefit errors: UnsupportedModelError when a field needed for sizing is
    missing, ConfigError when a value is malformed (wrong type, zero or negative size).
    """
    try:
        return _build(config, name, source)
    except ServefitError:
        raise
    except (
        TypeError,
        ValueError,
        KeyError,
        AttributeError,
        ZeroDivisionError,
        OverflowError,
        IndexError,
        RecursionError,
    ) as exc:
        # Any shape of config we did not anticipate must still fail as a config error.
        raise ConfigError(f"cannot interpret config: {type(exc).__name__}: {exc}"[:300]) from None


# load_model's answers by (reference, source, the file's identity and mtime): a command that
# plans a model twice (plan's fix suggestions re-plan it, --compare plans it on the other
# engine, doctor and verify check --model before they plan) parses its config.json once.
_LOADED: dict[tuple[Hashable, ...], ModelSpec] = {}


def load_model(ref: str) -> ModelSpec:
    """Load a config (path, checkpoint dir, catalog id, Hub id) and build its ModelSpec."""
    from servefit.model.config import find_config, read_json

    path, source = find_config(ref)
    key = (ref, source, _stamp(path))
    hit = _LOADED.get(key) if key[-1] is not None else None
    if hit is not None:
        return hit
    config = read_json(path)
    spec = build_model_spec(config, name=_name(ref, source, config), source=source)
    if key[-1] is not None:
        if len(_LOADED) >= 16:
            _LOADED.clear()
        _LOADED[key] = spec
    return spec


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    """The file as it is now; None when it cannot be looked at (read_json says why)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _name(ref: str, source: str, config: dict[str, Any]) -> str:
    if source.startswith("catalog:"):
        return source.removeprefix("catalog:")
    if source.startswith("hub:"):
        return source.removeprefix("hub:")
    name_or_path = config.get("_name_or_path")
    if (
        isinstance(name_or_path, str)
        and name_or_path
        and "/" in name_or_path
        and not name_or_path.startswith("/")
    ):
        return name_or_path
    return ref
