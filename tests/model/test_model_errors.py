"""Bad configs fail with servefit errors only: named missing fields, bad values, random dicts."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servefit import catalog
from servefit.errors import ConfigError, ServefitError, UnsupportedModelError
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec
from servefit.model.weights import weights_per_rank

BASE = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "vocab_size": 100,
    "intermediate_size": 128,
    "max_position_embeddings": 256,
}


def build(cfg):
    return build_model_spec(cfg, name="t", source="t")


def test_minimal_dense_model():
    m = build(BASE)
    assert m.num_layers == 2 and m.first_attention().head_dim == 16 and m.dtype == "bfloat16"


def test_no_layers_named():
    cfg = {k: v for k, v in BASE.items() if k != "num_hidden_layers"}
    with pytest.raises(UnsupportedModelError, match="no num_hidden_layers / layer pattern"):
        build(cfg)


def test_missing_hidden_size_named():
    cfg = {k: v for k, v in BASE.items() if k != "hidden_size"}
    with pytest.raises(UnsupportedModelError, match="hidden_size"):
        build(cfg)


def test_missing_gdn_fields_named():
    cfg = BASE | {"model_type": "qwen3_next", "linear_num_value_heads": 4}
    with pytest.raises(UnsupportedModelError, match="linear_num_key_heads"):
        build(cfg)


@pytest.mark.parametrize(
    "key,value",
    [
        ("hidden_size", 0),
        ("num_attention_heads", -4),
        ("vocab_size", "big"),
        ("num_hidden_layers", 2.5),
        ("intermediate_size", True),
        ("hidden_size", math.inf),
    ],
)
def test_bad_values_are_config_errors(key, value):
    with pytest.raises(ConfigError):
        build(BASE | {key: value})


def test_layer_types_length_mismatch():
    with pytest.raises(ConfigError, match="layer_types has 3 entries but num_hidden_layers is 2"):
        build(BASE | {"layer_types": ["full_attention"] * 3})


def test_unknown_layer_type():
    with pytest.raises(ConfigError, match="unknown layer type"):
        build(BASE | {"layer_types": ["full_attention", "telepathy"]})


def test_bad_dtype():
    with pytest.raises(ConfigError, match="unsupported dtype"):
        build(BASE | {"torch_dtype": "int3"})


def test_implausible_layer_count():
    with pytest.raises(ConfigError, match="implausibly large"):
        build(BASE | {"num_hidden_layers": 10**12})


def test_hidden_not_divisible_by_heads():
    with pytest.raises(ConfigError, match="not divisible"):
        build(BASE | {"num_attention_heads": 5})


# ------------------------------------------------------------------------------ hypothesis

KEYS = sorted(
    {k for e in catalog._index() for k in read_json(e.path)}
    | set(BASE)
    | {
        "text_config",
        "vision_config",
        "llm_config",
        "layer_types",
        "hybrid_override_pattern",
        "layers_block_type",
        "attn_type_list",
        "linear_attn_config",
        "full_attention_interval",
        "quantization_config",
        "kv_lora_rank",
        "num_experts",
        "mtp_num_hidden_layers",
    }
)

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-3, 300)
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.sampled_from(
        ["full_attention", "linear_attention", "mamba", "conv", "moe", "M", "*-E", "fp8"]
    )
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=6)
    ),
    max_leaves=30,
)
configs = st.dictionaries(st.sampled_from(KEYS), json_value, max_size=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs)
def test_random_dicts_raise_only_servefit_errors(cfg):
    try:
        m = build(cfg)
    except ServefitError:
        return
    weights_per_rank(m)  # a spec that builds also sizes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    idx=st.integers(0, 10_000), key=st.sampled_from(KEYS), value=json_value, nested=st.booleans()
)
def test_mutated_real_configs_raise_only_servefit_errors(idx, key, value, nested):
    entries = catalog._index()
    cfg = copy.deepcopy(read_json(entries[idx % len(entries)].path))
    target = cfg.get("text_config") if nested and isinstance(cfg.get("text_config"), dict) else cfg
    target[key] = value
    try:
        m = build(cfg)
    except ServefitError:
        return
    weights_per_rank(m, tp=2)


def test_json_round_trip_of_every_catalog_entry_builds():
    # the bundled files are the same after a json round trip (Infinity survives)
    for e in catalog._index():
        cfg = read_json(e.path)
        again = json.loads(json.dumps(cfg))
        assert again.keys() == cfg.keys()
