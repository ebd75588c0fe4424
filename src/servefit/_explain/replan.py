"""Re-planning helpers shared by explain, fix and fit."""

from __future__ import annotations

from typing import Any

from servefit._explain.lever_types import Option
from servefit._plan.planner import (
    PlanRequest,
    plan_or_reject,
    resolve_gpu,
    resolve_model,
    with_args,
)
from servefit._plan.schema import Plan
from servefit.errors import ServefitError
from servefit.evolve import evolve
from servefit.model.spec import ModelSpec


def prepared(request: PlanRequest) -> tuple[PlanRequest, ModelSpec]:
    """The request with its model and GPU resolved once, so re-plans skip loading them."""
    model = resolve_model(request.model)
    gpu = request.gpu
    if not hasattr(gpu, "memory_mib"):
        gpu, _ = resolve_gpu(gpu, None)
    return evolve(request, model=model, gpu=gpu), model


def apply(request: PlanRequest, args: dict[str, Any], num_gpus: int | None = None) -> PlanRequest:
    req = with_args(request, **args)
    if num_gpus is not None:
        req = evolve(req, num_gpus=num_gpus)
    return req


def try_plan(request: PlanRequest) -> tuple[Plan | None, str | None]:
    """plan(), with servefit's input errors and what the engine refuses outright (e.g. TP not
    dividing the heads) returned.

    A re-plan explores combinations the user did not ask for; an error on one of them is
    reported as that value's rejection instead of ending the whole explanation."""
    try:
        return plan_or_reject(request), None
    except ServefitError as exc:
        return None, str(exc)
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:  # a profile gap, not input
        return None, f"servefit cannot plan this combination ({type(exc).__name__}: {exc})"


def replan(request: PlanRequest, option: Option) -> tuple[Plan | None, str | None]:
    return try_plan(apply(request, option.args, option.num_gpus))


def changed_dests(base: dict[str, Any], args: dict[str, Any]) -> list[str]:
    """The engine attributes `args` sets to something other than `base` (resolved args)."""
    return [k for k, v in args.items() if base.get(k) != v]
