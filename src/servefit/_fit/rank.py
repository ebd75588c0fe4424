"""Rank fit candidates, build the shown ones (flags, stranded memory, commands), the baseline,
and the sweeps the HTML page draws.

Ranking, best first: meets --concurrency; the layout suits the nodes (TP inside a node, then
pipeline stages only across nodes: the engines all-reduce every layer over TP, so TP belongs on
a node's own interconnect, and a PP stage hands activations on once per step); effective
concurrency at the target context (min(running requests, KV tokens / context), capped at
--concurrency, in whole requests); more headroom (0.5 GiB steps); fewer changed flags; more KV
tokens. Only the best of each family (layout x set of changed flags) is kept, so the top few
differ in kind, not in a decimal. A candidate never sits at the edge: of the fractions that
start with the same other flags, the highest FRACTION_MARGIN is left out (a cold plan is a few
per cent off on real GPUs; the last 0.01 is where that error turns a start into an OOM).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from servefit._explain.outcome import outcome, signature
from servefit._explain.replan import try_plan
from servefit._explain.schema import Outcome
from servefit._fit.command import launch_commands
from servefit._fit.request import Eval, FitRequest
from servefit._fit.schema import FitCandidate, Sweep
from servefit._fit.space import FitSpace
from servefit._plan.planner import PlanRequest
from servefit.errors import ArgumentError
from servefit.evolve import evolve


def effective(req: FitRequest, o: Outcome) -> float:
    eff = o.effective_concurrency
    if req.concurrency:
        eff = min(eff, float(req.concurrency))
    return float(math.floor(eff)) if eff >= 1 else eff


def changed(space: FitSpace, args: dict[str, Any]) -> list[str]:
    """Tuning flags: memory-relevant args beyond model, TP, context and speculation."""
    return sorted(
        k
        for k, v in args.items()
        if k in space.memory_dests and k not in space.base_dests and v is not None
    )


FRACTION_MARGIN = 0.01


def layout_suits_nodes(req: FitRequest, tp: int, pp: int) -> tuple[bool, int]:
    """(TP inside one node, minus the pipeline stages beyond one per node): higher is better."""
    return tp <= req.per_node, -max(0, pp - req.nodes)


def key(req: FitRequest, space: FitSpace, e: Eval) -> tuple[Any, ...]:
    o = e.outcome
    meets = req.concurrency is None or o.max_running_requests >= req.concurrency
    return (
        meets,
        *layout_suits_nodes(req, e.tp, e.pp),
        effective(req, o),
        math.floor(o.free_gib / 0.5),
        -len(changed(space, e.args)),
        o.kv_tokens,
        o.free_gib,
    )


RANKING = (
    "ranked: meets --concurrency; TP inside a node, then no more pipeline stages than nodes; "
    "the most full-context requests at once (whole requests); more headroom; fewer flags; more "
    "KV tokens. The memory fraction stays {margin:g} below the highest that starts"
)


def off_the_edge(ok: list[Eval], margin: float = FRACTION_MARGIN) -> list[Eval]:
    """The candidates less the ones within `margin` of the highest fraction that starts with
    the same other flags (kept when nothing lower starts)."""
    ceiling: dict[tuple[Any, ...], float] = {}
    for e in ok:
        if e.fraction is not None:
            g = (e.tp, e.pp, e.outer, e.running, e.state)
            ceiling[g] = max(ceiling.get(g, 0.0), e.fraction)
    keep = [
        e
        for e in ok
        if e.fraction is None
        or e.fraction <= ceiling[(e.tp, e.pp, e.outer, e.running, e.state)] - margin + 1e-9
    ]
    kept = {(e.tp, e.pp, e.outer, e.running, e.state) for e in keep}
    # a group whose only starting fraction is its ceiling keeps it
    return keep + [e for e in ok if (e.tp, e.pp, e.outer, e.running, e.state) not in kept]


def rank(req: FitRequest, space: FitSpace, ok: list[Eval]) -> list[Eval]:
    out, families = [], set()
    for e in sorted(off_the_edge(ok), key=lambda x: key(req, space, x), reverse=True):
        fam = (e.tp, e.pp, tuple(changed(space, e.args)))
        if fam in families:
            continue
        families.add(fam)
        out.append(e)
    return out


def _flag_text(space: FitSpace, profile: str, dest: str, v: Any) -> str:
    tokens = space.catalogue.tokens(profile, dest, v)
    return " ".join(tokens) if tokens else f"(no {space.catalogue.flag(profile, dest)})"


def ineffective(
    req: FitRequest, space: FitSpace, proto: PlanRequest, e: Eval, profile: str
) -> list[str]:
    """The candidate's tuning flags whose removal changes no pool, verdict or concurrency."""
    out = []
    base_sig = signature(e.outcome)
    for d in changed(space, e.args):
        if d == space.catalogue.pp_dest:
            continue
        args = {k: v for k, v in e.args.items() if k != d}
        p, _ = try_plan(evolve(proto, args=args, num_gpus=e.tp * e.pp))
        if p is not None and signature(outcome(p, req.context)) == base_sig:
            out.append(_flag_text(space, profile, d, e.args[d]))
    return out


