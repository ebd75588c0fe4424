"""The layer layout as each engine's config reader builds it (model/layout_checks.py): what a
reader refuses, with its own text, and the note every plan of the config carries.

The transformers texts were produced by the releases' own config classes (Qwen3_5Config,
Qwen3NextConfig built from these configs with transformers 4.57.1, 5.3.0, 5.6.0, 5.12.1 and
5.19.0); SGLang's and vLLM's are the lines cited in the module."""

from __future__ import annotations

import copy
import json

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.catalog import find
from servefit.engines.registry import select
from servefit.model import readers
from servefit.model.fields import Fields
from servefit.model.inventory import build_model_spec
from servefit.model.layout_checks import TRANSFORMERS, hf_layer_types_error


def _config(name: str) -> dict:
    return json.loads(find(name).read_text())  # type: ignore[union-attr]


QWEN35 = _config("Qwen/Qwen3.5-27B")  # text_config: 64 layers, interval 4, layer_types listed
NEXT = _config("Qwen/Qwen3-Next-80B-A3B-Thinking")  # 48 layers, interval 4, no layer_types
NEMOTRON = _config("nvidia/Nemotron-H-56B-Base-8K")  # hybrid_override_pattern, 118 layers


def _qwen35(**text) -> dict:
    cfg = copy.deepcopy(QWEN35)
    for key, value in text.items():
        if value is None:
            cfg["text_config"].pop(key, None)
        else:
            cfg["text_config"][key] = value
    return cfg


def _spec(cfg: dict):
    return build_model_spec(cfg, name="t", source="t")


def _plan(cfg: dict, engine: str):
    return plan(
        PlanRequest(
            model=_spec(cfg),
            gpu="H200",
            engine=engine,
            num_gpus=2,
            args={"tp_size": 2} if engine.startswith("sglang") else {"tensor_parallel_size": 2},
        )
    )


def _tf(version: str):
    return next(t for t in TRANSFORMERS if t.version == version)


LINEAR4 = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]


@pytest.mark.parametrize(
    ("version", "types", "layers", "text"),
    [
        # configuration_utils.py:layer_type_validation (4.57.1, 5.3.0)
        (
            "4.57.1",
            LINEAR4 * 2,
            48,
            "ValueError: `num_hidden_layers` (48) must be equal to the number of layer types (8)",
        ),
        (
            "4.57.1",
            ["teleport"],
            1,
            "ValueError: The `layer_types` entries must be in ('full_attention', "
            "'sliding_attention', 'chunked_attention', 'linear_attention')",
        ),
        (
            "4.57.1",
            ["attention"],
            1,  # no legacy remap before 5.19
            "ValueError: The `layer_types` entries must be in ('full_attention', "
            "'sliding_attention', 'chunked_attention', 'linear_attention')",
        ),
        # PreTrainedConfig.validate_layer_type under @strict (5.6 on)
        (
            "5.6.0",
            LINEAR4 * 2,
            48,
            "StrictDataclassClassValidationError: Class validation error for validator "
            "'validate_layer_type': ValueError: `num_hidden_layers` (48) must be equal to the "
            "number of layer types (8)",
        ),
        (
            "5.19.0",
            LINEAR4 * 2,
            48,
            "StrictDataclassClassValidationError: Class validation error for validator "
            "'validate_layer_type': ValueError: `num_hidden_layers` (48) must be equal to the "
            "number of `layer_types` (8)",
        ),
        (
            "5.19.0",
            ["teleport"] * 3,
            3,
            "StrictDataclassClassValidationError: Class validation error for validator "
            "'validate_layer_type': ValueError: The `layer_types` entries must be in "
            "('full_attention', 'sliding_attention', 'chunked_attention', 'window_attention', "
            "'indexed_attention', 'compressed_sparse_attention', 'heavily_compressed_attention', "
            "'minimax_m3_sparse', 'conv', 'moe', 'hybrid', 'hybrid_sliding', 'linear_attention') "
            "but got ['teleport', 'teleport', 'teleport']",
        ),
        (
            "5.19.0",
            "full_attention",
            1,
            "StrictDataclassFieldValidationError: Validation error for field 'layer_types': "
            "TypeError: Field 'layer_types' with value 'full_attention' doesn't match any type in "
            "(list[str], <class 'NoneType'>)",
        ),
        ("5.19.0", ["attention", "mamba"], 2, None),  # remapped to full / linear attention
        ("5.19.0", LINEAR4 * 12, 48, None),
    ],
)
def test_transformers_layer_types_texts(version, types, layers, text):
    assert hf_layer_types_error(_tf(version), types, layers) == text


def test_a_short_layer_types_is_refused_where_transformers_reads_it_and_noted_everywhere():
    cfg = _qwen35(layer_types=QWEN35["text_config"]["layer_types"][:10])
    # SGLang 0.5.9's transformers (4.57.1) has no qwen3_5: its own class ignores layer_types
    ok = _plan(cfg, "sglang==0.5.9")
    assert ok.verdict == "ok" and ok.model.layers["full_attention"] == 16
    note = next(w for w in ok.warnings if w.startswith("text_config.layer_types is not a list"))
    assert "SGLang's own Qwen3_5TextConfig never reads layer_types" in note
    assert "full_attention_interval 4" in note
    tail = "`num_hidden_layers` (64) must be equal to the number of `layer_types` (10)"
    for engine in ("sglang==0.5.23", "vllm==0.33.0"):
        p = _plan(cfg, engine)
        assert p.verdict == "fail" and p.error.endswith(tail), (engine, p.error)
        assert note in p.warnings
    # SGLang 0.5.10 pins transformers 5.3.0: no @strict wrapper, "layer types"
    assert _plan(cfg, "sglang==0.5.10").error == (
        "ValueError: `num_hidden_layers` (64) must be equal to the number of layer types (10)"
    )


