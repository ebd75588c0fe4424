"""explain on a real vLLM 0.24.0 launch: tests/data/ground-truth case
vllm_qwen36_35b_a3b_nvfp4_1x5090_club612 (Qwen3.6-35B-A3B NVFP4 on one RTX 5090, the launch's
non-default args as in tests/plan/test_ground_truth_vllm.py).

The log says the KV pool holds 4.33 requests of 131,072 tokens while max_num_seqs is 1; explain
must say that the request cap binds, and the re-planned levers must agree with the log's
numbers and with the block arithmetic of that test (block 2,096 tokens; per request
cdiv(131,072, 2,096) attention blocks + 3 GDN groups x the Mamba blocks of the cache mode).
"""

from __future__ import annotations

import pytest

from servefit._explain.analysis import explain_request
from servefit._plan.planner import PlanRequest
from servefit.engines.vllm.common import cdiv
from tests.groundtruth import observed
from tests.plan.test_ground_truth_vllm import CLUB612, CONC, TOKENS, number

ARGS = {
    "max_model_len": 131072,
    "kv_cache_dtype": "fp8",
    "enable_prefix_caching": True,
    "max_num_batched_tokens": 8192,
    "max_num_seqs": 1,
    "enable_chunked_prefill": True,
    "limit_mm_per_prompt": {"image": 2, "audio": 0},
}
BLOCK = 2096  # 16 x cdiv(2,146,304 B GDN page, 16 x 1,024 B fp8 attention token)
ATTN_BLOCKS = cdiv(131072, BLOCK)


@pytest.fixture(scope="module")
def club612():
    return explain_request(
        PlanRequest(
            model="nvidia/Qwen3.6-35B-A3B-NVFP4", gpu="RTX 5090", engine="vllm==0.24.0", args=ARGS
        )
    )


def lever(e, name):
    return next(lv for lv in e.levers if lv.name == name)


def flag(e, dest):
    return next(f for f in e.user_flags if f.dest == dest)


def test_the_request_cap_binds(club612):
    e = club612
    logged = float(observed(CLUB612, CONC)["x"])  # "Maximum concurrency ... 4.33x"
    assert e.outcome.verdict == "ok" and e.fix is None
    assert e.outcome.full_context_requests == pytest.approx(logged, rel=0.02)
    assert e.outcome.effective_concurrency == 1  # min(max_num_seqs 1, 4.33)
    assert "Effective concurrency at 131,072 tokens is 1: the request cap binds" in "\n".join(e.why)
    # max_num_seqs 2, re-planned: two requests run, the pool is the logged one
    two = next(v for v in lever(e, "max_num_seqs").values if v.label == "2").outcome
    assert two.effective_concurrency == 2
    assert two.kv_tokens == pytest.approx(number(observed(CLUB612, TOKENS)["tok"]), rel=0.02)


def test_prefix_caching_took_one_block_per_gdn_group(club612):
    """0.24.0 leaves prefix caching off for hybrids (ModelConfig.is_prefix_caching_supported);
    the launch turned it on: Mamba cache mode align, 2 blocks per GDN group instead of 1
    (no speculative tokens). Same blocks, so KV tokens scale with the blocks per request."""
    e = club612
    f = flag(e, "enable_prefix_caching")
    assert f.mattered and f.flag == "--enable-prefix-caching"
    blocks = e.plan.pools.num_blocks
    assert e.outcome.state_slots_per_request == 2
    assert f.without.state_slots_per_request == 1
    assert f.without.kv_tokens == int(blocks / (ATTN_BLOCKS + 3 * 1) * 131072)
    assert e.outcome.kv_tokens == int(blocks / (ATTN_BLOCKS + 3 * 2) * 131072)


def test_levers_without_effect_and_why(club612):
    e = club612
    mbs = lever(e, "mamba_block_size")
    assert mbs.effect == "no effect" and f"attention block size, {BLOCK} tokens" in mbs.reason
    # the profiling peak is the multimodal encoder's (limit_mm_per_prompt image 2), so the
    # forward pass over max_num_batched_tokens sizes nothing
    assert any(c.name == "activation peak (encoder)" for c in e.plan.consumers)
    batched = lever(e, "max_num_batched_tokens")
    assert batched.effect == "no effect" and all(v.same_as_current for v in batched.values)
    assert "multimodal encoder" in batched.reason
    assert flag(e, "max_num_batched_tokens").mattered is False
    assert (
        flag(e, "enable_chunked_prefill").reason == "no effect: it sets the engine's default (True)"
    )


def test_fp8_kv_holds_more_tokens(club612):
    e = club612
    auto = next(v for v in lever(e, "kv_cache_dtype").values if v.label == "auto").outcome
    f = flag(e, "kv_cache_dtype")
    assert f.mattered and f.without == auto
    # bf16 KV doubles the attention page, so the same memory holds fewer tokens
    assert auto.kv_tokens < e.outcome.kv_tokens
