"""Recurrent-state bytes per request and KV bytes per token from parsed configs.

Reference: tests/data/reference/sglang-memory.md §3.6 (conv state bf16, SSM state fp32).
"""

from __future__ import annotations

import pytest

from servefit.model.inventory import load_model

MiB = 1 << 20


def state_per_request(model, tp: int, conv_bytes: int = 2, ssm_bytes: int = 4) -> int:
    return sum(
        model.mixer(i).state_shapes(tp).bytes(conv_bytes, ssm_bytes)
        for i in model.recurrent_layer_ids
    )


def kv_per_token(model, tp: int, dtype_bytes: int = 2) -> int:
    return sum(
        model.mixer(i).kv_elems_per_token(tp) * dtype_bytes for i in model.attention_layer_ids
    )


def test_qwen3_next_state_table():
    # §3.6 table: TP1 77,266,944 B; TP2 38,633,472 B; TP4 19,316,736 B; TP8 9,658,368 B
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert state_per_request(m, 1) == 77_266_944
    assert state_per_request(m, 2) == 38_633_472
    assert state_per_request(m, 4) == 19_316_736
    assert state_per_request(m, 8) == 9_658_368
    # "With --mamba-ssm-dtype bfloat16 the per-request size is 39,518,208 B at TP1"
    assert state_per_request(m, 1, ssm_bytes=2) == 39_518_208


def test_qwen3_next_kv_cell():
    # §3.6: 2*512*12*2 = 24,576 B/token at TP1; 12,288 at TP2 and TP4 (KV heads replicated)
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert [kv_per_token(m, tp) for tp in (1, 2, 4)] == [24_576, 12_288, 12_288]


def test_qwen35_27b_like():
    # §3.6: "A Qwen3.5 dense-like config ... 146.81 MiB/request and 65,536 B/token at TP1;
    # 73.41 MiB and 32,768 B at TP2"
    m = load_model("Qwen/Qwen3.5-27B")
    assert state_per_request(m, 1) / MiB == pytest.approx(146.81, abs=0.005)
    assert state_per_request(m, 2) / MiB == pytest.approx(73.41, abs=0.005)
    assert kv_per_token(m, 1) == 65_536 and kv_per_token(m, 2) == 32_768


def test_nemotron_h_state_uses_mamba_fields():
    # Mamba2StateShape.create: conv_dim = 256*64 + 2*8*256 = 20480 -> (20480, 3);
    # temporal (256, 64, 256). Per layer bf16 conv + fp32 ssm = 122,880 + 16,777,216 B; 54 layers.
    m = load_model("nvidia/Nemotron-H-56B-Base-8K")
    assert state_per_request(m, 1) == 54 * (20480 * 3 * 2 + 256 * 64 * 256 * 4)


def test_kimi_k3_kda_state():
    # KimiLinearStateShape: conv 3 x (3, 96*128); temporal (96, 128, 128); 69 KDA layers.
    m = load_model("moonshotai/Kimi-K3")
    assert state_per_request(m, 1) == 69 * (3 * 3 * 96 * 128 * 2 + 96 * 128 * 128 * 4)


def test_lfm2_conv_only_state():
    # Lfm2Config.mamba2_cache_params: conv (2048, conv_L_cache - 1 = 2), no temporal state.
    m = load_model("LiquidAI/LFM2.5-VL-1.6B")
    assert state_per_request(m, 1) == 10 * 2048 * 2 * 2
