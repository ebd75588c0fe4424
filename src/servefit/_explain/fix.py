"""What makes a failing launch start: the change closest to what the user asked, and the change
with the best outcome.

Every fix value of every lever is re-planned alone (then, for explain, pairs of the levers that
moved anything). A candidate counts only if it clears the floors: it starts with at least
`min_free_gib` left after the pools, holds at least one request of the full context at once,
and keeps at least the user's --concurrency running requests. A fix that "starts" by running one
short request at a time is no fix.

* minimal: the change closest to what the user asked: a flag the user set before any other,
  then the smallest relative change. Between the nearest value that starts on the lever's grid
  and the value asked, integer settings (running requests, state slots, context) are bisected
  to the exact nearest value that starts (vLLM --max-num-seqs 1024 -> 272, the Mamba block
  count its error names).
* best: the most full-context requests at once (whole requests: 10.3 and 10.7 tie), then more
  running requests, then more KV tokens, then more headroom.
When neither exists on these GPUs, or the weights alone do not fit, `gpus` is the smallest
number of GPUs of this kind (every TP x PP layout of each count, in order) that starts.
A release that does not serve the model at all (its architecture list, its config loader) is
fixed by no flag and no GPU count: the note names the registered releases that serve it.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from itertools import combinations
from typing import Any

from servefit._explain.lever_types import Context, Lever, Option, levers_for
from servefit._explain.outcome import outcome, signature, starts
from servefit._explain.replan import changed_dests, replan
from servefit._explain.schema import Fix, FixCandidate, FixChange, GpusNeeded, Outcome
from servefit.engines import registry
from servefit.engines.remedy import remedy_for
from servefit.errors import EngineRejection
from servefit.evolve import evolve
from servefit.frozen import frozen

PAIR_GRID = 10  # values per lever in the pair search
MAX_GPUS = 64  # the GPU-count search stops here
# layouts whose own one-flag fix the GPU-count search tries (the first ones whose weights fit):
# each is a search of every lever, so a failure no flag fixes must not pay it 64 counts long
MAX_LAYOUT_FIXES = 4


@frozen
class Floors:
    """What a fix must keep: headroom after the pools, one full-context request at once, and
    the user's --concurrency running requests."""

    min_free_gib: float = 2.0
    min_running: int | None = None

    def met(self, o: Outcome) -> bool:
        """Measured at the launch's own context: a shorter --context-length serves shorter
        requests, and one of those must fit."""
        return (
            starts(o, self.min_free_gib)
            and min(o.max_running_requests, own_context_requests(o)) >= 1
            and (self.min_running is None or o.max_running_requests >= self.min_running)
        )

    def words(self) -> str:
        run = f", at least {self.min_running} running requests" if self.min_running else ""
        return (
            f"at least {self.min_free_gib:g} GiB headroom, at least one full-context request "
            f"at once{run}"
        )


def own_context_requests(o: Outcome) -> float:
    """Requests of the launch's own context length the KV pool holds at once."""
    if o.context_len == o.target_context:
        return o.full_context_requests
    return o.kv_tokens / o.context_len if o.context_len else 0.0


def ranking_line(floors: Floors) -> str:
    return (
        "minimal = the change closest to what you asked (a flag you set first, then the "
        "smallest relative change); best = the most full-context requests at once (whole "
        "requests), then more running requests, then more KV tokens; both change one flag "
        "(explain's lever table ranks its values the same way) and start with " + floors.words()
    )


def minimal_fix(
    ctx: Context,
    before: Outcome,
    *,
    min_free_gib: float = 2.0,
    allow_lossy: bool = False,
    min_running: int | None = None,
    pairs: bool = True,
    gpus: bool = True,
) -> Fix:
    floors = Floors(min_free_gib, min_running)
    elsewhere = served_elsewhere(ctx)
    if elsewhere is not None:
        return Fix(
            found=False, before=before, tried=0, min_free_gib=min_free_gib,
            min_running=min_running, ranking=ranking_line(floors), note=elsewhere,
        )  # fmt: skip
    levers = [
        (lv, lv.fix_values)
        for lv in levers_for(ctx)
        if lv.fix_values is not None and (allow_lossy or not lv.lossy)
    ]
    target = before.target_context
    # what the engine's message names comes first: often the whole fix
    singles, tried = _remedied(ctx, before, target, floors)
    moved: list[tuple[Lever, list[Option]]] = []
    for lv, fix_values in levers:
        opts = fix_values(ctx)
        any_moved = False
        for opt in opts:
            tried += 1
            cand, o = _evaluate(ctx, opt.args, opt.num_gpus, target, floors)
            if o is not None and signature(o) != signature(before):
                any_moved = True
            if cand:
                singles.append(cand)
        if any_moved and lv.name != "parallelism":
            moved.append((lv, opts))
    refined, n = _nearest(ctx, singles, target, floors)
    tried += n
    singles += refined
    both: list[FixCandidate] = []
    if pairs:
        both, n = _pairs(ctx, moved, target, floors)
        tried += n
    minimal = min(singles, key=_minimal_key) if singles else None
    best = min(singles, key=_best_key) if singles else None
    needed = None
    if gpus and (best is None or weights_exceed(ctx)):
        needed = gpus_needed(ctx, floors)
        tried += needed.tried
    return Fix(
        found=best is not None,
        minimal=minimal,
        best=best,
        alternatives=_alternatives(singles, both, (minimal, best)),
        before=before,
        tried=tried,
        min_free_gib=min_free_gib,
        min_running=min_running,
        ranking=ranking_line(floors),
        gpus=needed,
        note=None
        if best is not None
        else f"no single flag starts with {floors.words()} on these GPUs",
    )


