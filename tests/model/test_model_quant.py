"""Quantization parsing and per-module storage decisions."""

from __future__ import annotations

import pytest

from servefit.model.inventory import load_model
from servefit.model.quant import QuantPolicy, WeightFormat, module_path_match, parse_quant
from servefit.model.spec import QuantSpec


def _policy(model_id: str) -> QuantPolicy:
    return QuantPolicy(load_model(model_id).quant)


def test_modelopt_mixed_precision_per_layer():
    # nvidia__Qwen3.6-27B-NVFP4.json quantized_layers: linear_attn in_proj_qkv/in_proj_z/out_proj
    # and self_attn q/k/v/o FP8, mlp gate/up/down and lm_head W4A16_NVFP4 (group 16); in_proj_a/b
    # absent (bf16); ignore ["mtp*", "mtp.layers.0*"]; kv_cache_scheme float 8 bits.
    m = load_model("nvidia/Qwen3.6-27B-NVFP4")
    assert (m.quant.method, m.quant.weight_bits, m.quant.group_size) == ("nvfp4", 4, 16)
    assert m.quant.kv_cache_fp8
    pol = QuantPolicy(m.quant)
    p = "model.language_model.layers.0"
    assert pol.fmt((f"{p}.linear_attn.in_proj_qkv",), "linear") == WeightFormat("fp8", 8)
    assert pol.fmt((f"{p}.linear_attn.in_proj_a",), "linear") is None
    assert pol.fmt((f"{p}.mlp.gate_proj",), "linear") == WeightFormat("nvfp4", 4, group=16)
    assert pol.fmt(("model.language_model.layers.3.self_attn.k_proj",), "linear") == WeightFormat(
        "fp8", 8
    )
    assert pol.fmt(("lm_head",), "lm_head") == WeightFormat("nvfp4", 4, group=16)
    assert pol.fmt(("mtp.layers.0.mlp.gate_proj",), "linear") is None
    assert pol.fmt(("model.language_model.embed_tokens",), "embedding") is None


def test_modelopt_moe_experts_and_no_kv_scheme():
    m = load_model("nvidia/Qwen3.6-35B-A3B-NVFP4")
    assert not m.quant.kv_cache_fp8  # this file has no kv_cache_scheme
    pol = QuantPolicy(m.quant)
    assert pol.fmt(("model.language_model.layers.5.mlp.experts",), "expert").kind == "nvfp4"
    assert pol.fmt(("model.language_model.layers.5.mlp.gate",), "none") is None


def test_modelopt_hf_quant_config_kv_algo():
    q = parse_quant(
        {
            "quantization_config": {
                "quant_method": "modelopt",
                "quant_algo": "FP8",
                "kv_cache_quant_algo": "FP8",
            }
        },
        {},
    )
    assert (q.method, q.weight_bits, q.kv_cache_fp8) == ("fp8", 8, True)
    q = parse_quant(
        {
            "quantization_config": {
                "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None}
            }
        },
        {},
    )
    assert (q.method, q.kv_cache_fp8) == ("nvfp4", False)


def test_gpt_oss_mxfp4_quantizes_only_experts():
    pol = _policy("openai/gpt-oss-20b")
    assert pol.fmt(("model.layers.0.mlp.experts",), "expert") == WeightFormat("mxfp4", 4, group=32)
    assert pol.fmt(("model.layers.0.self_attn.q_proj",), "linear") is None


def test_deepseek_block_fp8_everywhere_but_embeddings():
    pol = _policy("deepseek-ai/DeepSeek-V3")
    fmt = pol.fmt(("model.layers.3.self_attn.kv_b_proj",), "linear")
    assert fmt == WeightFormat("fp8", 8, block=(128, 128))
    # 7168 x 2048 expert down proj: 14,680,064 B + 56 x 16 fp32 scales
    assert fmt.matrix_bytes(7168, 2048) == 7168 * 2048 + 56 * 16 * 4
    assert pol.fmt(("lm_head",), "lm_head") is None


