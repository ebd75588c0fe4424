"""The layer layout as each engine's config reader builds it, against the one servefit plans.

Qwen3-Next / Qwen3.5 / Qwen3.6 give their layout twice, as `layer_types` and as
`full_attention_interval`, and the readers take different ones:

* transformers' config class (Qwen3NextConfig, Qwen3_5TextConfig, Qwen3_5MoeTextConfig)
  validates `layer_types` against `num_hidden_layers` and its allowed names and builds the
  layers from it, deriving it from `full_attention_interval` only when it is absent
  (models/qwen3_5/configuration_qwen3_5.py:Qwen3_5TextConfig.__post_init__, validated by
  configuration_utils.py:PreTrainedConfig.validate_layer_type; 4.57.1 and 5.3.0:
  configuration_utils.py:layer_type_validation from the class's __init__). vLLM builds its
  model from that list (vllm/model_executor/models/qwen3_5.py:Qwen3_5Model.__init__,
  qwen3_next.py:Qwen3NextModel.__init__ index config.layer_types per layer).
* SGLang's own class never stores `layer_types`: its layers come from
  `full_attention_interval`, which it has no default for
  (sglang/srt/configs/qwen3_next.py:Qwen3NextConfig.layers_block_type, every release from
  0.5.9 to 0.5.23; Qwen3_5TextConfig subclasses it). SGLang parses the file with
  transformers' class first, so transformers' refusals stop it too, except where its
  transformers has no such class (4.57.1, SGLang 0.5.9, has no qwen3_5).

servefit plans SGLang's reading when `full_attention_interval` is present
(layer_plan.py:layer_plan), so what vLLM reads differently is said in a note.

Nemotron-H: the pattern's length is the layer count for transformers (its
NemotronHConfig.num_hidden_layers is a property of the pattern) and for SGLang from 0.5.10
(it warns); SGLang 0.5.9 asserts the two agree.
"""

from __future__ import annotations

from typing import Any

from servefit.frozen import frozen
from servefit.model.fields import Fields
from servefit.model.layer_plan import GDN_FAMILIES, LayerKind
from servefit.model.readers import (
    SGLANG_0_5_9_CONFIGS,
    SGLANG_CONFIGS,
    SGLANG_KV_DIVIDES_BY_CELL,
    ConfigIssue,
    transformers,
)

_A4 = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")
_A56 = (*_A4, "conv", "mamba", "attention", "sparse", "dense", "hybrid", "moe")
_A58 = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    *_A56[3:],
)
_A512 = (*_A58[:5], "minimax_m3_sparse", *_A58[5:], "deepseek_sparse_attention")
_A519 = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "window_attention",
    "indexed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "minimax_m3_sparse",
    "conv",
    "moe",
    "hybrid",
    "hybrid_sliding",
    "linear_attention",
)
# 5.19.0 configuration_utils.py:_LEGACY_LAYER_TYPE_REMAP, applied before validation
_REMAP_519 = {
    "mamba": "linear_attention",
    "attention": "full_attention",
    "deepseek_sparse_attention": "indexed_attention",
    "qwen_sparse_attention": "indexed_attention",
}


@frozen
class _Transformers:
    """How one transformers release validates `layer_types` (its configuration_utils.py)."""

    version: str
    allowed: tuple[str, ...]  # ALLOWED_LAYER_TYPES (5.19: ALLOWED_ATTN_LAYER_TYPES)
    strict: bool  # validate_layer_type under @strict (5.6 on), else layer_type_validation
    quoted: bool  # "the number of `layer_types`" (5.12 on), else "the number of layer types"
    remap: bool = False
    has_qwen3_5: bool = True  # models/qwen3_5 exists (not in 4.57.1)

    def defines(self, model_type: str) -> bool:
        return model_type == "qwen3_next" or self.has_qwen3_5


# Every transformers an engine release pins (SGLang's wheel METADATA; vLLM 0.33.0 accepts
# >=5.16.1,<5.21.0 and is read as 5.19.0, the release SGLang 0.5.22 and 0.5.23 pin).
TRANSFORMERS = (
    _Transformers("4.57.1", _A4, strict=False, quoted=False, has_qwen3_5=False),
    _Transformers("5.3.0", _A4, strict=False, quoted=False),
    _Transformers("5.6.0", _A56, strict=True, quoted=False),
    _Transformers("5.8.1", _A58, strict=True, quoted=False),
    _Transformers("5.12.1", _A512, strict=True, quoted=True),
    _Transformers("5.19.0", _A519, strict=True, quoted=True, remap=True),
)

