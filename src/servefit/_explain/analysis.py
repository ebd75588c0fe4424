"""explain(): rank the consumers, re-plan every lever value, say which flags matter and why."""

from __future__ import annotations

import time
from typing import Any

from servefit._explain.catalogue import catalogue_for, context_for
from servefit._explain.fix import Floors, best_outcome_key, minimal_fix
from servefit._explain.lever_types import Context, Lever, Option, fmt_value, levers_for
from servefit._explain.outcome import delta, outcome, signature
from servefit._explain.replan import prepared, replan
from servefit._explain.schema import (
    Explanation,
    Fix,
    FlagEffect,
    LeverEffect,
    LeverValue,
    Outcome,
    RankedConsumer,
)
from servefit._plan.planner import PlanRequest, plan
from servefit._plan.schema import Plan
from servefit.units import GiB


def explain_request(
    request: PlanRequest,
    *,
    min_free_gib: float | None = None,
    with_fix: bool = True,
    allow_lossy: bool = False,
    min_running: int | None = None,
) -> Explanation:
    t0 = time.perf_counter()
    base_plan = plan(request)
    req, model = prepared(request)
    ctx = context_for(req, base_plan, model)
    target = base_plan.pools.context_len
    base = outcome(base_plan, target)
    if min_free_gib is None:
        min_free_gib = ctx.catalogue.min_free_gib
    floors = Floors(min_free_gib, min_running)
    levers = [
        effect
        for lv in levers_for(ctx)
        if (effect := _lever_effect(lv, ctx, base, target, floors)).values  # nothing to say
    ]
    flags = _user_flags(ctx, base, target)
    fix = None
    if with_fix and not floors.met(base):
        fix = minimal_fix(
            ctx, base, min_free_gib=min_free_gib, allow_lossy=allow_lossy, min_running=min_running
        )
        levers = [_with_fix(e, fix, base, floors) for e in levers]
    return Explanation(
        plan=base_plan,
        outcome=base,
        why=why(base_plan, base),
        consumers=ranked_consumers(base_plan),
        levers=levers,
        user_flags=flags,
        fix=fix,
        elapsed_s=round(time.perf_counter() - t0, 4),
    )


def fix_request(
    request: PlanRequest,
    base_plan: Plan,
    *,
    min_free_gib: float | None = None,
    min_running: int | None = None,
) -> Fix | None:
    """The fix `plan` prints under a launch that fails or misses the floors: single flags
    only (explain adds pairs), the same search and ranking as explain; None when it needs none."""
    req, model = prepared(request)
    ctx = context_for(req, base_plan, model)
    base = outcome(base_plan, base_plan.pools.context_len)
    floor = ctx.catalogue.min_free_gib if min_free_gib is None else min_free_gib
    if Floors(floor, min_running).met(base):
        return None
    return minimal_fix(ctx, base, min_free_gib=floor, min_running=min_running, pairs=False)


def ranked_consumers(p: Plan) -> list[RankedConsumer]:
    total = p.per_rank.total_gib
    rows = sorted(p.consumers, key=lambda c: -c.gib)
    return [
        RankedConsumer(
            rank=i + 1,
            name=c.name,
            gib=round(c.gib, 4),
            bytes=int(round(c.gib * GiB)),
            share_of_gpu=round(100 * c.gib / total, 2) if total else 0.0,
            formula=c.formula,
            flags=list(c.flags),
        )
        for i, c in enumerate(rows)
    ]


def why(p: Plan, o: Outcome) -> list[str]:
    """Plain sentences: what fails and by how much, or what bounds concurrency."""
    r, pools = p.per_rank, p.pools
    cat = catalogue_for(p.engine.name)
    out = []
    if o.verdict != "ok":
        out.append(f"Fails: {p.error}")
        if p.error_detail:
            out.append(f"Cause: {p.error_detail}.")
        elif p.error_consumer:
            out.append(f"Cause: the {p.error_consumer}.")
        return out + cat.budget_notes(p, True)
    out += cat.budget_notes(p, False)
    out.append(
        f"Starts: {o.kv_tokens:,} KV tokens = {o.full_context_requests:g} requests of "
        f"{o.target_context:,} tokens; {o.max_running_requests} running requests "
        f"(capped by {pools.cap_reason})."
    )
    if o.full_context_requests < o.max_running_requests:
        out.append(
            f"Effective concurrency at {o.target_context:,} tokens is {o.effective_concurrency:g}: "
            f"the KV pool, not the request cap, binds ({o.max_running_requests} x "
            f"{o.target_context:,} = {o.max_running_requests * o.target_context:,} tokens needed)."
        )
    else:
        out.append(
            f"Effective concurrency at {o.target_context:,} tokens is {o.effective_concurrency:g}: "
            f"the request cap binds ({pools.cap_reason})."
        )
    if r.free_gib < 0:
        out.append(
            f"But {-r.free_gib:.2f} GiB more than the GPU has is needed after the pools "
            "(draft weights/KV come out of the reserve): expect a CUDA out-of-memory."
        )
    elif o.free_gib >= 0:
        out.append(f"Headroom after the pools: {o.free_gib:.2f} GiB ({cat.headroom_means}).")
    return out


