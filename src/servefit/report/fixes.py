"""How a fix reads: one line per choice under the verdict, the candidates as a table, and the
fixed launch as a command to paste."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from servefit._explain.fix import own_context_requests
from servefit._explain.schema import Fix, FixCandidate, GpusNeeded, Outcome
from servefit._plan.schema import Plan
from servefit.report.commands import command_for
from servefit.report.console import Plain
from servefit.report.grid import Cell, Col, Grid, Para
from servefit.report.verdict import Verdict, counted, requests


def outcome_words(o: Outcome) -> str:
    if o.context_len != o.target_context:  # a shorter context: requests of that length
        at_once = (
            f"{counted(own_context_requests(o), 'request')} of {o.context_len:,} tokens at once"
        )
    else:
        at_once = f"{counted(o.effective_concurrency, 'full-context request')} at once"
    return (
        f"{at_once}, {o.max_running_requests} running, {o.kv_tokens:,} KV tokens, "
        f"{o.free_gib:.2f} GiB headroom"
    )


def gpus_words(g: GpusNeeded, gpu: str, world: int) -> str | None:
    """`world`: the GPUs the launch uses; weights_gpus == world means they hold the weights."""
    weights = (
        f"the weights need at least {g.weights_gpus} GPUs of this kind ({gpu})"
        if g.weights_gpus and g.weights_gpus > world
        else None
    )
    if g.num_gpus is None or g.outcome is None:
        if g.weights_gpus is None:
            weights = f"the weights do not fit on up to {g.max_gpus} GPUs of this kind ({gpu})"
        return f"{weights or 'more GPUs'}; no layout up to {g.max_gpus} GPUs starts"
    layout = f"TP {g.tp_size}" + (f" x PP {g.pp_size}" if g.pp_size and g.pp_size > 1 else "")
    more = "on more GPUs of this kind" if g.num_gpus > world else "on these GPUs"
    lead = (
        f"{weights}; the smallest layout that starts"
        if weights
        else f"{more} ({gpu}), the smallest layout that starts"
    )
    also = f" with {g.flags}" if g.flags else ""
    return f"{lead}: {layout} on {g.num_gpus} GPUs{also}, {outcome_words(g.outcome)}"


def fix_lines(fix: Fix, gpu: str, world: int) -> tuple[str, ...]:
    """The lines under a FAILS (or degraded) verdict: the best change, the closest one, more
    GPUs when that is what it takes."""
    out = []
    b, m = fix.best, fix.minimal
    if b is not None:
        out.append(f"fix: {b.command_flags} ({outcome_words(b.outcome)})")
    if m is not None and b is not None and m.command_flags != b.command_flags:
        out.append(f"closest to what you asked: {m.command_flags} ({outcome_words(m.outcome)})")
    if fix.gpus is not None:
        words = gpus_words(fix.gpus, gpu, world)
        if words:
            out.append(words)
    if b is None and fix.gpus is None and fix.note:
        out.append(fix.note)
    return tuple(out)


def with_fix(v: Verdict, fix: Fix | None, plan: Plan) -> Verdict:
    if fix is None:
        return v
    hw = plan.hardware
    return Verdict(v.status, v.headline, (*v.reasons, *fix_lines(fix, hw.gpu, _world(plan))))


def _world(plan: Plan) -> int:
    return plan.hardware.tp_size * plan.hardware.pp_size


def fixed_args(fix: Fix) -> dict[str, Any] | None:
    """The args of the launch to recommend: the best change, else the smallest layout of more
    GPUs that starts."""
    if fix.best is not None:
        return fix.best.args
    if fix.gpus is not None and fix.gpus.outcome is not None:
        return fix.gpus.args
    return None


def fixed_command(fix: Fix, plan: Plan, model: str, env: dict[str, str] | None) -> str | None:
    args = fixed_args(fix)
    if args is None:
        return None
    return command_for(plan.engine.name, plan.engine.profile, model, args, env)


def _cells(c: FixCandidate, why: str) -> list[Any]:
    o = c.outcome
    return [
        c.command_flags,
        why,
        f"{o.kv_tokens:,}",
        str(o.max_running_requests),
        requests(own_context_requests(o)),
        f"{o.free_gib:.2f}",
    ]


def candidates_table(fix: Fix) -> Grid:
    t = Grid(
        [
            Col("change", wrap=True),
            Col("why", wrap=True),
            Col("KV tokens", right=True),
            Col("running", right=True),
            Col("full ctx", right=True),
            Col("free GiB", right=True),
        ],
        f"Changes that start ({fix.tried:,} plans tried)",
    )
    b = fix.before
    if b.verdict == "ok":
        t.add(
            "(now)",
            "",
            f"{b.kv_tokens:,}",
            str(b.max_running_requests),
            requests(b.effective_concurrency),
            f"{b.free_gib:.2f}",
            style="dim",
        )
    else:
        t.add("(now)", "fails", "-", "-", "-", "-", style="dim")
    if fix.best is not None:
        t.add(*(Cell(x, "bold") for x in _cells(fix.best, "best")))
    m = fix.minimal
    if m is not None and (fix.best is None or m.command_flags != fix.best.command_flags):
        t.add(*_cells(m, "closest"))
    for alt in fix.alternatives:
        t.add(*_cells(alt, "pair" if len(alt.changes) > 1 else "another flag"))
    return t


def command_block(fix: Fix, plan: Plan, model: str | None, env: dict[str, str] | None) -> list[Any]:
    """ "The launch with the best fix:" and the command, or nothing."""
    cmd = fixed_command(fix, plan, model, env) if model else None
    if not cmd:
        return []
    what = "the best fix" if fix.best is not None else "more GPUs"
    return [Text(f"The launch with {what}:", style="bold"), Plain(cmd)]


def fix_block(fix: Fix, plan: Plan) -> list[Any]:
    """The fix in full: the ranking in one line, the candidates, more GPUs."""
    out: list[Any] = [Para(fix.ranking, prefix="How the fixes are ranked: ", prefix_style="bold")]
    if fix.best is not None or fix.minimal is not None:
        out.append(candidates_table(fix))
    elif fix.note:
        out.append(Para(fix.note, prefix="No fix: ", prefix_style="bold red"))
    if fix.gpus is not None:
        words = gpus_words(fix.gpus, plan.hardware.gpu, _world(plan))
        if words:
            out.append(Para(words, prefix="More GPUs: ", prefix_style="bold"))
    return out


def plan_shell(plan: Plan, fix: Fix | None, model: str, env: dict[str, str] | None) -> None:
    """`plan --format shell`: the launch to run: with the fix when the plan needs one (nothing
    when none was found), else as planned."""
    from servefit.report.console import make_console, plain

    if fix is not None:
        cmd = fixed_command(fix, plan, model, env)
    else:
        cmd = command_for(plan.engine.name, plan.engine.profile, model, dict(plan.user_args), env)
    if cmd:
        plain(make_console(), cmd)
