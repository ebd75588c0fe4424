"""How each engine's budget reads in plain sentences, and the headroom a launch leaves.

SGLang sizes its pools from `pre-load free x mem_fraction_static - weights`; what is left after
the pools must hold the activations and CUDA graphs, so its headroom is `per_rank.free_gib`.
vLLM sizes them from `total x gpu_memory_utilization - non-KV memory`, where the non-KV memory
already holds the profiled activation peak and the CUDA-graph estimate
(vllm/v1/worker/gpu_worker.py:Worker.determine_available_memory); its headroom is what is left
beyond all of that: `per_rank.free_gib` (which is before activations) less the activation peak.
"""

from __future__ import annotations

import math

from servefit._plan.schema import Plan
from servefit.units import GiB


def free_after_pools(p: Plan) -> float:
    return p.per_rank.free_gib


def _consumer(p: Plan, prefix: str) -> float:
    return sum(c.gib for c in p.consumers if c.name.startswith(prefix))


def vllm_headroom(p: Plan) -> float:
    return p.per_rank.free_gib - _consumer(p, "activation peak")


def sglang_notes(p: Plan, failing: bool) -> list[str]:
    out = []
    budget = _sglang_budget(p)
    if budget:
        out.append(budget)
    r, pools = p.per_rank, p.pools
    taken = r.mamba_state_gib + r.spec_state_gib
    if failing and taken and pools.budget_gib > 0:
        out.append(
            f"State reservations {taken:.2f} GiB (state pool {r.mamba_state_gib:.2f} + "
            f"speculative state {r.spec_state_gib:.2f}) vs budget {pools.budget_gib:.2f} GiB: "
            f"{taken - pools.budget_gib:+.2f} GiB short for the KV cache."
        )
    return out


def _sglang_budget(p: Plan) -> str | None:
    r = p.per_rank
    f = p.resolved_args.get("mem_fraction_static")
    if f is None:
        return None
    plain = r.pre_load_free_gib * f - r.weights_gib
    with_draft = plain - r.draft_weights_gib
    b = p.pools.budget_gib
    if abs(b - plain) < 0.01:
        tail = ""
    elif abs(b - with_draft) < 0.01:
        tail = f" - draft weights {r.draft_weights_gib:.2f}"
    else:
        return f"Budget for state + KV: {b:.2f} GiB per rank."
    return (
        f"Budget for state + KV: {b:.2f} GiB = pre-load free {r.pre_load_free_gib:.2f} x "
        f"mem_fraction_static {f:.4g} - weights {r.weights_gib:.2f}{tail}."
    )


def vllm_notes(p: Plan, failing: bool) -> list[str]:
    """vllm/v1/worker/utils.py:request_memory (requested = ceil(total x utilization)) and
    gpu_worker.py:determine_available_memory (available = requested - non-KV memory)."""
    util = p.resolved_args.get("gpu_memory_utilization")
    b = p.pools.budget_gib
    if util is None or b <= 0:
        return []
    total = p.per_rank.total_gib
    requested = math.ceil(total * GiB * util) / GiB
    parts = {
        "weights": _consumer(p, "weights"),
        "activation peak": _consumer(p, "activation peak"),
        "CUDA graphs": _consumer(p, "CUDA-graph"),
        "non-torch": _consumer(p, "non-torch"),
    }
    non_kv = requested - b
    if abs(non_kv - sum(parts.values())) > 0.01:  # --kv-cache-memory-bytes skips profiling
        return [f"KV cache budget: {b:.2f} GiB per rank."]
    listed = ", ".join(f"{k} {v:.2f}" for k, v in parts.items() if v >= 0.005)
    return [
        f"KV cache budget: {b:.2f} GiB = total {total:.2f} x gpu_memory_utilization {util:g} "
        f"- non-KV {non_kv:.2f} GiB ({listed})."
    ]
