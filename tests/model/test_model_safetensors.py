"""Exact weight sizes from safetensors headers of a local checkpoint directory."""

from __future__ import annotations

import json
import struct

import pytest

from servefit.errors import ConfigError
from servefit.model.inventory import load_model
from servefit.model.safetensors_index import read_checkpoint, read_header
from servefit.model.weights import weights_per_rank

TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "vocab_size": 256,
    "max_position_embeddings": 512,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}


def tiny_tensors(extra: dict | None = None) -> dict[str, tuple[str, list[int]]]:
    t = {
        "model.embed_tokens.weight": ("BF16", [256, 64]),
        "lm_head.weight": ("BF16", [256, 64]),
        "model.norm.weight": ("BF16", [64]),
    }
    for i in range(2):
        p = f"model.layers.{i}"
        t |= {
            f"{p}.self_attn.q_proj.weight": ("BF16", [64, 64]),
            f"{p}.self_attn.k_proj.weight": ("BF16", [32, 64]),
            f"{p}.self_attn.v_proj.weight": ("BF16", [32, 64]),
            f"{p}.self_attn.o_proj.weight": ("BF16", [64, 64]),
            f"{p}.mlp.gate_proj.weight": ("BF16", [128, 64]),
            f"{p}.mlp.up_proj.weight": ("BF16", [128, 64]),
            f"{p}.mlp.down_proj.weight": ("BF16", [64, 128]),
            f"{p}.input_layernorm.weight": ("BF16", [64]),
            f"{p}.post_attention_layernorm.weight": ("BF16", [64]),
        }
    return t | (extra or {})


def write_safetensors(path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """8-byte little-endian header length, JSON header, then the (zero) data."""
    sizes = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1}
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


@pytest.fixture
def ckpt(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    write_safetensors(tmp_path / "model.safetensors", tiny_tensors())
    return tmp_path


def test_header_reader(ckpt):
    stored = {t.name: t for t in read_header(ckpt / "model.safetensors")}
    assert (
        stored["lm_head.weight"].shape == (256, 64)
        and stored["lm_head.weight"].nbytes == 256 * 64 * 2
    )


def test_checkpoint_matches_estimate(ckpt):
    m = load_model(str(ckpt))  # source is the directory -> headers are used
    exact = weights_per_rank(m)
    assert exact.method == "safetensors"
    total = sum(t.nbytes for t in read_checkpoint(ckpt))
    assert exact.target_bytes == total == m.params.total * 2


def test_checkpoint_tp2_shards_like_the_estimate(ckpt):
    m = load_model(str(ckpt))
    from dataclasses import replace

    est = weights_per_rank(replace(m, source="catalog:none"), tp=2)
    exact = weights_per_rank(m, tp=2)
    assert est.method == "estimate"
    # norms replicated, everything else halved (2 KV heads over 2 ranks, vocab 256 needs no pad)
    assert exact.target_bytes == est.target_bytes


def test_index_json_and_mtp_and_vision(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    all_t = tiny_tensors(
        {
            "mtp.fc.weight": ("BF16", [64, 128]),
            "model.visual.blocks.0.attn.qkv.weight": ("BF16", [96, 32]),
        }
    )
    names = list(all_t)
    write_safetensors(tmp_path / "a.safetensors", {k: all_t[k] for k in names[:10]})
    write_safetensors(tmp_path / "b.safetensors", {k: all_t[k] for k in names[10:]})
    weight_map = {k: ("a.safetensors" if i < 10 else "b.safetensors") for i, k in enumerate(names)}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    m = load_model(str(tmp_path))
    w = weights_per_rank(m, include_mtp=True)
    assert w.target_bytes == m.params.total * 2  # vision skipped: not a VLM; MTP is draft
    assert w.draft_bytes == 64 * 128 * 2


def test_missing_shard_named_in_index(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"x": "gone.safetensors"}})
    )
    with pytest.raises(ConfigError, match="gone.safetensors"):
        weights_per_rank(load_model(str(tmp_path)))


def test_corrupt_header(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(struct.pack("<Q", 5) + b"{oops")
    with pytest.raises(ConfigError, match="bad safetensors header"):
        read_header(p)
    p.write_bytes(b"\x01")
    with pytest.raises(ConfigError, match="too short"):
        read_header(p)


def test_config_json_path_inside_checkpoint_uses_headers(ckpt):
    m = load_model(str(ckpt / "config.json"))
    assert weights_per_rank(m).method == "safetensors"


def test_dir_without_safetensors_falls_back_to_estimate(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    m = load_model(str(tmp_path))
    w = weights_per_rank(m)
    assert w.method == "estimate" and w.target_bytes == m.params.total * 2