def test_qwen3_next_layer_types_is_refused_by_transformers_4_57_too():
    cfg = copy.deepcopy(NEXT)
    cfg["layer_types"] = ["teleport"] * 48
    issue = _spec(cfg).issues[0]
    assert issue.refusal({readers.transformers("4.57.1")}).startswith(
        "ValueError: The `layer_types` entries must be in"
    )
    assert _plan(cfg, "sglang==0.5.9").verdict == "fail"


def test_layer_types_disagreeing_with_the_interval_is_a_note_naming_both_readings():
    cfg = _qwen35(full_attention_interval=2)  # layer_types still marks every 4th layer
    m = _spec(cfg)
    assert m.kind_counts()["full_attention"] == 32  # SGLang's reading is planned
    (note,) = m.notes
    assert note.startswith(
        "text_config.layer_types and full_attention_interval 2 disagree: "
        "the interval makes 32 of the 64 layers full attention, layer_types "
        "makes 16; vLLM builds the layers layer_types lists"
    )
    assert "SGLang those of full_attention_interval" in note
    for engine in ("sglang==0.5.23", "vllm==0.33.0"):
        assert note in _plan(cfg, engine).warnings
    assert _spec(QWEN35).notes == []  # the real config agrees with itself


def test_no_interval_is_sglangs_attribute_error():
    cfg = _qwen35(full_attention_interval=None)
    err = "AttributeError: 'Qwen3_5TextConfig' object has no attribute 'full_attention_interval'"
    for engine in ("sglang==0.5.9", "sglang==0.5.23"):
        assert _plan(cfg, engine).error == err
    p = _plan(cfg, "vllm==0.33.0")  # transformers builds the listed layers
    assert p.verdict == "ok" and p.model.layers["full_attention"] == 16


def test_no_full_attention_layer_divides_by_zero_up_to_sglang_0_5_16():
    cfg = _qwen35(full_attention_interval=65, layer_types=None)
    m = _spec(cfg)
    assert "full_attention" not in m.kind_counts()
    assert any(
        n.startswith(
            "text_config.full_attention_interval leaves none of the 64 layers full attention"
        )
        for n in m.notes
    )
    for engine in ("sglang==0.5.9", "sglang==0.5.16"):
        assert _plan(cfg, engine).error == "ZeroDivisionError: integer division or modulo by zero"
    assert readers.SGLANG_KV_DIVIDES_BY_CELL not in config_readers("0.5.17")


def test_nemotron_h_pattern_shorter_than_the_layer_count():
    cfg = copy.deepcopy(NEMOTRON)
    cfg["hybrid_override_pattern"] = cfg["hybrid_override_pattern"][:-4]
    m = _spec(cfg)
    assert m.num_layers == 114  # the engines build the pattern's layers
    (note,) = m.notes
    assert note.startswith(
        "num_hidden_layers 118 disagrees with the 114 layers of "
        "hybrid_override_pattern: the engines build 114"
    )
    assert (
        "num_hidden_layers (118) is deprecated and doesn't match layers_block_type length "
        "(114). Using layers_block_type length."
    ) in note
    assert _plan(cfg, "sglang==0.5.9").error == (
        "AssertionError: hybrid_override_pattern must have same length as num_hidden_layers"
    )
    assert note in _plan(cfg, "sglang==0.5.23").warnings
    assert _spec(NEMOTRON).issues == ()


def config_readers(version: str) -> frozenset[str]:
    """What SGLang `version`'s rules declare it reads configs with."""
    return select(f"sglang=={version}")[0].config_readers


def test_each_sglang_release_reads_with_its_own_transformers():
    # the Requires-Dist of each wheel (pip download --no-deps sglang==V, METADATA)
    assert readers.transformers("4.57.1") in config_readers("0.5.9")
    assert readers.transformers("5.3.0") in config_readers("0.5.10")
    assert readers.transformers("5.6.0") in config_readers("0.5.11")
    assert readers.transformers("5.6.0") in config_readers("0.5.12")
    assert readers.transformers("5.8.1") in config_readers("0.5.13")
    assert readers.transformers("5.8.1") in config_readers("0.5.14")
    assert readers.transformers("5.12.1") in config_readers("0.5.15")
    assert readers.transformers("5.19.0") in config_readers("0.5.22")
    assert readers.transformers("5.12.1") in config_readers("0.5.21")
    assert readers.transformers("5.19.0") in config_readers("0.5.23")
    assert readers.SGLANG_0_5_9_CONFIGS in config_readers("0.5.9")
    assert readers.SGLANG_CONFIGS in config_readers("0.5.10")
    # ModelOptFp8Config.from_config's text changed in 0.5.18; the KV pool stopped dividing by
    # the KV bytes per token in 0.5.17 (pool_configurator.py:_zero_kv_max_tokens)
    assert readers.SGLANG_MODELOPT_STATIC_FP8 in config_readers("0.5.17")
    assert readers.SGLANG_MODELOPT_REGULAR_FP8 in config_readers("0.5.18")
    assert readers.SGLANG_KV_DIVIDES_BY_CELL in config_readers("0.5.16")
    assert readers.SGLANG_KV_DIVIDES_BY_CELL in config_readers("0.5.9")


def test_a_plain_model_has_no_issues():
    t = Fields(_config("Qwen/Qwen3-8B"))
    assert _spec(t.data).issues == ()