# --------------------------------------------------------------------------------------------
# Levers
# --------------------------------------------------------------------------------------------


def _lever_effect(
    lv: Lever, ctx: Context, base: Outcome, target: int, floors: Floors
) -> LeverEffect:
    dest = ctx.dest(lv) or lv.name
    values: list[LeverValue] = []
    rejected: list[str] = []
    plans: list[tuple[Option, Plan]] = []
    for opt in lv.values(ctx):
        p, err = replan(ctx.request, opt)
        if p is None:
            values.append(LeverValue(label=opt.label, args=opt.args, rejected=err))
            rejected.append(err or "")
            continue
        # the context lever is judged at its own context; every other lever at the current one
        o = outcome(p, p.pools.context_len if lv.context else target)
        plans.append((opt, p))
        values.append(
            LeverValue(
                label=opt.label,
                args=opt.args,
                outcome=o,
                same_as_current=signature(o) == signature(base),
                delta_gib=delta(o, base),
                note=_engine_note(opt, p),
            )
        )
    valid = [v for v in values if v.outcome is not None]
    if not valid and rejected:  # the engine accepts no other value: nothing to change
        no_effect = True
        reason = lv.unused_when(ctx) or f"every value tried is rejected: {rejected[0]}"
    else:
        no_effect = bool(valid) and all(v.same_as_current for v in valid)
        reason = (
            _why_no_effect(lv, ctx, base, plans, dest)
            if no_effect
            else _summary(base, valid, floors)
        )
    return LeverEffect(
        name=lv.name,
        title=lv.title,
        dest=dest,
        flag=_lever_flag(lv, ctx),
        current=_current(lv, ctx, dest),
        effect="no effect" if no_effect else "changes",
        reason=reason,
        values=values,
    )


def _lever_flag(lv: Lever, ctx: Context) -> str:
    cat = ctx.catalogue
    if lv.name == "parallelism":
        return f"{cat.flag(ctx.profile, cat.tp_dest)} / {cat.flag(ctx.profile, cat.pp_dest)}"
    return cat.flag(ctx.profile, ctx.dest(lv) or lv.name)


def _current(lv: Lever, ctx: Context, dest: str) -> Any:
    if lv.name == "parallelism":
        return f"TP {ctx.plan.hardware.tp_size} x PP {ctx.plan.hardware.pp_size}"
    if lv.context:
        return ctx.plan.pools.context_len
    if lv.name == "max_mamba_cache_size":
        return ctx.plan.pools.max_mamba_cache_size
    return ctx.args.get(dest)


def _engine_note(opt: Option, p: Plan) -> str | None:
    notes = [
        f"engine sets {c.arg}={c.new!r}: {c.reason}"
        for c in p.changes
        if c.arg in opt.args and opt.args[c.arg] is not None and c.old == opt.args[c.arg]
    ]
    return "; ".join(notes) or None


def _why_no_effect(
    lv: Lever, ctx: Context, base: Outcome, plans: list[tuple[Option, Plan]], dest: str
) -> str:
    cur = ctx.args.get(dest)
    overridden = [
        next((c for c in p.changes if c.arg == dest), None)
        for opt, p in plans
        if dest in opt.args and p.resolved_args.get(dest) == cur and opt.args[dest] != cur
    ]
    first = overridden[0] if overridden else None
    if first is not None and len(overridden) == len(plans) and all(overridden):
        return f"the engine overrides the value ({first.reason})"
    unused = lv.unused_when(ctx)
    if unused:
        return unused
    tried = ", ".join(opt.label for opt, _ in plans[:6])
    if base.verdict != "ok":
        return (
            f"the launch fails the same way at {tried}; the shortfall is the "
            f"{base.error_consumer or 'budget'}, which this flag does not size"
        )
    return f"re-planned at {tried}: no pool, verdict or concurrency changes"


def _starts(o: Outcome) -> bool:
    return o.verdict == "ok" and o.free_gib >= 0


