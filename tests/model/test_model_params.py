"""Parameter counts against published model sizes.

Sources: the model cards' stated totals (HF model card text or the size in the model name).
Tolerance 2.5% unless the source gives more digits; "noMTP" excludes the MTP/NextN modules
(model cards quote the main model), "text" also excludes the vision tower.
"""

from __future__ import annotations

import pytest

from servefit.model.inventory import load_model
from servefit.model.params import tensors

B = 1e9


def test_llama31_8b_exact():
    # Hand arithmetic (hidden 4096, 32 layers, q32/kv8 x 128, ffn 14336, vocab 128256):
    # embed + head 2 * 128256 * 4096 = 1,050,673,152
    # per layer: q 4096^2 + k,v 2 * 4096 * 1024 + o 4096^2 + mlp 3 * 4096 * 14336 + norms 2 * 4096
    #          = 218,112,000;  x 32 = 6,979,584,000;  + final norm 4096
    p = load_model("meta-llama/Meta-Llama-3.1-8B").params
    assert p.embedding + p.lm_head == 1_050_673_152
    assert p.total == 8_030_261_248  # also the safetensors total of meta-llama/Llama-3.1-8B


PUBLISHED = [
    # (id, which count, published, tolerance, source)
    ("meta-llama/Meta-Llama-3.1-70B", "total", 70.6 * B, 0.01, "model card: 70.6B"),
    ("Qwen/Qwen3-8B", "total", 8.2 * B, 0.01, "model card: Number of Parameters 8.2B"),
    ("Qwen/Qwen3-32B", "total", 32.8 * B, 0.01, "model card: 32.8B"),
    ("Qwen/Qwen3-30B-A3B", "total", 30.5 * B, 0.01, "model card: 30.5B"),
    ("Qwen/Qwen2.5-7B-Instruct", "total", 7.61 * B, 0.01, "model card: 7.61B"),
    ("mistralai/Mixtral-8x7B-v0.1", "total", 46.7 * B, 0.01, "Mistral: 46.7B total"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "total", 7.25 * B, 0.01, "7.25B (HF safetensors total)"),
    ("deepseek-ai/DeepSeek-V3", "noMTP", 671 * B, 0.01, "model card: 671B main model"),
    ("openai/gpt-oss-20b", "total", 20.9 * B, 0.01, "model card: 21B (20.9B)"),
    ("openai/gpt-oss-120b", "total", 116.8 * B, 0.01, "model card: 117B (116.8B)"),
    ("MiniMaxAI/MiniMax-M1", "total", 456 * B, 0.01, "model card: 456B"),
    (
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        "total",
        31.6 * B,
        0.01,
        "model card: 31.6B total",
    ),
    ("nvidia/Nemotron-H-56B-Base-8K", "total", 56 * B, 0.025, "name: 56B"),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "noMTP", 120 * B, 0.025, "name: 120B"),
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", "noMTP", 550 * B, 0.025, "name: 550B"),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "total", 80 * B, 0.025, "name: 80B"),
    ("Qwen/Qwen3.5-27B", "noMTP", 27 * B, 0.025, "name: 27B"),
    ("Qwen/Qwen3.5-9B", "noMTP", 9 * B, 0.05, "name: 9B (vision tower included)"),
    ("Qwen/Qwen3.5-35B-A3B", "noMTP", 35 * B, 0.025, "name: 35B"),
    ("Qwen/Qwen3.5-122B-A10B", "noMTP", 122 * B, 0.025, "name: 122B"),
    ("Qwen/Qwen3.5-397B-A17B", "noMTP", 397 * B, 0.025, "name: 397B"),
    ("LiquidAI/LFM2.5-VL-1.6B", "total", 1.6 * B, 0.025, "name: 1.6B"),
]


@pytest.mark.parametrize("model_id,which,published,tol,source", PUBLISHED)
def test_published_totals(model_id, which, published, tol, source):
    p = load_model(model_id).params
    got = {"total": p.total, "noMTP": p.total - p.mtp}[which]
    assert got == pytest.approx(published, rel=tol), source


def test_deepseek_mtp_module():
    # Model card: "685B ... including 671B of the Main Model weights and 14B of the MTP Module"
    p = load_model("deepseek-ai/DeepSeek-V3").params
    assert p.mtp == pytest.approx(14 * B, rel=0.05)
    assert p.total == pytest.approx(685 * B, rel=0.01)


def test_tied_embeddings_have_no_lm_head():
    p = load_model("LiquidAI/LFM2.5-VL-1.6B").params
    assert p.lm_head == 0 and p.embedding == 65536 * 2048


def test_qwen35_27b_parts_by_hand():
    m = load_model("Qwen/Qwen3.5-27B")
    p = m.params
    assert p.embedding == p.lm_head == 248320 * 5120
    # GDN layer: in_proj_qkv 5120 * (2*16*128 + 48*128) + z 5120*6144 + b,a 2*5120*48
    #   + conv 10240*4 + A_log 48 + dt_bias 48 + norm 128 + out_proj 6144*5120 = 115,876,064
    # full layer: q (with gate) 5120*12288 + k,v 2*5120*1024 + o 6144*5120 + q/k norm 2*256
    #   = 104,858,112
    assert p.attention == 48 * 115_876_064 + 16 * 104_858_112
    assert p.dense_ffn == 64 * 3 * 5120 * 17408
    assert p.norms == 64 * 2 * 5120 + 5120
    # MTP: fc 2*5120*5120 + 3 norms + one full layer + MLP + its 2 norms
    assert p.mtp == 2 * 5120 * 5120 + 3 * 5120 + 104_858_112 + 3 * 5120 * 17408 + 2 * 5120


def test_vision_estimate_qwen35():
    # Qwen3.5 ViT: depth 27, hidden 1152, intermediate 4304, patch 16x16x2, merge 2, out 5120.
    # per block 4*1152 (2 LayerNorms) + 3*1152*1152 + 3*1152 + 1152^2 + 1152 + 2*1152*4304 + 4304
    #   + 1152 = 15,239,504; patch embed 3*2*16*16*1152 + 1152; pos 2304*1152;
    # merger LN 2*1152 + 4608^2 + 4608 + 4608*5120 + 5120
    block = (
        4 * 1152 + 3 * 1152 * 1152 + 3 * 1152 + 1152 * 1152 + 1152 + 2 * 1152 * 4304 + 4304 + 1152
    )
    assert block == 15_239_504
    expected = (
        27 * block
        + (1536 * 1152 + 1152)
        + 2304 * 1152
        + (2 * 1152 + 4608**2 + 4608 + 4608 * 5120 + 5120)
    )
    assert load_model("Qwen/Qwen3.5-27B").params.vision == expected


def test_every_tensor_has_a_known_part_and_positive_size():
    for model_id in (
        "Qwen/Qwen3.5-35B-A3B",
        "moonshotai/Kimi-K3",
        "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
    ):
        for t in tensors(load_model(model_id)):
            assert t.numel > 0, t
            assert t.shard in ("col", "row", "rep", "vocab", "kv", "groups"), t


def test_count_params_of_a_config_dict():
    from servefit import catalog
    from servefit.model.config import read_json
    from servefit.model.inventory import build_model_spec
    from servefit.model.params import count_params

    cfg = read_json(catalog.find("Qwen/Qwen3-8B"))
    spec = build_model_spec(cfg, name="", source="")
    assert count_params(spec) == spec.params == load_model("Qwen/Qwen3-8B").params