def served_elsewhere(ctx: Context) -> str | None:
    """When the plan's release refuses the model itself (Profile.check_model at the engine's
    default parallelism: an architecture it does not register, a config it cannot load), the
    registered releases that serve it, newest first as the one to name; else None."""
    prof = ctx.engine_profile
    ref = ctx.plan.engine
    prof = prof.at_release(ref.version)
    try:
        prof.check_model(ctx.model, prof.parallel_sizes({}))
    except EngineRejection:
        pass
    else:
        return None
    served = registry.serving_releases(ctx.model)
    own = served.pop(ref.name, [])
    what = f"{ref.name} {ref.version} does not serve {ctx.model.architecture}"
    if own:
        return f"{what}; {registry.release_runs(ref.name, own)} do: --engine {ref.name}=={own[-1]}"
    others = [registry.release_runs(e, rs) for e, rs in served.items() if rs]
    if others:
        return f"{what}, no registered {ref.name} release does; {'; '.join(others)} do"
    return f"{what}, and no registered release of any engine does"


# ------------------------------------------------------------- what the engine's message names

MAX_REMEDIES = 4  # failures in a row the search follows (context, then sequences, ...)


def _remedied(
    ctx: Context, before: Outcome, target: int, floors: Floors
) -> tuple[list[FixCandidate], int]:
    """Follow the engine's own messages (engines/remedy.py): apply the change the failure
    names, re-plan, and again while the next failure names one. Nemotron-H-56B-Base-8K with
    --max-model-len 9692 on vLLM: "the derived max_model_len (max_position_embeddings=8192"
    gives --max-model-len 8192, whose "lower max_num_seqs to at most 175" gives the rest. When
    the messages run out short of a start, one more flag on top (the single-flag search of the
    remedied launch)."""
    args: dict[str, Any] = {}
    error = before.error
    for tried in range(1, MAX_REMEDIES + 1):
        hit = remedy_for(ctx.catalogue.remedies, error)
        if hit is None or all(k in args and args[k] == v for k, v in hit[1].items()):
            if not args:
                return [], tried - 1
            more, n = _then_one_flag(ctx, args, target, floors)
            return more, tried - 1 + n
        args = {**args, **hit[1]}
        cand, o = _evaluate(ctx, args, None, target, floors)
        if cand is not None:
            return [cand], tried
        if o is None:
            return [], tried
        error = o.error
    return [], MAX_REMEDIES


def _then_one_flag(
    ctx: Context, args: dict[str, Any], target: int, floors: Floors
) -> tuple[list[FixCandidate], int]:
    """The remedied launch's best single-flag fix, as a change of the user's launch."""
    p, _ = replan(ctx.request, Option("", args))
    if p is None:
        return [], 0
    fix = _one_flag_on(ctx, p, args, None, target, floors)
    if fix.best is None:
        return [], fix.tried
    user = ctx.plan.user_args
    changed = {k: v for k, v in fix.best.args.items() if user.get(k) != v}
    changed.update({k: None for k in user if k not in fix.best.args})
    cand, _ = _evaluate(ctx, changed, None, target, floors)
    return ([cand] if cand is not None else []), fix.tried + 1


# ------------------------------------------------------------------------------- candidates


def _evaluate(
    ctx: Context, args: dict[str, Any], num_gpus: int | None, target: int, floors: Floors
) -> tuple[FixCandidate | None, Outcome | None]:
    # an outcome is all a candidate keeps: the plan without its text (PlanRequest.text)
    p, _ = replan(evolve(ctx.request, text=False), Option("", args, num_gpus))
    if p is None:
        return None, None
    o = outcome(p, target)
    if not floors.met(o):
        return None, o
    dests = changed_dests(ctx.args, args)
    if not dests:
        return None, o
    cat = ctx.catalogue
    changes = [
        FixChange(flag=cat.flag(ctx.profile, d), dest=d, old=asked(ctx, d), new=args[d])
        for d in dests
    ]
    full = dict(ctx.plan.user_args)
    for k, v in args.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return (
        FixCandidate(
            changes=changes,
            args=full,
            outcome=o,
            distance=round(max(_distance(c.old, c.new) for c in changes), 4),
            user_flag=all(c.dest in ctx.plan.user_args for c in changes),
            context_loss=max(0, ctx.plan.pools.context_len - o.context_len),
            command_flags=command_flags(changes, lambda d, v: cat.tokens(ctx.profile, d, v)),
        ),
        o,
    )