def candidate(
    req: FitRequest,
    space: FitSpace,
    proto: PlanRequest,
    e: Eval,
    rank_no: int,
    profile: str,
    model_path: str,
    commands: bool = True,
) -> FitCandidate:
    o = e.outcome
    slots = o.state_slots_per_request or 1
    stranded_state = max(0, o.state_slots - o.max_running_requests * slots) if o.state_slots else 0
    # what the baseline carries is planned in e.args already; host and port are left
    extra = {
        k: v
        for k, v in (req.baseline or {}).items()
        if k not in space.not_carried and k not in e.args
    }
    pp_dest = space.catalogue.pp_dest
    return FitCandidate(
        rank=rank_no,
        tp_size=e.tp,
        pp_size=e.pp,
        nodes=req.nodes,
        gpus_per_node=req.per_node,
        args=e.args,
        changed_flags=[
            _flag_text(space, profile, d, e.args[d]) for d in changed(space, e.args) if d != pp_dest
        ],
        ineffective_flags=ineffective(req, space, proto, e, profile),
        outcome=o,
        meets_concurrency=(o.max_running_requests >= req.concurrency) if req.concurrency else None,
        stranded_state_slots=stranded_state,
        stranded_kv_tokens=max(0, o.kv_tokens - o.max_running_requests * req.context),
        commands=launch_commands(
            space.catalogue.engine,
            profile,
            model_path,
            e.args,
            nodes=req.nodes,
            dist_init_addr=req.dist_init_addr,
            env=req.env,
            extra=extra,
        )
        if commands
        else [],
    )


def baseline(
    req: FitRequest, space: FitSpace, proto: PlanRequest, profile: str, model_path: str
) -> FitCandidate:
    args = dict(req.baseline or {})
    tp, pp = space.parallel_of(args)
    p, err = try_plan(evolve(proto, args=args, num_gpus=tp * pp))
    if p is None:
        raise ArgumentError(f"the baseline launch cannot be planned: {err}")
    ok = p.verdict == "ok"
    e = Eval(tp, pp, "", None, "", None, args, outcome(p, req.context), ok)
    return candidate(req, space, proto, e, 0, profile, model_path, commands=False)


def sweeps(
    best: Eval, evals: list[Eval], space: FitSpace, profile: str, concurrency: int | None = None
) -> list[Sweep]:
    """Effective concurrency of the best's family as the memory fraction, then the
    running-request cap, moves (the other flags of the best kept); each point says whether it
    starts with the headroom and meets the --concurrency floor, the two things the ranking
    demands before it compares concurrency."""
    cat = space.catalogue
    same = [e for e in evals if (e.tp, e.pp, e.outer) == (best.tp, best.pp, best.outer)]
    by_f = sorted(
        (e for e in same if (e.running, e.state) == (best.running, best.state) and e.fraction),
        key=lambda e: e.fraction or 0.0,  # all set: filtered above
    )
    by_r = sorted(
        (
            e
            for e in same
            if e.fraction == best.fraction and e.state == best.state and e.running is not None
        ),
        key=lambda e: e.running or 0,  # all set: filtered above
    )
    out = []
    axes: list[tuple[str, list[Eval], Callable[[Eval], float | None]]] = [
        (cat.fraction_dest, by_f, lambda e: e.fraction),
        (cat.running_dest, by_r, lambda e: e.running),
    ]
    for lever, rows, x in axes:
        if len(rows) > 1:
            out.append(
                Sweep(
                    lever=lever,
                    flag=cat.flag(profile, lever),
                    x=[x(e) for e in rows],
                    effective_concurrency=[e.outcome.effective_concurrency for e in rows],
                    kv_tokens=[e.outcome.kv_tokens for e in rows],
                    starts=[e.ok for e in rows],
                    running=[e.outcome.max_running_requests for e in rows],
                    meets_concurrency=[
                        concurrency is None or e.outcome.max_running_requests >= concurrency
                        for e in rows
                    ],
                )
            )
    return out