def test_compressed_tensors_regex_ignore_kimi_k3():
    # Kimi-K3 text_config.quantization_config: mxfp4-pack-quantized, group 32, targets Linear,
    # ignore re:.*self_attn.*, re:.*shared_experts.*, re:.*mlp\.(gate|up|gate_up|down)_proj.*, ...
    pol = _policy("moonshotai/Kimi-K3")
    assert pol.fmt(("model.language_model.layers.1.mlp.experts",), "expert").kind == "mxfp4"
    assert pol.fmt(("model.language_model.layers.0.mlp.gate_proj",), "linear") is None
    assert pol.fmt(("model.language_model.layers.1.mlp.shared_experts.up_proj",), "linear") is None
    assert pol.fmt(("model.language_model.layers.0.self_attn.q_proj",), "linear") is None


@pytest.mark.parametrize(
    "cfg,expected",
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, ("awq", 4, 128)),
        ({"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": True}, ("gptq", 4, 0)),
        (
            {"quant_method": "intel/auto-round", "bits": 4, "group_size": 128},
            ("auto-round", 4, 128),
        ),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, ("bitsandbytes", 4, 64)),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "targets": ["Linear"],
                        "weights": {
                            "num_bits": 4,
                            "type": "int",
                            "group_size": 64,
                            "symmetric": False,
                        },
                    }
                },
            },
            ("compressed-tensors", 4, 64),
        ),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, ("fp8", 8, 128)),
        ({"quant_method": "mxfp4"}, ("mxfp4", 4, 32)),
        ({"quant_method": "someday-new", "bits": 3}, ("someday-new", 3, 0)),
    ],
)
def test_parse_methods(cfg, expected):
    q = parse_quant({"quantization_config": cfg}, {})
    assert (q.method, q.weight_bits, q.group_size) == expected


def test_quant_config_in_text_config_wins():
    q = parse_quant(
        {"quantization_config": {"quant_method": "fp8"}},
        {"quantization_config": {"quant_method": "awq", "bits": 4}},
    )
    assert q.method == "awq"


def test_no_quant():
    assert parse_quant({}, {}) == QuantSpec()


def test_int4_group_bytes():
    # AWQ int4, group 128: 4096 x 4096 -> 8 MiB packed + 4096*32 fp16 scales + 4096*32 int4 zeros
    fmt = WeightFormat("int", 4, group=128, zeros=True)
    assert fmt.matrix_bytes(4096, 4096) == 4096 * 4096 // 2 + 4096 * 32 * 2 + 4096 * 32 // 2


def test_nvfp4_bytes():
    # e2m1 packed (0.5 B) + one fp8 scale per 16 + weight_scale_2 and input_scale (fp32)
    assert WeightFormat("nvfp4", 4, group=16).matrix_bytes(5120, 17408) == (
        5120 * 17408 // 2 + 5120 * 17408 // 16 + 8
    )


def test_module_path_match_boundaries():
    # sglang/srt/layers/quantization/utils.py:_module_path_match semantics
    assert module_path_match("mlp.gate", "model.layers.0.mlp.gate")
    assert not module_path_match("mlp.gate", "model.layers.0.mlp.gate_up_proj")
    assert module_path_match("lm_head", "lm_head")
    assert module_path_match("model.layers.*.self_attn", "model.layers.3.self_attn")
    assert module_path_match("re:.*visual.*", "model.visual.blocks.0.attn.qkv")
    assert not module_path_match("re:([", "anything")


def test_glob_covers_submodules():
    # gpt-oss modules_to_not_convert: "model.layers.*.self_attn" skips its projections
    assert module_path_match("model.layers.*.self_attn", "model.layers.3.self_attn.q_proj")
    assert not module_path_match("model.layers.*.self_attn", "model.layers.3.mlp.experts")