def asked(ctx: Context, dest: str) -> Any:
    """What the launch asks of `dest`: the resolved value; for the running-request cap and the
    context, what the engine settled on when the user left them unset."""
    v = ctx.args.get(dest)
    if v is None and dest == ctx.catalogue.running_dest:
        return ctx.running
    if v is None and dest == ctx.catalogue.context_dest:
        return ctx.plan.pools.context_len
    return v


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _distance(old: Any, new: Any) -> float:
    if _numeric(old) and _numeric(new) and old:
        return abs(new - old) / abs(old)
    return 1.0


def command_flags(changes: list[FixChange], tokens: Callable[[str, Any], list[str]]) -> str:
    """The changes as CLI text; `tokens(dest, value)` is the engine's spelling of one setting
    ([] when the engine default is meant, shown as "(drop FLAG)")."""
    parts = []
    for c in changes:
        toks = tokens(c.dest, c.new)
        parts.append(" ".join(shlex.quote(t) for t in toks) if toks else f"(drop {c.flag})")
    return " ".join(parts)


def best_outcome_key(o: Outcome) -> tuple[float, ...]:
    """The best outcome: the most full-context requests at once (whole requests), then more
    running requests, more KV tokens, more headroom. explain's lever table ranks by it too."""
    return (
        -math.floor(o.effective_concurrency),
        -o.max_running_requests,
        -o.kv_tokens,
        -o.free_gib,
    )


def _best_key(c: FixCandidate) -> tuple[float, ...]:
    floor_conc, running, kv, free = best_outcome_key(c.outcome)
    return (floor_conc, running, c.context_loss, kv, free, len(c.changes))


def _minimal_key(c: FixCandidate) -> tuple[bool, int, float, tuple[float, ...]]:
    return (not c.user_flag, len(c.changes), c.distance, _best_key(c))


# ------------------------------------------------------------ the nearest value that starts


def _nearest(
    ctx: Context, singles: list[FixCandidate], target: int, floors: Floors
) -> tuple[list[FixCandidate], int]:
    """Per integer setting, bisect between the value asked (which fails the floors) and the
    nearest grid value that meets them: the exact nearest value that starts."""
    cat = ctx.catalogue
    out, tried = [], 0
    for dest in (cat.running_dest, "max_mamba_cache_size", cat.context_dest):
        want = asked(ctx, dest)
        if not _numeric(want) or isinstance(want, float):
            continue
        grid = [
            c
            for c in singles
            if len(c.changes) == 1 and c.changes[0].dest == dest and _numeric(c.changes[0].new)
        ]
        if not grid:
            continue
        near = min(grid, key=lambda c: abs(c.changes[0].new - want))
        step = 1024 if dest == cat.context_dest else 1
        good, bad = int(near.changes[0].new), int(want)
        while abs(good - bad) > step:
            mid = (good + bad) // 2
            if step > 1:
                mid = mid // step * step
                if mid in (good, bad):
                    break
            tried += 1
            cand, _ = _evaluate(ctx, {dest: mid}, None, target, floors)
            if cand is not None:
                good = mid
                out.append(cand)
            else:
                bad = mid
    return out, tried


# ------------------------------------------------------------------------------------ pairs


def _pairs(
    ctx: Context, moved: list[tuple[Lever, list[Option]]], target: int, floors: Floors
) -> tuple[list[FixCandidate], int]:
    """Pairs of the levers that moved anything (coarse grids), the best one refined one flag
    at a time."""
    tried = 0
    pairs: list[FixCandidate] = []
    for (_, a_opts), (_, b_opts) in combinations(moved, 2):
        for a in _subsample(a_opts):
            for b in _subsample(b_opts):
                tried += 1
                cand, _ = _evaluate(ctx, {**a.args, **b.args}, None, target, floors)
                if cand:
                    pairs.append(cand)
    best_pair = min(pairs, key=_best_key) if pairs else None
    for _ in range(4):
        if best_pair is None:
            break
        refined, n = _refine(ctx, best_pair, moved, target, floors)
        tried += n
        pairs += refined
        new_best = min(pairs, key=_best_key)
        if _best_key(new_best) >= _best_key(best_pair):
            break
        best_pair = new_best
    return sorted((p for p in pairs if len(p.changes) == 2), key=_best_key), tried


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
    floors: Floors,
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
            cand, _ = _evaluate(ctx, {**others, **opt.args}, None, target, floors)
            if cand:
                out.append(cand)
    return out, n


