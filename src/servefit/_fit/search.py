"""fit: search parallelism and flags for launches that start, best effective concurrency first.

Every candidate is a real plan() of the engine profile. The grid: each TP x PP layout that uses
all GPUs (x nodes), then (if the user allows) lossy dtypes / prefix caching off, then the
running-request cap (SGLang --max-running-requests, vLLM --max-num-seqs), then SGLang's
state-pool sizing (explicit --max-mamba-cache-size of exactly running x slots-per-request, or
the ratio), then the memory fraction ascending (SGLang --mem-fraction-static, vLLM
--gpu-memory-utilization); the context is the target's. The fraction loop stops once the
headroom after the pools drops under `min_free_gib` (it only shrinks as the fraction grows), so
candidates past that point are never planned. When the full grid would pass MAX_EVALS plans
(many layouts, lossy variants), both grids are thinned evenly per layout. What each engine
searches: servefit/_fit/space.py.

Ranking and what is shown: servefit/_fit/rank.py.
"""

from __future__ import annotations

import time
from typing import Any, TypeVar

from servefit._explain.outcome import outcome, starts
from servefit._explain.replan import try_plan
from servefit._fit import rank as ranking
from servefit._fit.request import Eval, FitRequest, check
from servefit._fit.schema import FitResult, LayoutNote
from servefit._fit.space import FitSpace, space_for
from servefit._plan.planner import PlanRequest, resolve_gpu, resolve_model
from servefit._plan.schema import Plan
from servefit.calibration.entry import Entry
from servefit.errors import ArgumentError
from servefit.evolve import evolve

MAX_EVALS = 8_000  # past this (many layouts, lossy variants) the grids are thinned evenly


MAX_PICKED_GPUS = 64  # fit without --num-gpus looks no further


def fit(req: FitRequest) -> FitResult:
    """The best launches on req.num_gpus GPUs per node; without a count, on the smallest count
    (one node) at which anything starts (FitResult.gpus_note says how it was picked)."""
    if req.num_gpus is not None:
        return _fit(req)
    first = _weights_fit_at(req)
    if first is None:
        raise ArgumentError(
            f"the weights do not fit on up to {MAX_PICKED_GPUS} GPUs of this kind; "
            "pass --num-gpus to search a count anyway"
        )
    result = None
    for n in range(first, min(first + 8, MAX_PICKED_GPUS) + 1):
        result = _fit(evolve(req, num_gpus=n, nodes=1))
        if result.best:
            break
    assert result is not None
    note = (
        f"--num-gpus picked: {result.gpus_per_node}, the smallest count of this GPU on which "
        f"a launch starts (the weights alone need {first})"
    )
    return result.model_copy(update={"gpus_note": note})


