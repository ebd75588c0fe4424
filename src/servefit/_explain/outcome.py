"""Reduce a Plan to the numbers explain and fit compare (Outcome), and compare two of them."""

from __future__ import annotations

from servefit._explain.catalogue import catalogue_for
from servefit._explain.schema import Outcome
from servefit._plan.schema import Plan

# Per-rank consumers in the order they are drawn and compared.
MEMORY_KEYS = (
    "weights",
    "draft_weights",
    "kv_cache",
    "mamba_state",
    "spec_state",
    "draft_kv",
    "req_to_token",
    "reserved",
    "cuda_context",
    "activation_peak",
    "graphs",
    "free",
)


_GRAPHS = ("CUDA-graph", "non-torch")


def shortfall_gib(plan: Plan) -> float:
    """How much memory the launch lacks: the weights beyond the memory free before they load,
    a failing plan's state reservations beyond its budget (or a negative budget), or an OOM
    plan's negative free memory.
    0 when the launch fails for another reason (vLLM's Mamba-block check) or does not lack any."""
    p, r = plan.pools, plan.per_rank
    weights = r.weights_gib + r.draft_weights_gib
    if plan.verdict == "fail" and weights >= r.pre_load_free_gib > 0:
        return weights - r.pre_load_free_gib  # the GPU lacks this much to load the weights
    if plan.verdict == "fail":
        return max(0.0, -p.kv_budget_gib, -p.budget_gib)
    return max(0.0, -plan.per_rank.free_gib)


def memory_gib(plan: Plan) -> dict[str, float]:
    """Per-rank memory by consumer. `activation_peak` and `graphs` are vLLM's profiled peak and
    its CUDA-graph + non-torch estimate (inside its `reserved`; 0 for SGLang, whose graphs and
    activations come out of `free`); `short` is shortfall_gib."""
    r = plan.per_rank
    # the consumers' sums in one pass; a float when none matches (records hold what they are given)
    activation = graphs = 0.0
    for c in plan.consumers:
        if c.name.startswith("activation peak"):
            activation += c.gib
        elif c.name.startswith(_GRAPHS):
            graphs += c.gib
    return {
        "weights": r.weights_gib,
        "draft_weights": r.draft_weights_gib,
        "kv_cache": r.kv_cache_gib,
        "mamba_state": r.mamba_state_gib,
        "spec_state": r.spec_state_gib,
        "draft_kv": r.draft_kv_gib,
        "req_to_token": r.req_to_token_gib,
        "reserved": r.reserved_gib,
        "cuda_context": r.total_gib - r.pre_load_free_gib,
        "activation_peak": activation,
        "graphs": graphs,
        "free": r.free_gib,
        "short": shortfall_gib(plan),
    }


def outcome(plan: Plan, target_context: int | None = None) -> Outcome:
    """The comparable numbers of `plan`, concurrency measured at `target_context`
    (default: the context length the plan resolved).

    Full-context requests are KV tokens / target, or, at the plan's own context, the engine's
    own count when it reports one (vLLM's blocks / blocks per request, which also counts the
    Mamba blocks each request holds). free_gib is the engine's headroom after everything it
    reserves (servefit/_explain/budget.py)."""
    p = plan.pools
    ok = plan.verdict == "ok"
    target = int(target_context or p.context_len or 1)
    tokens = p.max_total_num_tokens if ok else 0
    running = p.effective_max_running_requests if ok else 0
    full = tokens / target if target else 0.0
    if ok and p.max_concurrency is not None and target == p.context_len:
        full = p.max_concurrency
    return Outcome(
        verdict=plan.verdict,
        error=plan.error,
        error_consumer=plan.error_consumer,
        kv_tokens=tokens,
        max_running_requests=running,
        context_len=p.context_len,
        target_context=target,
        full_context_requests=round(full, 2),
        effective_concurrency=round(min(float(running), full), 2),
        free_gib=round(catalogue_for(plan.engine.name).headroom(plan), 3),
        state_slots=p.max_mamba_cache_size,
        state_slots_per_request=p.mamba_slots_per_request,
        state_sizing=p.mamba_sizing,
        cap_reason=p.cap_reason,
        memory_gib={k: round(v, 4) for k, v in memory_gib(plan).items()},
    )


def signature(o: Outcome) -> tuple[object, ...]:
    """What must differ for a change to count as an effect (pools, verdict, concurrency)."""
    return (
        o.verdict,
        o.error,
        o.kv_tokens,
        o.max_running_requests,
        o.context_len,
        o.state_slots,
        o.state_slots_per_request,
        tuple(round(v, 3) for v in o.memory_gib.values()),
    )


def delta(new: Outcome, old: Outcome) -> dict[str, float]:
    """Per-rank consumer changes above 0.005 GiB."""
    out = {}
    for k in MEMORY_KEYS:
        d = new.memory_gib.get(k, 0.0) - old.memory_gib.get(k, 0.0)
        if abs(d) >= 0.005:
            out[k] = round(d, 2)
    return out


def starts(o: Outcome, min_free_gib: float) -> bool:
    """The engine starts and leaves at least `min_free_gib` for activations and CUDA graphs."""
    return o.verdict == "ok" and o.max_running_requests > 0 and o.free_gib >= min_free_gib


def summary(o: Outcome) -> str:
    if o.verdict != "ok":
        return f"fails ({o.error_consumer or 'startup'})"
    return (
        f"{o.kv_tokens:,} KV tokens, {o.max_running_requests} running, "
        f"{o.effective_concurrency:g} at {o.target_context:,} ctx, {o.free_gib:.2f} GiB free"
    )
