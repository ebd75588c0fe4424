"""Config sanity and safetensors validation: a model that cannot be built, or a checkpoint that
is not what it claims, is refused before it sizes anything."""

from __future__ import annotations

import json
import struct

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.catalog import find
from servefit.errors import ConfigError
from servefit.model.inventory import build_model_spec, load_model
from servefit.model.quant import unknown_method_warning
from servefit.model.safetensors_index import read_checkpoint, read_header
from tests.model.test_model_safetensors import TINY, tiny_tensors, write_safetensors


def config(name: str) -> dict:
    return json.loads(find(name).read_text())  # type: ignore[union-attr]


def spec(cfg: dict):
    return build_model_spec(cfg, name="test", source="test")


# ------------------------------------------------------------------------------ config sanity


@pytest.mark.parametrize(
    ("kv", "message"),
    [
        (5, "num_attention_heads 32 is not a multiple of num_key_value_heads 5"),
        (64, "num_key_value_heads 64 exceeds num_attention_heads 32"),
    ],
)
def test_attention_heads_must_group(kv, message):
    cfg = config("Qwen/Qwen3-8B")  # 32 heads, 8 KV heads
    cfg["num_key_value_heads"] = kv
    with pytest.raises(ConfigError, match=message):
        spec(cfg)


def test_top_k_cannot_exceed_the_experts():
    cfg = config("Qwen/Qwen3-30B-A3B")  # 128 experts, 8 per token
    cfg["num_experts_per_tok"] = 129
    with pytest.raises(ConfigError, match="num_experts_per_tok 129 exceeds the 128 routed"):
        spec(cfg)


def test_mtp_layers_at_the_dimension_guard_are_refused_at_once():
    cfg = config("Qwen/Qwen3.5-27B")
    cfg["text_config"]["mtp_num_hidden_layers"] = 1 << 40  # exactly fields.MAX_DIM
    with pytest.raises(ConfigError, match="mtp_num_hidden_layers is implausibly large"):
        spec(cfg)


# ------------------------------------------------------------------------------ quantization


@pytest.mark.parametrize(
    ("q", "engine_error"),
    [
        # sglang/srt/layers/quantization/awq.py:AWQConfig.__init__
        (
            {"quant_method": "awq", "bits": 3, "group_size": 128, "zero_point": True},
            "ValueError: Currently, only 4-bit weight quantization is supported for AWQ, "
            "but got 3 bits.",
        ),
        # gptq.py:GPTQConfig.__init__: Fraction(32, weight_bits) comes before the check
        (
            {"quant_method": "gptq", "bits": 0, "group_size": 128},
            "ZeroDivisionError: Fraction(32, 0)",
        ),
        (
            {"quant_method": "gptq", "bits": 5, "group_size": 128},
            "ValueError: Currently, only 2/3/4/8-bit weight quantization is supported for "
            "GPTQ, but got 5 bits.",
        ),
        # AWQMarlinConfig never takes 8 bits (marlin_utils.py:query_marlin_supported_quant_types
        # lists uint4 alone with zero points), so AWQConfig refuses them
        (
            {"quant_method": "awq", "bits": 8, "group_size": 128, "zero_point": True},
            "ValueError: Currently, only 4-bit weight quantization is supported for AWQ, "
            "but got 8 bits.",
        ),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, None),
        ({"quant_method": "gptq", "bits": 3, "group_size": 128}, None),
    ],
)
def test_bit_widths_sglang_refuses(q, engine_error):
    cfg = config("Qwen/Qwen3-8B")
    cfg["quantization_config"] = q
    p = plan(PlanRequest(model=spec(cfg), gpu="H100", engine="sglang==0.5.9"))
    if engine_error:
        assert p.verdict == "fail" and p.error == engine_error
    else:
        assert p.error is None or "quantization" not in p.error


def test_unknown_quantization_is_sized_with_a_warning_that_says_how():
    cfg = config("Qwen/Qwen3-8B")
    cfg["quantization_config"] = {"quant_method": "foo-quant", "bits": 4}
    m = spec(cfg)
    assert m.quant.method == "foo-quant"
    warning = unknown_method_warning(m.quant, m.dtype)
    assert warning and "'foo-quant' is not one servefit knows" in warning and "4-bit" in warning
    p = plan(PlanRequest(model=m, gpu="H100", engine="sglang==0.5.9"))
    assert warning in p.warnings


