"""SGLang 0.5.9 profile against hand arithmetic from the 0.5.9 wheel's code.

Sources: sglang/srt/server_args.py:_handle_gpu_memory_settings, _handle_speculative_decoding,
_handle_mamba_radix_cache; model_runner_kv_cache_mixin.py:profile_max_num_token,
handle_max_mamba_cache, init_memory_pool; configs/mamba_utils.py.
"""

from __future__ import annotations

import pytest

from servefit.engines.base import MemoryInputs
from servefit.engines.sglang import common
from servefit.engines.sglang import v0_5_9 as prof
from tests.engines.sglang.handbuilt import dense, gpus, qwen36_27b
from tests.seedcase import SEED

A6000 = 49140  # MiB, nvidia-smi memory.total of an RTX A6000


def _resolve(model, mib, count, **args):
    return prof.resolve_args(model, gpus("GPU", mib, count), args, {})


@pytest.mark.parametrize(
    ("mib", "spec", "expected"),
    [
        # reserved = 512 + 8192*1.5 + 256*2 + 1*1/8*1024 = 13440 MiB (> the 10 GiB floor)
        (81559, None, round((81559 - 13440) / 81559, 3)),  # H100: 0.835
        (
            81559,
            "EAGLE",
            round((81559 - 13440 - 2048) / 81559, 3),
        ),  # + 2 GiB "eagle draft models": 0.810
        (143771, None, round((143771 - 13440) / 143771, 3)),  # H200: 0.907
        # RTX 4090 24564 MiB: chunk 2048, bs 24 -> 512 + 3072 + 48 + 128 = 3760
        (24564, None, round((24564 - 3760) / 24564, 3)),
    ],
)
def test_mem_fraction_static_default_dense(mib, spec, expected):
    model = dense("llama-like", 32, 32, 8, 128, arch="Qwen2ForCausalLM")
    r = _resolve(model, mib, 1, speculative_algorithm=spec)
    assert r["mem_fraction_static"] == expected
    assert expected in (0.835, 0.810, 0.907, 0.847)


def test_seed_defaults_a6000_tp2_nextn():
    r = _resolve(qwen36_27b(), A6000, 2, **SEED)
    # 49140 MiB < 60 GiB tier: chunk 4096, cuda graph bs 32 (tp < 4)
    assert r["chunked_prefill_size"] == 4096 and r["cuda_graph_max_bs"] == 32
    # reserved = 512 + 4096*1.5 + 32*2 + 2/8*1024 + 2048 (EAGLE) = 9024 MiB -> 0.816,
    # then the VLM factor: vision has no num_hidden_layers -> 24 layers, hidden 1152:
    # ratio 24*1152^2/(24*1024^2) = 1.265625 -> factor 0.95*(1-0.1*0.265625) = 0.924765625
    assert round((A6000 - 9024) / A6000, 3) == 0.816
    assert r["mem_fraction_static"] == pytest.approx(0.816 * 0.924765625, abs=1e-12)
    assert r["speculative_algorithm"] == "EAGLE"
    assert r["max_running_requests"] == 48
    assert r["disable_radix_cache"] is True  # spec + no_buffer -> radix off
    assert r["disable_overlap_schedule"] is True
    assert r["mamba_scheduler_strategy"] == "no_buffer"
    assert prof.args.RESET_48 in r.log_lines
    assert (
        "Disabling radix cache since speculative decoding for Qwen3_5ForConditionalGeneration is not "
        "supported with radix cache yet."
    ) in r.log_lines


def test_no_spec_hybrid_keeps_radix_and_disables_overlap():
    r = _resolve(qwen36_27b(), A6000, 2, tp_size=2)
    assert r["disable_radix_cache"] is False
    assert r["disable_overlap_schedule"] is True
    assert r["max_running_requests"] is None


def test_topk1_forces_draft_tokens():
    r = _resolve(qwen36_27b(), A6000, 2, **{**SEED, "speculative_num_draft_tokens": 8})
    assert r["speculative_num_draft_tokens"] == 4


def test_state_and_kv_bytes_tp2():
    model = qwen36_27b()
    cost = common.state_cost(model, 2, None, {})
    # conv_dim = 48*128 + 2*16*128 = 10240 -> (5120, 3) bf16 = 30,720 B/layer
    # ssm (48/2, 128, 128) fp32 = 1,572,864 B/layer; 48 GDN layers
    assert cost.conv_bytes == 30_720 * 48 and cost.ssm_bytes == 1_572_864 * 48
    assert cost.per_req == 76_972_032
    # KV: max(1, 4//2) heads * (256+256) * 16 layers * 2 B
    assert common.kv_cell_size(model, 2, 16, "bfloat16") == 32_768
    bf16 = common.state_cost(model, 2, "bfloat16", {})
    assert bf16.per_req == (30_720 + 786_432) * 48


def _size(model, args, pre, weights, mib=A6000, count=2, draft=0.0):
    g = gpus("GPU", mib, count)
    r = prof.resolve_args(model, g, args, {})
    mem = MemoryInputs(
        total_gib=mib / 1024, pre_load_free_gib=pre, weights_gib=weights, draft_weights_gib=draft
    )
    return r, prof.size_pools(model, g, r, mem)


def test_seed_085_fails_on_speculative_state():
    # pre-load 47.00 GiB, weights 25.90 GiB (round figures; the arithmetic is what is tested)
    r, s = _size(qwen36_27b(), {**SEED, "mem_fraction_static": 0.85}, 47.0, 25.9)
    budget = 47.0 - 25.9 - 47.0 * 0.15  # 14.05 GiB
    spec = 76_972_032 * 48 * 4 / 2**30  # 13.76 GiB: per_req x mrr 48 x 4 draft tokens
    pool = 48 * 76_972_032 / 2**30  # 3.44 GiB: radix off -> K = max_running_requests
    assert s.pools.budget_gib == pytest.approx(budget)
    assert budget - spec - pool < 0
    assert s.error == (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: self.server_args.mem_fraction_static=0.85"
    )
    assert s.error_consumer == "speculative mamba state"
    assert s.pools.max_total_num_tokens == 0


