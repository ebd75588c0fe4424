"""Every bundled config builds a ModelSpec with the layer counts stated in SOURCES.md.

Expected counts are the "status / notes" column of src/servefit/catalog/data/SOURCES.md
(copied to src/servefit/catalog/data/SOURCES.md); FFN counts follow from the configs' MoE rules
(quoted per row).
"""

from __future__ import annotations

import pytest

from servefit import catalog
from servefit.model.inventory import build_model_spec, load_model
from servefit.model.layers import (
    KDA,
    MLA,
    DenseMLP,
    FullAttention,
    GatedDeltaNet,
    LightningAttention,
    Mamba2,
    MoE,
    ShortConv,
    SlidingWindowAttention,
)

GDN, FULL, MLP = "gated_deltanet", "full_attention", "mlp"

EXPECTED = {
    # SOURCES.md: "64 layers = 48 linear_attention + 16 full_attention (interval 4)"
    "Qwen/Qwen3.5-27B": {GDN: 48, FULL: 16, MLP: 64},
    "Qwen/Qwen3.5-9B": {GDN: 24, FULL: 8, MLP: 32},  # "32 layers (24 lin + 8 full)"
    "Qwen/Qwen3.5-35B-A3B": {GDN: 30, FULL: 10, "moe": 40},  # "40 layers (30 lin + 10 full)"
    "Qwen/Qwen3.5-122B-A10B": {GDN: 36, FULL: 12, "moe": 48},  # "48 layers (36+12)"
    "Qwen/Qwen3.5-397B-A17B": {GDN: 45, FULL: 15, "moe": 60},  # "60 layers (45+15)"
    "Qwen/Qwen3.6-35B-A3B": {GDN: 30, FULL: 10, "moe": 40},
    "nvidia/Qwen3.6-27B-NVFP4": {GDN: 48, FULL: 16, MLP: 64},
    "Qwen/Qwen3.6-27B": {GDN: 48, FULL: 16, MLP: 64},
    "nvidia/Qwen3.6-35B-A3B-NVFP4": {GDN: 30, FULL: 10, "moe": 40},
    "Qwen/Qwen3-Next-80B-A3B-Thinking": {
        GDN: 36,
        FULL: 12,
        "moe": 48,
    },  # "48 layers -> 36 lin + 12 full"
    "nvidia/Nemotron-H-56B-Base-8K": {"mamba2": 54, FULL: 10, MLP: 54},  # "54 M / 10 * / 54 -"
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": {
        "mamba2": 23,
        FULL: 6,
        "moe": 23,
    },  # 23 M / 6 * / 23 E
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8": {
        "mamba2": 40,
        FULL: 8,
        "moe": 40,
    },  # 40 M / 8 * / 40 E
    # "108 entries: 48 mamba / 48 moe / 12 attention", no num_hidden_layers
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": {"mamba2": 48, FULL: 12, "moe": 48},
    # "93 layers ... 69 KDA layers + 24 full MLA layers"; first_k_dense_replace 1 -> 1 dense MLP
    "moonshotai/Kimi-K3": {"kda": 69, "mla": 24, MLP: 1, "moe": 92},
    # "80 layers: 70 x 0 = lightning, 10 x 1 = softmax"
    "MiniMaxAI/MiniMax-M1": {"lightning": 70, FULL: 10, "moe": 80},
    "LiquidAI/LFM2.5-VL-1.6B": {
        "short_conv": 10,
        FULL: 6,
        MLP: 16,
    },  # "16 layers = 10 conv + 6 full"
    "meta-llama/Meta-Llama-3.1-8B": {FULL: 32, MLP: 32},
    "meta-llama/Meta-Llama-3.1-70B": {FULL: 80, MLP: 80},
    "Qwen/Qwen3-8B": {FULL: 36, MLP: 36},
    "Qwen/Qwen3-32B": {FULL: 64, MLP: 64},
    "Qwen/Qwen3-30B-A3B": {FULL: 48, "moe": 48},
    "Qwen/Qwen2.5-7B-Instruct": {FULL: 28, MLP: 28},  # use_sliding_window false -> full
    # 61 MLA layers, first_k_dense_replace 3 -> 3 dense + 58 MoE
    "deepseek-ai/DeepSeek-V3": {"mla": 61, MLP: 3, "moe": 58},
    "openai/gpt-oss-20b": {"sliding_window": 12, FULL: 12, "moe": 24},  # alternating layer_types
    "openai/gpt-oss-120b": {"sliding_window": 18, FULL: 18, "moe": 36},
    "mistralai/Mixtral-8x7B-v0.1": {FULL: 32, "moe": 32},
    "mistralai/Mistral-7B-Instruct-v0.3": {FULL: 32, MLP: 32},  # sliding_window null
}


