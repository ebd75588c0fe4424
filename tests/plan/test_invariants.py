"""No impossible plan: never "starts" with negative free memory, never a negative pool, slot or
token count, for any engine release (servefit/plan/invariants.py)."""

from __future__ import annotations

import pytest

from servefit import catalog
from servefit._plan.planner import PlanRequest, plan
from servefit.errors import ServefitError

COUNTS = (
    "max_total_num_tokens",
    "max_mamba_cache_size",
    "mamba_slots_per_request",
    "spec_state_slots",
    "effective_max_running_requests",
    "max_concurrency_at_context",
    "num_blocks",
    "mamba_blocks",
    "max_concurrency",
)
ALLOCATIONS = (
    "weights_gib",
    "draft_weights_gib",
    "kv_cache_gib",
    "mamba_state_gib",
    "spec_state_gib",
    "draft_kv_gib",
    "req_to_token_gib",
)


def possible(p) -> list[str]:
    wrong = []
    if p.verdict == "ok" and p.per_rank.free_gib < 0:
        wrong.append(f"starts with {p.per_rank.free_gib:.2f} GiB free")
    for f in COUNTS:
        v = getattr(p.pools, f)
        if v is not None and v < 0:
            wrong.append(f"{f} = {v}")
    for f in ALLOCATIONS:
        if getattr(p.per_rank, f) < 0:
            wrong.append(f"{f} = {getattr(p.per_rank, f):.2f}")
    return wrong


def test_gpt_oss_on_three_pipeline_stages_runs_out_of_memory():
    """sglang 0.5.9's SWAKVPool allocates every layer's K/V on every pipeline stage
    (mem_cache/swa_memory_pool.py:SWAKVPool.__init__ takes model_config's full layer id lists)
    while profile_max_num_token sized the tokens for one stage's 8 of 24 layers: the pool is 3x
    the stage's budget, and the allocation fails. It used to say STARTS with -108 GiB free."""
    p = plan(
        PlanRequest(
            model="openai/gpt-oss-20b",
            gpu="H100",
            engine="sglang==0.5.9",
            args={"pp_size": 3, "max_running_requests": 16},
        )
    )
    assert p.verdict == "fail" and not possible(p)
    assert p.error == "torch.OutOfMemoryError: CUDA out of memory allocating the kv cache"
    assert p.error_consumer == "kv cache"
    # 24 layers on a stage whose budget holds 8: the pool is ~3 budgets (SWA split aside)
    assert p.per_rank.kv_cache_gib == pytest.approx(3 * p.pools.kv_budget_gib, rel=0.02)
    assert p.per_rank.kv_cache_gib > p.per_rank.pre_load_free_gib - p.per_rank.weights_gib


def test_qwen3_next_on_one_a6000_fails_loading_its_weights():
    """148 GiB of bf16 weights on a 48 GB card: the engine dies in load_model, before any pool
    exists. It used to report a -50.95 GiB state pool of -708 slots."""
    p = plan(
        PlanRequest(model="Qwen/Qwen3-Next-80B-A3B-Thinking", gpu="A6000", engine="sglang==0.5.9")
    )
    assert p.verdict == "fail" and not possible(p)
    assert p.error == "torch.OutOfMemoryError: CUDA out of memory while loading the weights"
    assert p.error_consumer == "weights"
    assert p.per_rank.weights_gib > 140 > 48 > p.per_rank.pre_load_free_gib
    assert p.per_rank.mamba_state_gib == p.per_rank.kv_cache_gib == 0.0
    assert p.error_detail.startswith("weights take 148.")


@pytest.mark.parametrize(
    "engine", ["sglang==0.5.9", "sglang==0.5.23", "vllm==0.24.0", "vllm==0.33.0"]
)
def test_no_impossible_plan_across_the_catalog(engine):
    """Every bundled model, on a small and a large GPU, plain and on 3 pipeline stages."""
    is_vllm = engine.startswith("vllm")
    pp = "pipeline_parallel_size" if is_vllm else "pp_size"
    wrong = {}
    for entry in catalog.entries():
        for gpu, args in (("L4", {}), ("H200", {}), ("H100", {pp: 3})):
            try:
                p = plan(PlanRequest(model=entry.id, gpu=gpu, engine=engine, args=args))
            except ServefitError:
                continue  # a model this release cannot serve: a clear error, checked elsewhere
            if possible(p):
                wrong[(entry.id, gpu, str(args))] = possible(p)
    assert not wrong