_CLASSES = {
    "qwen3_next": "Qwen3NextConfig",
    "qwen3_5": "Qwen3_5TextConfig",
    "qwen3_5_text": "Qwen3_5TextConfig",
    "qwen3_5_moe": "Qwen3_5MoeTextConfig",
    "qwen3_5_moe_text": "Qwen3_5MoeTextConfig",
}
_ATTENTION = ("attn", "swa", "mla")


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...]"


def _validator(tf: _Transformers, message: str) -> str:
    if tf.strict:  # huggingface_hub/errors.py:StrictDataclassClassValidationError, one line
        return (
            "StrictDataclassClassValidationError: Class validation error for validator "
            f"'validate_layer_type': ValueError: {message}"
        )
    return f"ValueError: {message}"


def hf_layer_types_error(tf: _Transformers, types: Any, layers: int | None) -> str | None:
    """What transformers `tf` raises for this `layer_types`, None when it accepts it."""
    if tf.strict and not (isinstance(types, list) and all(isinstance(x, str) for x in types)):
        # the @strict field check of `layer_types: list[str] | None` runs as it is set
        return (
            "StrictDataclassFieldValidationError: Validation error for field 'layer_types': "
            f"TypeError: Field 'layer_types' with value {_short(types, 60)} doesn't match any "
            "type in (list[str], <class 'NoneType'>)"
        )
    if not isinstance(types, list | str | dict):
        return f"TypeError: '{type(types).__name__}' object is not iterable"
    # a string is iterated as its characters, a mapping as its keys, as the check does
    names = [_REMAP_519.get(x, x) if tf.remap and isinstance(x, str) else x for x in types]
    if not all(x in tf.allowed for x in names):
        got = f" but got {_short(names)}" if tf.strict else ""
        return _validator(tf, f"The `layer_types` entries must be in {tf.allowed}{got}")
    if layers is not None and len(names) != layers:
        of = "`layer_types`" if tf.quoted else "layer types"
        return _validator(
            tf, f"`num_hidden_layers` ({layers}) must be equal to the number of {of} ({len(names)})"
        )
    return None


def _where(t: Fields, key: str) -> str:
    return key if t.where == "config" else f"{t.where}.{key}"


def _listed_full(types: list[str]) -> set[int] | None:
    """The full-attention layers a list transformers 5.19 accepts names, None when it names a
    kind no Qwen3-Next / Qwen3.5 decoder layer is built as (vLLM's Qwen3_5DecoderLayer knows
    linear_attention and full_attention only)."""
    names = [_REMAP_519.get(x, x) for x in types]
    if any(x not in ("full_attention", "linear_attention") for x in names):
        return None
    return {i for i, x in enumerate(names) if x == "full_attention"}


def _gdn_issues(t: Fields, model_type: str) -> list[ConfigIssue]:
    cls = _CLASSES.get(model_type, "Qwen3NextConfig")
    layers = t.opt_int("num_hidden_layers", minimum=1)
    types = t.data.get("layer_types")
    interval = t.opt_int("full_attention_interval", minimum=1)
    out: list[ConfigIssue] = []
    if types is not None:
        refusals = tuple(
            (transformers(tf.version), err)
            for tf in TRANSFORMERS
            if tf.defines(model_type) and (err := hf_layer_types_error(tf, types, layers))
        )
        if refusals and interval is not None:
            out.append(
                ConfigIssue(
                    _where(t, "layer_types"),
                    refusals,
                    f"{_where(t, 'layer_types')} is not a list of {layers} layer names "
                    f"transformers' {cls} accepts (transformers "
                    f"{', '.join(r.split('==')[1] for r, _ in refusals)} refuse it): an engine "
                    "loading it with those stops; SGLang's own "
                    f"{cls} never reads layer_types and builds the layers from "
                    f"full_attention_interval {interval} (sglang/srt/configs/qwen3_next.py:"
                    "Qwen3NextConfig.layers_block_type), as servefit plans them",
                )
            )
        elif refusals:
            out.append(ConfigIssue(_where(t, "layer_types"), refusals))
        elif interval is not None and layers is not None:
            out += _disagreement(t, cls, types, interval, layers)
    if interval is None:
        # sglang/srt/configs/qwen3_next.py:Qwen3NextConfig.layers_block_type reads the
        # attribute, which only the config file sets
        err = f"AttributeError: '{cls}' object has no attribute 'full_attention_interval'"
        out.append(
            ConfigIssue(
                _where(t, "full_attention_interval"),
                ((SGLANG_0_5_9_CONFIGS, err), (SGLANG_CONFIGS, err)),
            )
        )
    return out