def test_expected_table_covers_the_catalog():
    ids = {e.id for e in catalog.entries()}
    assert ids == set(EXPECTED)


@pytest.mark.parametrize("model_id", sorted(EXPECTED))
def test_layer_counts(model_id):
    spec = load_model(model_id)
    assert spec.kind_counts() == EXPECTED[model_id]


def test_qwen35_27b_shapes():
    # text_config of Qwen__Qwen3.5-27B.json: q 24 / kv 4, head_dim 256, lin k16/v48, dims 128
    m = load_model("Qwen/Qwen3.5-27B")
    assert m.first_attention() == FullAttention(24, 4, 256, 256)
    assert m.first_recurrent() == GatedDeltaNet.from_heads(16, 48, 128, 128, 4)
    assert m.attention_layer_ids == tuple(range(3, 64, 4))  # (l + 1) % 4 == 0
    assert (m.hidden_size, m.vocab_size, m.max_position_embeddings) == (5120, 248320, 262144)
    assert m.layers[0].ffn == DenseMLP(17408)
    assert (m.mtp_layers, m.mtp_source) == (1, "mtp_num_hidden_layers")
    assert m.mamba_ssm_dtype == "float32" and m.dtype == "bfloat16"
    assert m.is_multimodal and not m.tie_word_embeddings
    assert m.architecture == "Qwen3_5ForConditionalGeneration" and m.model_type == "qwen3_5_text"


def test_qwen3_next_uses_interval_without_layer_types():
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert m.attention_layer_ids == tuple(range(3, 48, 4))
    assert m.layers[0].ffn == MoE(512, 10, 512, 1, 512)  # shared_expert_intermediate_size 512
    assert not m.is_multimodal and m.mamba_ssm_dtype is None


def test_interval_wins_over_layer_types():
    # sglang/srt/configs/qwen3_next.py:layers_block_type ignores layer_types.
    cfg = {
        "model_type": "qwen3_next",
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "vocab_size": 10,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "max_position_embeddings": 128,
        "intermediate_size": 32,
        "full_attention_interval": 2,
        "layer_types": ["full_attention"] * 4,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
    }
    m = build_model_spec(cfg, name="t", source="t")
    assert m.attention_layer_ids == (1, 3) and m.recurrent_layer_ids == (0, 2)


def test_nemotron_h_56b():
    m = load_model("nvidia/Nemotron-H-56B-Base-8K")
    assert m.num_layers == 118
    # mamba_num_heads 256, mamba_head_dim 64, n_groups 8, ssm_state_size 256, conv 4
    assert m.first_recurrent() == Mamba2(256, 64, 8, 256, 4, 256 * 64)
    assert m.first_attention() == FullAttention(64, 8, 128, 128)  # attention_head_dim 128
    assert m.layers[1].mixer is None and m.layers[1].ffn == DenseMLP(32768)


def test_nemotron_ultra_new_schema():
    m = load_model("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")
    assert m.num_layers == 108
    assert (m.mtp_layers, m.mtp_source) == (1, "num_nextn_predict_layers")
    moe = next(lyr.ffn for lyr in m.layers if lyr.ffn is not None)
    assert moe == MoE(512, 22, 5120, 1, 10240)


def test_kimi_k3_kda_and_mla():
    m = load_model("moonshotai/Kimi-K3")
    assert m.first_recurrent() == KDA(96, 128, 4)  # linear_attn_config num_heads/head_dim/kernel
    assert m.first_attention() == MLA(96, 512, 64, 128, 128)
    # full_attn_layers are 1-based: [4, 8, ..., 92, 93] -> 0-based 3, 7, ..., 91, 92
    assert m.layer_ids("mla")[:2] == (3, 7) and m.layer_ids("mla")[-2:] == (91, 92)
    assert m.quant.method == "compressed-tensors" and m.quant.weight_bits == 4