def _weights_fit_at(req: FitRequest) -> int | None:
    """The smallest GPU count with a TP x PP layout whose weights (and draft) fit in the memory
    free before they load, at the engine's defaults."""
    from servefit.engines.registry import parse_engine

    space = space_for(parse_engine(req.engine)[0])
    model = resolve_model(req.model)
    gpu = req.gpu if hasattr(req.gpu, "memory_mib") else resolve_gpu(req.gpu, None)[0]
    spec_args = space.spec_arguments(req.spec, req.spec_steps, req.draft_model, model)
    proto = PlanRequest(
        model=model,
        gpu=gpu,
        engine=req.engine,
        env=dict(req.env),
        gpu_mem_mib=req.gpu_mem_mib,
        free_gib=req.free_gib,
    )
    for n in range(1, MAX_PICKED_GPUS + 1):
        for tp in sorted((d for d in range(1, n + 1) if n % d == 0), reverse=True):
            args = space.layout_args(tp, n // tp, req.context, spec_args)
            p, _ = try_plan(evolve(proto, args=args, num_gpus=n))
            if p is None:
                continue
            r = p.per_rank
            if r.weights_gib + r.draft_weights_gib < r.pre_load_free_gib:
                return n
    return None


def _fit(req: FitRequest) -> FitResult:
    check(req)
    from servefit.engines.registry import parse_engine

    space = space_for(parse_engine(req.engine)[0])
    if req.min_free_gib is None:
        req = evolve(req, min_free_gib=space.catalogue.min_free_gib)
    t0 = time.perf_counter()
    model = resolve_model(req.model)
    gpu = req.gpu if hasattr(req.gpu, "memory_mib") else resolve_gpu(req.gpu, None)[0]
    spec_args = space.spec_arguments(req.spec, req.spec_steps, req.draft_model, model)
    kept = {
        k: v
        for k, v in (req.baseline or {}).items()
        if k in space.kept_from_baseline and v is not None
    }
    carried = space.carried(req.baseline)
    total = req.per_node * req.nodes
    proto = PlanRequest(
        model=model,
        gpu=gpu,
        engine=req.engine,
        env=dict(req.env),
        gpu_mem_mib=req.gpu_mem_mib,
        free_gib=req.free_gib,
    )
    evals: list[Eval] = []
    notes: list[LayoutNote] = []
    profile = None
    layouts = sorted((d for d in range(1, total + 1) if total % d == 0), reverse=True)
    for tp in layouts:
        pp = total // tp
        base = {**carried, **space.layout_args(tp, pp, req.context, spec_args), **kept}
        layout_req, calibrated = _calibrated(
            evolve(proto, args=base, num_gpus=tp * pp), req.calibrations
        )
        p0, err = try_plan(layout_req)
        if p0 is None:
            notes.append(LayoutNote(tp_size=tp, pp_size=pp, evaluated=1, starting=0, rejected=err))
            continue
        profile = p0.engine.profile
        before = len(evals)
        _search_layout(req, space, layout_req, p0, tp, pp, evals, MAX_EVALS // len(layouts))
        mine = evals[before:]
        notes.append(
            LayoutNote(
                tp_size=tp,
                pp_size=pp,
                evaluated=len(mine) + 1,
                starting=sum(e.ok for e in mine),
                rejected=None if any(e.ok for e in mine) else _why_none(p0, mine),
                calibrated_from=calibrated,
            )
        )
    search_s = time.perf_counter() - t0
    if profile is None:
        from servefit.engines.registry import select

        profile = select(req.engine)[1].profile
    ranked = ranking.rank(req, space, [e for e in evals if e.ok])
    model_path = req.model_path or (req.model if isinstance(req.model, str) else model.name)
    best = [
        ranking.candidate(req, space, proto, e, i + 1, profile, model_path)
        for i, e in enumerate(ranked[: req.top])
    ]
    baseline = ranking.baseline(req, space, proto, profile, model_path) if req.baseline else None
    beats = None
    if baseline is not None and best:
        b, o = baseline.outcome, best[0].outcome
        beats = o.effective_concurrency >= b.effective_concurrency and o.kv_tokens >= b.kv_tokens
    elapsed = time.perf_counter() - t0
    n = sum(note.evaluated for note in notes)
    return FitResult(
        model=model.name,
        gpu=gpu.name,
        engine=req.engine,
        profile=profile,
        gpus_per_node=req.per_node,
        nodes=req.nodes,
        context=req.context,
        concurrency=req.concurrency,
        spec=req.spec,
        min_free_gib=req.headroom_gib,
        allow_lossy=req.allow_lossy,
        allow_no_radix=req.allow_no_radix,
        candidates_evaluated=n,
        candidates_starting=sum(e.ok for e in evals),
        elapsed_s=round(elapsed, 4),
        candidates_per_s=round(n / search_s, 1) if search_s else 0.0,
        layouts=notes,
        best=best,
        baseline=baseline,
        beats_baseline=beats,
        sweeps=ranking.sweeps(ranked[0], evals, space, profile, req.concurrency) if ranked else [],
        note=None if best else _nothing_note(req, notes),
        ranking=ranking.RANKING.format(margin=ranking.FRACTION_MARGIN),
    )


def _calibrated(request: PlanRequest, entries: tuple[Entry, ...]) -> tuple[PlanRequest, str | None]:
    """The layout's request with its recorded start's measurements (calibration/apply.py), and
    where they came from; unchanged when no entry matches the layout."""
    if not entries:
        return request, None
    from servefit.calibration.apply import calibrate_with
    from servefit.errors import ServefitError

    try:
        out, _ = calibrate_with(request, entries)
    except ServefitError:  # the layout's own plan reports what is wrong with it
        return request, None
    c = out.calibration
    return out, (f"{c.source}, {c.recorded[:10]}" if c is not None else None)


def _search_layout(
    req: FitRequest,
    space: FitSpace,
    layout_req: PlanRequest,
    p0: Plan,
    tp: int,
    pp: int,
    evals: list[Eval],
    budget: int,
) -> None:
    has_state = p0.pools.mamba_layers > 0
    outers = space.outers(req.allow_lossy, req.allow_no_radix, p0)
    running_grid: tuple[int, ...] = space.running_grid if space.running_needed(p0) else ()
    f_grid = space.fraction_grid
    # thin both grids evenly when the full grid would pass this layout's share of MAX_EVALS
    k = 1
    while (
        len(outers)
        * (len(running_grid[::k]) + 1)
        * (2 if has_state else 1)
        * len(f_grid[::k])
        * 0.6
        > budget
    ):
        k += 1
    running_grid, f_grid = _thin(running_grid, k), _thin(f_grid, k)
    r_grid: list[int | None] = [None, *running_grid]
    if req.concurrency and req.concurrency not in r_grid:
        r_grid.append(req.concurrency)
    for outer_key, outer in outers:
        for running in r_grid:
            for state_key, state in space.state_variants(p0, running):
                _fraction_sweep(
                    req,
                    space,
                    layout_req,
                    tp,
                    pp,
                    outer_key,
                    outer,
                    running,
                    state_key,
                    state,
                    f_grid,
                    evals,
                )


T = TypeVar("T")


def _thin(grid: tuple[T, ...], k: int) -> tuple[T, ...]:
    """Every k-th value, keeping the last (the largest fraction / request count)."""
    if k <= 1 or not grid:
        return grid
    out = grid[::k]
    return out if out[-1] == grid[-1] else (*out, grid[-1])


def _fraction_sweep(
    req: FitRequest,
    space: FitSpace,
    layout_req: PlanRequest,
    tp: int,
    pp: int,
    outer_key: str,
    outer: dict[str, Any],
    running: int | None,
    state_key: str,
    state: dict[str, Any],
    f_grid: tuple[float, ...],
    evals: list[Eval],
) -> None:
    cat = space.catalogue
    quiet = evolve(layout_req, text=False)  # outcomes only: no log lines, no consumers
    args = {**layout_req.args, **outer, **state}
    if running is not None:
        args[cat.running_dest] = running
    for f in (None, *f_grid):
        a = dict(args) if f is None else {**args, cat.fraction_dest: f}
        p, _ = try_plan(evolve(quiet, args=a))
        if p is None:
            return
        o = outcome(p, req.context)
        ok = starts(o, req.headroom_gib)
        evals.append(Eval(tp, pp, outer_key, running, state_key, f, a, o, ok))
        if f is not None and o.verdict == "ok" and o.free_gib < req.headroom_gib:
            return  # a larger fraction only leaves less headroom


def _why_none(p0: Plan, mine: list[Eval]) -> str:
    fails = [e for e in mine if e.outcome.verdict != "ok"]
    if fails and len(fails) == len(mine):
        o = fails[-1].outcome
        return f"no candidate starts: {o.error_consumer or (o.error or '').split(' (', 1)[0]}"
    return "no candidate leaves the required headroom"


def _nothing_note(req: FitRequest, notes: list[LayoutNote]) -> str:
    why = "; ".join(f"TP {n.tp_size} x PP {n.pp_size}: {n.rejected}" for n in notes if n.rejected)
    return (
        f"nothing starts on {req.nodes} x {req.num_gpus} GPUs at context {req.context:,} with "
        f"{req.min_free_gib:g} GiB headroom ({why}). Try more GPUs, a shorter --context-length, "
        "--allow-lossy, or a quantized checkpoint."
    )
