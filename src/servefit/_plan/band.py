"""How sure a cold plan is: the same launch planned at the edges of the measured terms.

The engines measure part of their budget at start-up (engines/residuals.py): SGLang the free
memory before the weights and the weights, vLLM the weights and its profiling run. A cold plan
models them; each model is off on real logs by up to its residual's bound. The band plans the
launch twice more, with every modelled term at the edge that leaves the least KV memory and at
the one that leaves the most, as measured inputs (engines/base.py:Measured): the planner stays
pure, the band is two more plans. When the verdict differs at an edge, the plan is MARGINAL.

A calibrated plan has no band: its terms are measured (servefit/calibration).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from servefit._plan.schema import Band
from servefit.engines import residuals as R

if TYPE_CHECKING:
    from servefit._plan.planner import PlanRequest
    from servefit._plan.schema import Plan


def edges(request: PlanRequest, plan: Plan) -> tuple[PlanRequest, PlanRequest, list[str]] | None:
    """(low, high) requests and the terms' words; None when nothing modelled is measured."""
    r = plan.per_rank
    if plan.calibrated or plan.hardware.source == "cpu" or r.weights_gib <= 0:
        return None
    if plan.engine.name == "sglang":
        dp = R.SGLANG_FREE_BEFORE_WEIGHTS_GIB.bound
        dw = R.WEIGHTS_FRACTION.bound * r.weights_gib
        free, w = r.pre_load_free_gib, r.weights_gib
        low = replace(request, measured_free_before_gib=free - dp, measured_weights_gib=w + dw)
        top = min(free + dp, r.total_gib)
        high = replace(
            request, measured_free_before_gib=top, measured_weights_gib=max(w - dw, 1e-6)
        )
        words = [_words(R.SGLANG_FREE_BEFORE_WEIGHTS_GIB, f"±{dp:.2f} GiB")]
    else:
        w = r.weights_gib + r.draft_weights_gib
        dw = R.WEIGHTS_FRACTION.bound * w
        dn = R.VLLM_NONKV_FRACTION.bound * r.activation_gib
        low = replace(request, measured_weights_gib=w + dw, measured_nonkv_correction_gib=dn)
        high = replace(
            request, measured_weights_gib=max(w - dw, 1e-6), measured_nonkv_correction_gib=-dn
        )
        words = [_words(R.VLLM_NONKV_FRACTION, f"±{dn:.2f} GiB")]
    words.append(_words(R.WEIGHTS_FRACTION, f"±{dw:.2f} GiB"))
    return replace(low, text=False), replace(high, text=False), words


def _words(res: R.Residual, amount: str) -> str:
    held = len(res.held_out)
    return (
        f"{res.term.split(' (')[0]} {amount} (largest residual on {len(res.values)} real logs, "
        f"{held} not fitted on)"
    )


def band_of(request: PlanRequest, plan: Plan) -> Band | None:
    from servefit._plan.planner import plan as plan_of

    found = edges(request, plan)
    if found is None:
        return None
    low_req, high_req, words = found
    low, high = plan_of(low_req), plan_of(high_req)
    return Band(
        kv_budget_gib=round(
            max(
                plan.pools.budget_gib - low.pools.budget_gib,
                high.pools.budget_gib - plan.pools.budget_gib,
                0.0,
            ),
            3,
        ),
        kv_tokens_low=low.pools.max_total_num_tokens,
        kv_tokens_high=high.pools.max_total_num_tokens,
        verdict_low=low.verdict,
        verdict_high=high.verdict,
        error_low=low.error,
        marginal=low.verdict != plan.verdict or high.verdict != plan.verdict,
        terms=words,
    )


def with_band(request: PlanRequest, plan: Plan) -> Plan:
    """The plan with its band (Plan.band); unchanged when it has none."""
    b = band_of(request, plan)
    return plan if b is None else replace(plan, band=b)