def _alternatives(
    singles: list[FixCandidate],
    pairs: list[FixCandidate],
    shown: tuple[FixCandidate | None, ...],
) -> list[FixCandidate]:
    """The best single change of each other flag, then the best pair when it beats them."""
    out, seen = [], {tuple(sorted(ch.dest for ch in c.changes)) for c in shown if c}
    for c in sorted(singles, key=_best_key):
        key = tuple(sorted(ch.dest for ch in c.changes))
        if key in seen:
            continue
        seen.add(key)
        out.append(c)
    best_single = min(singles, key=_best_key) if singles else None
    if pairs and (best_single is None or _best_key(pairs[0]) < _best_key(best_single)):
        out.insert(0, pairs[0])
    return out[:5]


# ------------------------------------------------------------------------ more GPUs of this kind


def weights_exceed(ctx: Context) -> bool:
    """The weights alone (target and draft, on the most loaded rank) exceed the memory free
    before they load: the engine dies loading them, whatever its memory flags say."""
    r = ctx.plan.per_rank
    return r.weights_gib + r.draft_weights_gib >= r.pre_load_free_gib > 0


def gpus_needed(ctx: Context, floors: Floors, max_gpus: int = MAX_GPUS) -> GpusNeeded:
    """Count by count from the GPUs the launch uses (its other layouts first), every TP x PP
    layout of the count (the engine refuses those its model does not split: engines/*/layout.py):
    the first count at which the weights alone fit, and the first at which a layout meets the
    floors, as the launch asks or with one flag changed (the layout's own single-flag fix: the
    seed on RTX 4090s starts at TP 4 with --max-running-requests 10, not only at TP 6 as is)."""
    cat = ctx.catalogue
    target = ctx.plan.pools.context_len
    # None while the weights do not fit: the launch's own GPUs hold them otherwise
    weights_at: int | None = None if weights_exceed(ctx) else ctx.world
    tried = 0
    fixes_left = MAX_LAYOUT_FIXES
    now = (ctx.plan.hardware.tp_size, ctx.plan.hardware.pp_size)
    for n in range(ctx.world, max_gpus + 1):
        found: list[tuple[int, int, Outcome, dict[str, Any], str | None]] = []
        for tp in sorted((d for d in range(1, n + 1) if n % d == 0), reverse=True):
            pp = n // tp
            if (tp, pp) == now:
                continue
            tried += 1
            layout = {cat.tp_dest: tp, cat.pp_dest: pp}
            p, _ = replan(ctx.request, Option("", layout, n))
            if p is None:
                continue
            r = p.per_rank
            fits = r.weights_gib + r.draft_weights_gib < r.pre_load_free_gib
            if weights_at is None and fits:
                weights_at = n
            o = outcome(p, target)
            args = {**ctx.plan.user_args, **layout}
            if floors.met(o):
                found.append((tp, pp, o, args, None))
            elif fits and fixes_left > 0:
                fixes_left -= 1
                sub = _one_flag_on(ctx, p, args, n, target, floors)
                tried += sub.tried
                fixed = sub.best
                if fixed is not None:
                    found.append((tp, pp, fixed.outcome, fixed.args, fixed.command_flags))
        if found:
            tp, pp, o, args, flags = min(
                found,
                key=lambda f: (
                    f[4] is not None,  # a layout that starts as asked comes first
                    -math.floor(f[2].effective_concurrency),
                    -f[2].max_running_requests,
                ),
            )
            if pp == 1:
                args.pop(cat.pp_dest, None)
            return GpusNeeded(
                weights_gpus=weights_at,
                tp_size=tp,
                pp_size=pp,
                num_gpus=n,
                outcome=o,
                args=args,
                flags=flags,
                max_gpus=max_gpus,
                tried=tried,
            )
    return GpusNeeded(weights_gpus=weights_at, max_gpus=max_gpus, tried=tried)


def _one_flag_on(
    ctx: Context, p: Any, args: dict[str, Any], num_gpus: int | None, target: int, floors: Floors
) -> Fix:
    """The single-flag fix (no pairs, no GPU search) of the launch `args` make of the user's,
    whose plan is `p`: a layout of the GPU-count search, or a launch the engine's messages have
    remedied so far."""
    from servefit._explain.catalogue import context_for
    from servefit._explain.replan import apply

    sub = context_for(apply(ctx.request, args, num_gpus), p, ctx.model)
    return minimal_fix(
        sub, outcome(p, target), min_free_gib=floors.min_free_gib,
        min_running=floors.min_running, pairs=False, gpus=False,
    )  # fmt: skip