def test_minimax_lightning():
    m = load_model("MiniMaxAI/MiniMax-M1")
    assert m.first_recurrent() == LightningAttention(64, 128)
    assert m.layer_ids("full_attention")[:2] == (7, 15)
    assert m.layers[0].ffn == MoE(32, 2, 9216, 0, 0)  # shared_intermediate_size 0


def test_lfm2_vl_short_conv():
    m = load_model("LiquidAI/LFM2.5-VL-1.6B")
    assert m.first_recurrent() == ShortConv(2048, 3)
    # block_auto_adjust_ff_dim: int(2 * 12288 / 3) = 8192, x1.0, rounded to 256 (lfm2.py:Lfm2MLP)
    assert m.layers[0].ffn == DenseMLP(8192)
    assert m.tie_word_embeddings  # transformers' Lfm2Config default; key absent in the file
    assert m.is_multimodal


def test_gpt_oss_sliding_window():
    m = load_model("openai/gpt-oss-20b")
    assert m.mixer(0) == SlidingWindowAttention(64, 8, 64, 64, window=128)
    assert m.mixer(1) == FullAttention(64, 8, 64, 64)
    assert m.layers[0].ffn == MoE(32, 4, 2880)
    assert m.quant.method == "mxfp4"


def test_deepseek_mla_and_moe_rules():
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert m.first_attention() == MLA(128, 512, 64, 128, 128)
    assert m.layers[2].ffn == DenseMLP(18432) and m.layers[3].ffn == MoE(256, 8, 2048, 1, 2048)
    assert (m.quant.method, m.quant.weight_bits, m.quant.group_size) == ("fp8", 8, 128)


def test_transformers_defaults_families():
    """Families with only library-default configs (not real models): parsers still work."""
    from servefit.report.catalogs import summaries

    f = {
        e.id.split("/")[1]: load_model(e.id) for e in summaries(kinds=("defaults",)) if not e.error
    }
    falcon = f["falcon_h1"]  # every layer both attention and Mamba2 (configs/falcon_h1.py)
    assert falcon.attention_layer_ids == falcon.recurrent_layer_ids == tuple(range(32))
    assert falcon.first_recurrent() == Mamba2(128, 8, 1, 256, 4, 1024)  # mamba_d_ssm 1024
    jamba = f["jamba"]  # attn_layer_period 8 / offset 4; Mamba-1 mapped to head_dim 1, no groups
    assert jamba.attention_layer_ids == (4, 12, 20, 28)
    assert jamba.first_recurrent() == Mamba2(8192, 1, 0, 16, 4, 8192)
    assert jamba.layers[1].ffn == MoE(16, 2, 14336) and jamba.layers[0].ffn == DenseMLP(14336)
    assert f["bamba"].kind_counts() == {"mamba2": 32, MLP: 32}  # attn_layer_indices null
    assert f["zamba2"].kind_counts() == {"mamba2": 54, FULL: 9, MLP: 9}  # 9 hybrid layers
    assert f["granitemoehybrid"].first_recurrent() == Mamba2(128, 64, 1, 256, 4, 8192)
    assert f["kimi_linear"].kind_counts()["kda"] == 21  # v5 layer_types schema
    assert f["olmo_hybrid"].kind_counts()[GDN] == 24


def test_lfm2_moe_defaults_without_layer_types_are_unsupported():
    e = catalog.find_entry("transformers-defaults/lfm2_moe")
    assert e is not None
    from servefit.errors import UnsupportedModelError
    from servefit.model.config import read_json

    with pytest.raises(UnsupportedModelError, match="no layer pattern"):
        build_model_spec(read_json(e.path), name="x", source="x")


def test_falcon_h1_parallel_mixer_is_documented_on_layer():
    lyr = load_model("transformers-defaults/falcon_h1").layers[0]
    assert isinstance(lyr.mixer, Mamba2) and isinstance(lyr.parallel_mixer, FullAttention)
    assert lyr.mixers == (lyr.mixer, lyr.parallel_mixer)
