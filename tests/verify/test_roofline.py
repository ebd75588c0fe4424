"""The bandwidth-bound decode rate, checked by hand arithmetic on bundled configs."""

from __future__ import annotations

import pytest

from servefit.hardware.catalog import get_gpu
from servefit.model.inventory import load_model
from servefit.model.weights import weights_per_rank
from servefit.verify.roofline import decode_bound, kv_bytes_read, weight_bytes_read


def test_dense_llama_8b_on_rtx_3090():
    model = load_model("meta-llama/Meta-Llama-3.1-8B")
    gpu = get_gpu("RTX 3090")
    parts = weights_per_rank(model, tp=1).parts
    # Untied embedding: the lookup reads one row, so the 128,256 x 4,096 bf16 table is not read.
    assert parts["embedding"] == 128_256 * 4_096 * 2
    assert weight_bytes_read(model, 1) == sum(parts.values()) - parts["embedding"]
    # KV: 32 layers x 8 KV heads x (128 + 128) x 2 bytes = 131,072 B per token.
    assert kv_bytes_read(model, 1, 1) == 131_072
    b = decode_bound(model, gpu, tp=1, context_tokens=1000)
    step = weight_bytes_read(model, 1) + 131_072 * 1000
    assert b.step_bytes == step
    assert b.tokens_per_s == pytest.approx(936e9 / step)  # RTX 3090: 936 GB/s
    assert 60 < b.tokens_per_s < 64  # ~14 GiB per step


def test_accept_length_multiplies_and_tp_divides():
    model = load_model("meta-llama/Meta-Llama-3.1-8B")
    gpu = get_gpu("H100")
    one = decode_bound(model, gpu, tp=1, context_tokens=1)
    assert decode_bound(model, gpu, tp=1, context_tokens=1, accept_length=2.5).tokens_per_s == (
        pytest.approx(2.5 * one.tokens_per_s)
    )
    # TP 2 halves each rank's linear weights (norms are replicated): a bit under 2x faster.
    two = decode_bound(model, gpu, tp=2, context_tokens=1)
    assert 1.9 < two.tokens_per_s / one.tokens_per_s < 2.0


def test_moe_reads_only_the_routed_experts():
    model = load_model("Qwen/Qwen3-30B-A3B")
    parts = weights_per_rank(model, tp=1).parts
    # 8 of 128 experts per token (config num_experts_per_tok / num_experts).
    expected = sum(parts.values()) - parts["embedding"] - round(parts["experts"] * (1 - 8 / 128))
    assert weight_bytes_read(model, 1) == expected


def test_hybrid_state_is_read_and_written():
    # Qwen3.6-27B at TP 2: 48 Gated DeltaNet layers, 76,972,032 B of state per request per rank
    # (README: the seed case); a decode step reads and writes it.
    b = decode_bound(load_model("Qwen/Qwen3.6-27B"), get_gpu("A6000"), tp=2, context_tokens=1)
    assert b.state_bytes == 2 * 76_972_032
