"""The minimal fix: the smallest change to a failing launch that starts.

Single-flag changes are tried first (every fix value of every lever), then pairs of the levers
that moved anything (coarse grids, then each value of the best pair refined). A candidate must
start with at least `min_free_gib` left after the pools. Candidates are ranked by
(number of flags changed, loss of effective concurrency at the requested context, loss of
context, then more KV tokens and more headroom).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from itertools import combinations
from typing import Any

from servefit._explain.lever_types import Context, Lever, Option, levers_for
from servefit._explain.outcome import outcome, signature, starts
from servefit._explain.replan import changed_dests, replan
from servefit._explain.schema import Fix, FixCandidate, FixChange, Outcome

PAIR_GRID = 10  # values per lever in the pair search


def minimal_fix(
    ctx: Context,
    before: Outcome,
    *,
    min_free_gib: float = 2.0,
    allow_lossy: bool = False,
) -> Fix:
    levers = [
        lv for lv in levers_for(ctx) if lv.fix_values is not None and (allow_lossy or not lv.lossy)
    ]
    target = before.target_context
    tried = 0
    found: list[FixCandidate] = []
    moved: list[tuple[Lever, list[Option]]] = []
    for lv in levers:
        opts = lv.fix_values(ctx)
        any_moved = False
        for opt in opts:
            tried += 1
            cand, o = _evaluate(ctx, opt.args, opt.num_gpus, target, min_free_gib)
            if o is not None and signature(o) != signature(before):
                any_moved = True
            if cand:
                found.append(cand)
        if any_moved and lv.name != "parallelism":
            moved.append((lv, opts))
    singles = sorted(found, key=_key)
    pairs: list[FixCandidate] = []
    for (_, a_opts), (_, b_opts) in combinations(moved, 2):
        for a in _subsample(a_opts):
            for b in _subsample(b_opts):
                tried += 1
                cand, _ = _evaluate(ctx, {**a.args, **b.args}, None, target, min_free_gib)
                if cand:
                    pairs.append(cand)
    best_pair = min(pairs, key=_key) if pairs else None
    for _ in range(4):  # coordinate refinement of the best pair, one flag at a time
        if best_pair is None:
            break
        refined, n = _refine(ctx, best_pair, moved, target, min_free_gib)
        tried += n
        pairs += refined
        new_best = min(pairs, key=_key)
        if _key(new_best) >= _key(best_pair):
            break
        best_pair = new_best
    pairs = sorted((p for p in pairs if len(p.changes) == 2), key=_key)
    ranked = singles + pairs
    best = ranked[0] if ranked else None
    alternatives = _alternatives(singles, pairs, best)
    note = None
    if best is None:
        note = (
            f"no single flag or pair of flags starts with {min_free_gib:g} GiB of headroom; "
            "more GPUs, a quantized checkpoint or a shorter context are needed"
        )
    return Fix(
        found=best is not None,
        best=best,
        alternatives=alternatives,
        before=before,
        tried=tried,
        min_free_gib=min_free_gib,
        note=note,
    )


def _evaluate(
    ctx: Context, args: dict[str, Any], num_gpus: int | None, target: int, min_free: float
) -> tuple[FixCandidate | None, Outcome | None]:
    p, _ = replan(ctx.request, Option("", args, num_gpus))
    if p is None:
        return None, None
    o = outcome(p, target)
    if not starts(o, min_free):
        return None, o
    dests = changed_dests(ctx.args, args)
    if not dests:
        return None, o
    cat = ctx.catalogue
    changes = [
        FixChange(flag=cat.flag(ctx.profile, d), dest=d, old=ctx.args.get(d), new=args[d])
        for d in dests
    ]
    full = dict(ctx.plan.user_args)
    for k, v in args.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    intended = ctx.running
    return (
        FixCandidate(
            changes=changes,
            args=full,
            outcome=o,
            concurrency_loss=round(max(0.0, intended - o.effective_concurrency), 2),
            context_loss=max(0, ctx.plan.pools.context_len - o.context_len),
            command_flags=command_flags(changes, lambda d, v: cat.tokens(ctx.profile, d, v)),
        ),
        o,
    )


def command_flags(changes: list[FixChange], tokens: Callable[[str, Any], list[str]]) -> str:
    """The changes as CLI text; `tokens(dest, value)` is the engine's spelling of one setting
    ([] when the engine default is meant, shown as "(drop FLAG)")."""
    parts = []
    for c in changes:
        toks = tokens(c.dest, c.new)
        parts.append(" ".join(shlex.quote(t) for t in toks) if toks else f"(drop {c.flag})")
    return " ".join(parts)


def _key(c: FixCandidate) -> tuple:
    o = c.outcome
    return (
        len(c.changes),
        c.concurrency_loss,
        c.context_loss,
        -o.kv_tokens,
        -o.max_running_requests,  # the same KV: a higher cap lets more short requests run
        -o.free_gib,
    )


def _subsample(opts: list[Option], n: int = PAIR_GRID) -> list[Option]:
    if len(opts) <= n:
        return opts
    step = (len(opts) - 1) / (n - 1)
    return [opts[round(i * step)] for i in range(n)]


def _refine(
    ctx: Context,
    pair: FixCandidate,
    moved: list[tuple[Lever, list[Option]]],
    target: int,
    min_free: float,
) -> tuple[list[FixCandidate], int]:
    """Sweep each flag of the best pair over its full grid with the other one fixed."""
    out, n = [], 0
    fixed = {c.dest: c.new for c in pair.changes}
    for _, opts in moved:
        dests = {d for o in opts for d in o.args}
        if not dests & fixed.keys():
            continue
        others = {k: v for k, v in fixed.items() if k not in dests}
        for opt in opts:
            n += 1
            cand, _ = _evaluate(ctx, {**others, **opt.args}, None, target, min_free)
            if cand:
                out.append(cand)
    return out, n


def _alternatives(
    singles: list[FixCandidate], pairs: list[FixCandidate], best: FixCandidate | None
) -> list[FixCandidate]:
    """The best single change per flag, then the best pair."""
    out, seen = [], set()
    for c in singles:
        key = tuple(sorted(ch.dest for ch in c.changes))
        if key in seen:
            continue
        seen.add(key)
        if c is not best:
            out.append(c)
    if pairs and pairs[0] is not best:
        out.append(pairs[0])
    return out[:6]