def test_seed_fix_starts_and_ratio_is_unused():
    args = {
        **SEED,
        "mem_fraction_static": 0.88,
        "max_running_requests": 16,
        "mamba_full_memory_ratio": 0.5,
    }
    r, s = _size(qwen36_27b(), args, 47.0, 25.9)
    per_req = 76_972_032
    rest = 47.0 - 25.9 - 47.0 * 0.12 - per_req * 16 * 4 / 2**30 - 16 * per_req / 2**30
    assert s.error is None
    assert s.pools.max_mamba_cache_size == 16  # branch B: radix off + explicit mrr
    assert s.pools.mamba_sizing.startswith("max_running_requests")
    assert s.pools.max_total_num_tokens == int(rest * 2**30) // 32_768
    assert s.pools.effective_max_running_requests == 16
    # the same plan with the default ratio 0.9: identical pools (the ratio is not read)
    r2, s2 = _size(qwen36_27b(), {**args, "mamba_full_memory_ratio": 0.9}, 47.0, 25.9)
    assert s2.pools.max_total_num_tokens == s.pools.max_total_num_tokens
    # MambaPool allocates (K+1) conv/ssm slots and (R+1) x D intermediate slots
    assert s.per_rank.mamba_state_gib == pytest.approx(17 * per_req / 2**30)
    assert s.per_rank.spec_state_gib == pytest.approx(17 * 4 * per_req / 2**30)
    assert any(
        line.startswith(
            "Mamba Cache is allocated. max_mamba_cache_size: 16, conv_state size: 0.02GB, "
            "ssm_state size: 1.20GB intermediate_ssm_state_cache size: 4.78GB "
        )
        for line in s.log_lines
    )


def test_ratio_branch_without_spec():
    # radix on (no_buffer), no spec: K = int(rest * r/(1+r) / per_req), 3 slots per request
    r, s = _size(qwen36_27b(), {"tp_size": 2, "mem_fraction_static": 0.88}, 47.0, 25.9)
    per_req = 76_972_032
    rest = 47.0 - 25.9 - 47.0 * 0.12
    K = int(rest * 0.9 / 1.9 * 2**30 // per_req)
    assert s.pools.max_mamba_cache_size == K
    assert s.pools.mamba_slots_per_request == 3
    tokens = int((rest - K * per_req / 2**30) * 2**30) // 32_768
    assert s.pools.max_total_num_tokens == tokens
    # default max_running_requests: clamp(tokens/ctx*512, 2048, 4096) then min with K // 3
    assert s.pools.effective_max_running_requests == min(K // 3, tokens // 2)


def test_dense_qwq32b_4x_l4_calibrated():
    """Ground truth sgl_qwq32b_4xL4_tp4_g6_12xlarge: Load weight begin avail 21.63 GB, end avail
    6.09 GB (usage 15.54), mem_fraction_static 0.85 (its server_args), KV #tokens 46611,
    K size 1.42 GB. QwQ-32B: 64 layers, 8 KV heads of 128 (log notes) -> 2 heads per rank at TP4."""
    model = dense("Qwen/QwQ-32B", 64, 40, 8, 128)
    _, s = _size(
        model, {"tp_size": 4, "mem_fraction_static": 0.85}, 21.63, 15.54, mib=23034, count=4
    )
    assert s.pools.kv_bytes_per_token == 2 * 256 * 64 * 2
    assert s.pools.max_total_num_tokens == pytest.approx(46611, rel=0.005)
    assert round(s.per_rank.kv_cache_gib / 2, 2) == pytest.approx(1.42, abs=0.01)


def test_context_longer_than_model_is_the_engine_error():
    r = _resolve(qwen36_27b(), A6000, 2, tp_size=2, context_length=300_000)
    assert r.error.startswith(
        "ValueError: Warning: User-specified context_length (300000) is greater than "
        "the derived context_length (262144)."
    )


def test_gpt_oss_hybrid_swa_split():
    """set_num_tokens_hybrid_swa: gpt-oss-20b has 12 full + 12 sliding layers with the same
    per-token size (8 KV heads of 64 -> 4 per rank at TP 2: 4 x 128 x 2 B = 1,024 B a layer).
    full = tokens x (F*12 + S*12) / (F*12 + 0.8*S*12) = tokens / 0.9; swa = 0.8 x full."""
    from servefit.model.inventory import load_model

    model = load_model("openai/gpt-oss-20b")
    _, s = _size(model, {"tp_size": 2, "mem_fraction_static": 0.85}, 78.0, 7.0, mib=81559)
    cell = 1024 * 24
    assert s.pools.kv_bytes_per_token == cell
    profiled = int((78.0 - 7.0 - 78.0 * 0.15) * 2**30) // cell
    full = int(profiled * (1024 * 24) / (1024 * 12 + 0.8 * 1024 * 12))
    assert s.pools.max_total_num_tokens == full
    assert (
        f"Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={int(full * 0.8)}"
        in (s.log_lines)
    )
    # B200 picks trtllm_mha for GPT-OSS, which turns the split off
    r = prof.resolve_args(model, gpus("B200", 183359, 2), {"tp_size": 2}, {})
    assert r["disable_hybrid_swa_memory"] is True
    assert r["attention_backend"] == "trtllm_mha"