def _summary(base: Outcome, valid: list[LeverValue], floors: Floors) -> str:
    """One line per lever, judged as the fix judges (_explain/fix.py: the floors, then
    best_outcome_key), so the table and the fix name the same best value."""
    diff = [(v.label, v.outcome) for v in valid if not v.same_as_current and v.outcome is not None]
    ok = [(label, o) for label, o in diff if _starts(o)]
    fail = [label for label, o in diff if not _starts(o)]
    if not floors.met(base):
        good = [(label, o) for label, o in ok if floors.met(o)]
        if not good:
            if ok:
                return (
                    f"starts at {', '.join(label for label, _ in ok[:5])}, but below the fix's "
                    f"floors ({floors.words()})"
                )
            return "changes the pools, but no value tried makes it start"
        best_label, best = min(good, key=lambda lo: best_outcome_key(lo[1]))
        return (
            f"meets the fix's floors at {', '.join(label for label, _ in good[:5])}"
            f"{' ...' if len(good) > 5 else ''}; best {best_label}: "
            f"{best.effective_concurrency:g} full-context requests at once, "
            f"{best.max_running_requests} running, {best.kv_tokens:,} KV tokens"
        )
    parts = []
    if ok:
        conc = [o.effective_concurrency for _, o in ok]
        toks = [o.kv_tokens for _, o in ok]
        parts.append(
            f"effective concurrency {min(conc):g}-{max(conc):g} (now "
            f"{base.effective_concurrency:g}), KV tokens {min(toks):,}-{max(toks):,} "
            f"(now {base.kv_tokens:,})"
        )
    if fail:
        parts.append(f"fails or runs out of memory at {', '.join(fail[:5])}")
    return "; ".join(parts) or "changes memory only"


def _with_fix(e: LeverEffect, fix: Fix, base: Outcome, floors: Floors) -> LeverEffect:
    """The fix's own values of this lever (its grid is finer than the table's), added to the
    lever's values and marked, so the table's best is the fix's best."""
    marks: dict[Any, list[str]] = {}
    for role, c in (("the fix", fix.best), ("closest to what you asked", fix.minimal)):
        if c is not None and len(c.changes) == 1 and c.changes[0].dest == e.dest:
            marks.setdefault(c.changes[0].new, []).append(role)
    if not marks:
        return e
    values = list(e.values)
    for value, roles in marks.items():
        cand = fix.best if "the fix" in roles else fix.minimal
        assert cand is not None
        i = next((k for k, v in enumerate(values) if v.args.get(e.dest) == value), None)
        if i is None:
            values.append(
                LeverValue(
                    label=fmt_value(value),
                    args={e.dest: value},
                    outcome=cand.outcome,
                    delta_gib=delta(cand.outcome, base),
                )  # fmt: skip
            )
            i = len(values) - 1
        values[i] = values[i].model_copy(update={"fix": ", ".join(roles)})
    if e.name != "parallelism":
        values.sort(key=lambda v: _order(v.args.get(e.dest)))
    reason = _summary(base, [v for v in values if v.outcome is not None], floors)
    return e.model_copy(update={"values": values, "reason": reason})


def _order(value: Any) -> tuple[int, Any]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


# --------------------------------------------------------------------------------------------
# The user's own flags: did each one matter?
# --------------------------------------------------------------------------------------------


def _user_flags(ctx: Context, base: Outcome, current_target: int) -> list[FlagEffect]:
    cat = ctx.catalogue
    by_dest = {ctx.dest(lv): lv for lv in cat.levers if ctx.dest(lv)}
    out = []
    for dest, value in ctx.plan.user_args.items():
        if dest in cat.not_user_levers or dest.startswith("_"):
            continue
        target = current_target
        p, err = replan(ctx.request, Option("default", {dest: None}))
        flag = cat.flag(ctx.profile, dest)
        if p is not None and dest == cat.context_dest:
            target = p.pools.context_len
        if p is None:
            out.append(
                FlagEffect(
                    flag=flag, dest=dest, value=value, mattered=True, reason=f"needed: {err}"
                )
            )
            continue
        o = outcome(p, target)
        if signature(o) == signature(base):
            lv = by_dest.get(dest)
            unused = lv.unused_when(ctx) if lv else None
            if unused:
                reason = f"no effect: {unused}"
            elif p.resolved_args.get(dest) == ctx.args.get(dest):
                reason = f"no effect: it sets the engine's default ({value!r})"
            else:
                reason = (
                    "no effect: without it every pool, the verdict and the concurrency are the same"
                )
            out.append(
                FlagEffect(
                    flag=flag, dest=dest, value=value, mattered=False, reason=reason, without=o
                )
            )
        else:
            out.append(
                FlagEffect(
                    flag=flag,
                    dest=dest,
                    value=value,
                    mattered=True,
                    reason=f"without it ({dest}={_fmt(p.resolved_args.get(dest))}): {_short(o)}",
                    without=o,
                )
            )
    return out


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else repr(v)


def _short(o: Outcome) -> str:
    if o.verdict != "ok":
        return f"fails ({o.error_consumer or (o.error or '')[:60]})"
    return (
        f"{o.kv_tokens:,} KV tokens, {o.max_running_requests} running, effective concurrency "
        f"{o.effective_concurrency:g}, {o.free_gib:.2f} GiB free"
    )