# ------------------------------------------------------------------------------ safetensors


def raw_safetensors(path, header: dict, data_len: int) -> None:
    body = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(body)) + body + bytes(data_len))


@pytest.mark.parametrize(
    ("header", "data_len", "why"),
    [
        ({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [-8, 0]}}, 8, "data_offsets"),
        ({"w": {"dtype": "BF16", "shape": [-4], "data_offsets": [0, 8]}}, 8, "non-negative"),
        ({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [8, 0]}}, 8, "data_offsets"),
        ({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 6]}}, 6, "is 8 bytes but"),
        ({"w": {"dtype": "Q3", "shape": [4], "data_offsets": [0, 8]}}, 8, "unknown dtype"),
        ({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}, 16, "the file holds"),
        ({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}, 4, "the file holds"),
        (
            {
                "a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},
                "b": {"dtype": "BF16", "shape": [4], "data_offsets": [4, 12]},
            },
            12,
            "overlaps",
        ),
        (
            {
                "a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},
                "b": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]},
            },
            24,
            "leaves a gap",
        ),
        ({"w": {"dtype": "BF16", "shape": "x", "data_offsets": [0, 8]}}, 8, "dims must be"),
        ({"w": [1, 2]}, 8, "is not an object"),
    ],
)
def test_headers_are_validated_before_sizing(tmp_path, header, data_len, why):
    p = tmp_path / "model.safetensors"
    raw_safetensors(p, header, data_len)
    with pytest.raises(ConfigError, match="bad safetensors header") as exc:
        read_header(p)
    assert why in str(exc.value)


def test_a_valid_header_passes(tmp_path):
    p = tmp_path / "model.safetensors"
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F4", "shape": [2, 8], "data_offsets": [0, 8]},  # 4 bits each
        "b": {"dtype": "BF16", "shape": [], "data_offsets": [8, 10]},
        "c": {"dtype": "U8", "shape": [0], "data_offsets": [10, 10]},
    }
    raw_safetensors(p, header, 10)
    assert [t.nbytes for t in read_header(p)] == [8, 2, 0]


def test_a_header_the_file_ends_inside(tmp_path):
    p = tmp_path / "model.safetensors"
    p.write_bytes(struct.pack("<Q", 100) + b'{"a": 1')
    with pytest.raises(ConfigError, match="ends inside its 100-byte header"):
        read_header(p)


def test_one_shard_of_five_is_not_a_checkpoint(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    write_safetensors(tmp_path / "model-00002-of-00005.safetensors", tiny_tensors())
    with pytest.raises(ConfigError, match="1 of 5 shards, missing model-00001-of-00005"):
        read_checkpoint(tmp_path)
    with pytest.raises(ConfigError, match="checkpoint incomplete"):
        plan(PlanRequest(model=str(tmp_path), gpu="H100", engine="sglang==0.5.9"))


@pytest.mark.parametrize(
    ("index", "why"),
    [
        (b'{"weight_map": {"x": "../../etc/passwd"}}', "outside the checkpoint"),
        (b'{"weight_map": ["a"]}', "weight_map must be an object"),
        (b'{"weight_map": {"x": 5}}', "weight_map must be an object"),
        (b"[" * 100_000 + b"]" * 100_000, "nested 100000 levels deep"),
        (b'{"weight_map": {"x": "\xff.safetensors"}}', "is not UTF-8"),
    ],
)
def test_bad_index_files(tmp_path, index, why):
    (tmp_path / "model.safetensors.index.json").write_bytes(index)
    with pytest.raises(ConfigError, match=why):
        read_checkpoint(tmp_path)


def test_a_config_json_that_is_a_fifo_is_refused(tmp_path):
    import os

    os.mkfifo(tmp_path / "config.json")
    with pytest.raises(ConfigError, match="is a FIFO"):
        load_model(str(tmp_path))
