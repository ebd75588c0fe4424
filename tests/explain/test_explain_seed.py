"""explain on the user's case: why 0.85 fails, which flags matter, and the minimal fix.

Every number is checked against a direct plan() of the same launch, so the explanation is a
re-planning, not a rule table.
"""

from __future__ import annotations

import pytest

from servefit._explain.outcome import outcome, starts
from servefit._plan.planner import plan, with_args
from tests.seedcase import PER_REQ

GiB = 1 << 30


def lever(e, name):
    return next(lv for lv in e.levers if lv.name == name)


def flag(e, dest):
    return next(f for f in e.user_flags if f.dest == dest)


def test_085_fails_on_the_speculative_state(failing_085):
    e = failing_085
    assert e.outcome.verdict == "fail"
    assert e.plan.error.startswith("RuntimeError: Not enough memory")
    assert e.plan.error_consumer == "speculative mamba state"
    # consumers ranked by size, each with bytes and the formula's own numbers
    names = [c.name for c in e.consumers]
    assert names[:2] == ["weights", "speculative mamba state"]
    spec = e.consumers[1]
    assert spec.rank == 2
    assert spec.bytes == 48 * 4 * PER_REQ  # requests x draft tokens x per-request bytes
    assert "48 requests x 4 draft tokens x 76,972,032 B" in spec.formula
    assert [c.gib for c in e.consumers] == sorted((c.gib for c in e.consumers), reverse=True)
    # the why: budget arithmetic and the shortfall, from the plan's numbers
    why = "\n".join(e.why)
    budget = e.plan.pools.budget_gib
    assert f"Budget for state + KV: {budget:.2f} GiB" in why
    assert "mem_fraction_static 0.85" in why
    short = 48 * 4 * PER_REQ / GiB + 48 * PER_REQ / GiB - budget
    assert short > 0
    assert f"+{short:.2f} GiB short for the KV cache" in why


def test_ratio_has_no_effect_in_059_and_says_why(failing_085, hand_tuned):
    for e in (failing_085, hand_tuned):
        ratio = lever(e, "mamba_full_memory_ratio")
        assert ratio.effect == "no effect"
        assert ratio.values and all(v.same_as_current for v in ratio.values)
        assert "sized by max_running_requests (radix cache disabled)" in ratio.reason
        assert "speculative decoding" in ratio.reason and "radix cache" in ratio.reason
        assert "never read" in ratio.reason


def test_hand_tuned_ratio_did_not_matter_the_other_two_did(hand_tuned, seed_request):
    e = hand_tuned
    assert e.outcome.verdict == "ok"
    assert flag(e, "mamba_full_memory_ratio").mattered is False
    assert "never read" in flag(e, "mamba_full_memory_ratio").reason
    assert flag(e, "max_running_requests").mattered is True
    assert flag(e, "mem_fraction_static").mattered is True
    # re-planning without the ratio gives exactly the same pools
    req = seed_request(max_running_requests=16, mem_fraction_static=0.88)
    without = plan(req)
    assert without.pools == e.plan.pools and without.per_rank == e.plan.per_rank


def test_ratio_does_matter_in_0523(seed_request):
    from servefit._explain.analysis import explain_request

    e = explain_request(
        seed_request(
            "sglang==0.5.23",
            max_running_requests=16,
            mamba_full_memory_ratio=0.5,
            mem_fraction_static=0.88,
        ),
        with_fix=False,
    )
    assert lever(e, "mamba_full_memory_ratio").effect == "changes"
    assert flag(e, "mamba_full_memory_ratio").mattered is True
    # there the state pool, not --max-running-requests, caps running requests
    assert flag(e, "max_running_requests").mattered is False
    assert "capped at" in flag(e, "max_running_requests").reason


def test_engine_overrides_are_no_effect_with_the_engines_reason(failing_085):
    draft = lever(failing_085, "speculative_num_draft_tokens")
    assert draft.effect == "no effect"
    assert "topk 1 forces draft tokens = steps + 1" in draft.reason
    radix = lever(failing_085, "disable_radix_cache")
    assert radix.effect == "no effect" and "does not support radix cache" in radix.reason