def _disagreement(
    t: Fields, cls: str, types: list[str], interval: int, layers: int
) -> list[ConfigIssue]:
    listed = _listed_full(types)
    derived = {i for i in range(layers) if (i + 1) % interval == 0}
    if listed == derived:
        return []
    what = (
        "names a kind other than full_attention and linear_attention"
        if listed is None
        else f"makes {len(listed)}"
    )
    return [
        ConfigIssue(
            _where(t, "layer_types"),
            note=(
                f"{_where(t, 'layer_types')} and full_attention_interval {interval} disagree: "
                f"the interval makes {len(derived)} of the {layers} layers full attention, "
                f"layer_types {what}; vLLM builds the layers "
                f"layer_types lists (transformers' {cls}.__post_init__ derives them from "
                "full_attention_interval only when layer_types is absent), SGLang those of "
                "full_attention_interval (sglang/srt/configs/qwen3_next.py:Qwen3NextConfig."
                "layers_block_type); servefit plans full_attention_interval's"
            ),
        )
    ]


def _nemotron_issues(t: Fields, source: str, built: int) -> list[ConfigIssue]:
    declared = t.opt_int("num_hidden_layers", minimum=1)
    if declared is None or declared == built:
        return []
    # sglang 0.5.9 configs/nemotron_h.py:NemotronHConfig.__init__ asserts the pattern's length;
    # a layers_block_type it does not read at all (engines/sglang/v0_5_9/args.py)
    assertion = "AssertionError: hybrid_override_pattern must have same length as num_hidden_layers"
    refusals = ((SGLANG_0_5_9_CONFIGS, assertion),) if source == "hybrid_override_pattern" else ()
    return [
        ConfigIssue(
            _where(t, "num_hidden_layers"),
            refusals,
            f"{_where(t, 'num_hidden_layers')} {declared} disagrees with the {built} layers of "
            f"{source}: the engines build {built} (transformers' NemotronHConfig."
            "num_hidden_layers is the pattern's length; SGLang from 0.5.10 logs "
            f"\"num_hidden_layers ({declared}) is deprecated and doesn't match "
            f'layers_block_type length ({built}). Using layers_block_type length.", '
            "sglang/srt/configs/nemotron_h.py:NemotronHConfig.__init__), as servefit plans; "
            "SGLang 0.5.9 asserts the two agree",
        )
    ]


def _no_kv_issue(t: Fields, source: str, kinds: list[LayerKind]) -> list[ConfigIssue]:
    if any(k.mixer in _ATTENTION or k.parallel in _ATTENTION for k in kinds):
        return []
    return [
        ConfigIssue(
            _where(t, source),
            # model_runner_kv_cache_mixin.py:ModelRunnerKVCacheMixin.profile_max_num_token
            # (0.5.9, 0.5.10), pool_configurator.py:DefaultPoolConfigurator.calculate_pool_sizes
            # (0.5.11 to 0.5.16)
            ((SGLANG_KV_DIVIDES_BY_CELL, "ZeroDivisionError: integer division or modulo by zero"),),
            f"{_where(t, source)} leaves none of the {len(kinds)} layers full attention: the "
            "model keeps no KV cache, only each request's recurrent state; SGLang up to 0.5.16 "
            "divides by the zero KV bytes per token when it sizes the pool and stops",
        )
    ]


def layout_issues(
    t: Fields, model_type: str, kinds: list[LayerKind], source: str
) -> tuple[ConfigIssue, ...]:
    """The layout fields the engines' readers refuse, or read differently from `kinds` (the
    layout layer_plan decoded from `source`)."""
    out: list[ConfigIssue] = []
    if model_type in GDN_FAMILIES:
        out += _gdn_issues(t, model_type)
    if model_type == "nemotron_h" and source in ("hybrid_override_pattern", "layers_block_type"):
        out += _nemotron_issues(t, source, len(kinds))
    if model_type in GDN_FAMILIES or model_type == "nemotron_h":
        out += _no_kv_issue(t, source, kinds)
    return tuple(out)