def test_heuristic_only_flags(failing_085, seed_request):
    """chunked prefill only enters the default fraction: no effect when the fraction is given,
    an effect when it is not — found by re-planning both ways."""
    from servefit._explain.analysis import explain_request

    assert lever(failing_085, "chunked_prefill_size").effect == "no effect"
    assert (
        "--mem-fraction-static 0.85 is given" in lever(failing_085, "chunked_prefill_size").reason
    )
    e = explain_request(seed_request(max_running_requests=16), with_fix=False)
    assert lever(e, "chunked_prefill_size").effect == "changes"


def test_lever_values_are_real_replans(failing_085, seed_request):
    req = seed_request(mem_fraction_static=0.85)
    for name in ("mem_fraction_static", "max_running_requests", "mamba_ssm_dtype"):
        for v in lever(failing_085, name).values:
            direct = outcome(plan(with_args(req, **v.args)), 32768)
            assert v.outcome == direct, (name, v.label)


def test_best_and_closest_fixes(failing_085, seed_request):
    fix = failing_085.fix
    assert fix is not None and fix.found
    best = fix.best
    assert len(best.changes) == 1
    change = best.changes[0]
    assert change.flag == "--max-running-requests" and change.old == 48
    assert best.command_flags == f"--max-running-requests {change.new}"
    assert fix.before.verdict == "fail" and fix.before.kv_tokens == 0
    after = best.outcome
    assert after.verdict == "ok" and after.free_gib >= fix.min_free_gib == 2.0
    assert after.kv_tokens > 0 and after.max_running_requests == change.new
    assert best.context_loss == 0
    # brute force over every --max-running-requests value 1..48: the best keeps the most whole
    # full-context requests at once, then the most running requests
    req = seed_request(mem_fraction_static=0.85)
    effs = {}
    for r in range(1, 49):
        o = outcome(plan(with_args(req, max_running_requests=r)), 32768)
        if starts(o, 2.0) and o.effective_concurrency >= 1:
            effs[r] = o.effective_concurrency
    top = max(int(e) for e in effs.values())
    assert change.new == max(r for r, e in effs.items() if int(e) == top) == 12
    # 11 holds more of a request (10.67 vs 10.31 of 32K) but both hold 10 whole ones, and 12
    # runs one more request at once
    assert int(effs[11]) == int(effs[12]) == 10 and effs[11] > effs[12]
    # the closest to what the user asked: their own --mem-fraction-static, the nearest value
    # that starts with one full-context request at once: 0.92 starts but holds 0.71 of one
    # (23,279 KV tokens / 32,768), so 0.93
    closest = fix.minimal
    assert closest.command_flags == "--mem-fraction-static 0.93" and closest.user_flag
    assert closest.distance == pytest.approx((0.93 - 0.85) / 0.85, abs=1e-4)
    o92 = outcome(plan(with_args(req, mem_fraction_static=0.92)), 32768)
    assert (
        o92.verdict == "ok" and o92.kv_tokens / 32768 < 1 <= closest.outcome.full_context_requests
    )
    # a pair of flags is offered too, and does better than any single flag
    pair = next(a for a in fix.alternatives if len(a.changes) == 2)
    assert pair.outcome.effective_concurrency > after.effective_concurrency
    # no candidate runs fewer than one full-context request at once
    for c in [fix.best, fix.minimal, *fix.alternatives]:
        assert c.outcome.effective_concurrency >= 1


def test_explain_on_a_dense_model_has_no_state_levers():
    from servefit._explain.analysis import explain_request
    from servefit._plan.planner import PlanRequest

    e = explain_request(
        PlanRequest(
            model="meta-llama/Meta-Llama-3.1-8B",
            gpu="A6000",
            engine="sglang==0.5.9",
            args={"context_length": 8192},
        )
    )
    names = {lv.name for lv in e.levers}
    assert "mamba_full_memory_ratio" not in names and "speculative_num_steps" not in names
    assert {"mem_fraction_static", "kv_cache_dtype", "context_length"} <= names
    assert e.outcome.verdict == "ok" and e.fix is None
    kv = lever(e, "kv_cache_dtype").values[0]
    assert kv.label == "fp8_e4m3" and kv.outcome.kv_tokens > e.outcome.kv_tokens * 1.9
