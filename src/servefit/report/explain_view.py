"""Terminal rendering of an Explanation: the verdict first, the reasons, the consumers, the
levers re-planned, the user's flags, and the fix."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from servefit._explain.schema import Explanation, LeverValue, Outcome
from servefit.report.commands import command_for
from servefit.report.console import make_console, plain
from servefit.report.fixes import command_block, fix_block, fixed_command, with_fix
from servefit.report.grid import Col, Grid, Para
from servefit.report.table import calibration_line, header, num
from servefit.report.verdict import of_plan, requests


def _v(x: Any) -> str:
    return num(x)


# consumer keys (explain/outcome.py MEMORY_KEYS) in words
NAMES = {
    "kv_cache": "KV",
    "mamba_state": "state pool",
    "spec_state": "spec state",
    "draft_kv": "draft KV",
    "draft_weights": "draft weights",
    "req_to_token": "req_to_token",
    "reserved": "reserve",
    "cuda_context": "CUDA/NCCL",
    "weights": "weights",
    "activation_peak": "activation peak",
    "graphs": "CUDA graphs + non-torch",
}


def _delta(d: dict[str, float]) -> str:
    return ", ".join(f"{NAMES.get(k, k)} {v:+.2f}" for k, v in d.items() if k != "free") or "-"


def consumers_table(e: Explanation) -> Grid:
    t = Grid(
        [
            Col("#", right=True),
            Col("consumer", wrap=True),
            Col("GiB", right=True),
            Col("bytes", right=True),
            Col("% GPU", right=True),
            Col("formula (actual numbers)", wrap=True, under=True, label=""),
        ],
        "Memory consumers per rank, largest first",
    )
    for c in e.consumers:
        t.add(
            str(c.rank), c.name, f"{c.gib:,.2f}", f"{c.bytes:,}", f"{c.share_of_gpu:.1f}", c.formula
        )
    return t


def levers_table(e: Explanation) -> Grid:
    t = Grid(
        [
            Col("flag"),
            Col("now"),
            Col("effect"),
            Col("what it does / why not", wrap=True, under=True, label=""),
        ],
        "Levers (each value re-planned)",
    )
    for lv in e.levers:
        t.add(
            lv.flag,
            _v(lv.current),
            lv.effect,
            lv.reason,
            style="dim" if lv.effect == "no effect" else "",
        )
    return t


def _outcome_cells(o: Outcome | None, rejected: str | None) -> list[str]:
    if o is None:
        return ["rejected", "-", "-", "-", "-", rejected or ""]
    if o.verdict != "ok":
        why = o.error_consumer or _refusal(o.error)
        return ["FAIL", "-", "-", "-", "-", f"cause: {why}"]
    return [
        "starts" if o.free_gib >= 0 else "OOM",
        f"{o.kv_tokens:,}",
        str(o.max_running_requests),
        requests(o.effective_concurrency),
        f"{o.free_gib:.2f}",
        "",
    ]


def _refusal(error: str | None) -> str:
    """What the engine refused, without the citation servefit adds in parentheses."""
    if not error:
        return "start-up"
    text = error.split(" (", 1)[0]
    return text if len(text) <= 100 else text[:99] + "…"


def values_table(e: Explanation) -> Grid:
    """Every value re-planned; a run of values that fail the same way is one row."""
    t = Grid(
        [
            Col("change", wrap=True),
            Col("verdict"),
            Col("KV tokens", right=True),
            Col("running", right=True),
            Col("full ctx", right=True),
            Col("free GiB", right=True),
            Col("pools changed (GiB)", wrap=True, under=True, label=""),
        ],
        "Lever values",
    )
    now = _outcome_cells(e.outcome, None)
    t.add("(now)", *now[:5], now[5] if e.outcome.verdict != "ok" else "", style="bold")
    for lv in e.levers:
        if lv.effect == "no effect":
            continue
        run: list[str] = []
        run_cells: list[str] = []
        for v in lv.values:
            cells = _outcome_cells(v.outcome, v.rejected)
            fails_alike = cells[0] == "FAIL" and not v.same_as_current
            if run and not (fails_alike and cells == run_cells):
                _add_run(t, lv.flag, lv.name, run, run_cells)
                run = []
            if fails_alike:
                run.append(v.label)
                run_cells = cells
                continue
            change = v.label if lv.name == "parallelism" else f"{lv.flag} {v.label}"
            t.add(
                change,
                *cells[:5],
                _value_note(v, cells[5]),
                style="dim" if v.same_as_current else "",
            )
        if run:
            _add_run(t, lv.flag, lv.name, run, run_cells)
    return t


def _add_run(t: Grid, flag: str, name: str, labels: list[str], cells: list[str]) -> None:
    values = ", ".join(labels)
    t.add(values if name == "parallelism" else f"{flag} {values}", *cells[:5], cells[5])


def _value_note(v: LeverValue, fallback: str) -> str:
    if v.rejected:
        return v.rejected
    if v.same_as_current:
        return "same as now" + (f" ({v.note})" if v.note else "")
    text = _delta(v.delta_gib) if v.outcome and v.outcome.verdict == "ok" else fallback
    return f"{v.fix.upper()}: {text}" if v.fix else text


def flags_table(e: Explanation) -> Grid:
    t = Grid(
        [Col("flag"), Col("value"), Col("mattered"), Col("why", wrap=True, under=True, label="")],
        "Your flags: did each one matter? (re-planned without it)",
    )
    for f in e.user_flags:
        t.add(
            f.flag,
            _v(f.value),
            "yes" if f.mattered else "no",
            f.reason,
            style="" if f.mattered else "yellow",
        )
    return t


def render_explanation(
    e: Explanation,
    console: Console | None = None,
    model: str | None = None,
    env: dict[str, str] | None = None,
) -> None:
    console = console or make_console()
    p = e.plan
    verdict = with_fix(of_plan(p), e.fix, p)
    console.print(verdict.text())
    calibrated = calibration_line(p)
    if calibrated is not None:
        console.print(calibrated)
    console.print(Para(header(p)))
    for w in p.warnings:
        console.print(Para(w, prefix="warning: ", prefix_style="yellow"))
    console.print()
    console.print(Text("Why", style="bold"))
    for line in e.why:
        console.print(Para(line, prefix="  ", indent=2))
    blocks: list[Any] = [consumers_table(e), levers_table(e), values_table(e)]
    if e.user_flags:
        blocks.append(flags_table(e))
    for b in blocks:
        console.print()
        console.print(b)
    if e.fix is not None:
        console.print()
        for part in fix_block(e.fix, p):
            console.print(part)
    console.print()
    console.print(verdict.text())
    if e.fix is not None:
        for part in command_block(e.fix, p, model, env):
            console.print(part)


def explain_shell(e: Explanation, model: str, env: dict[str, str] | None = None) -> None:
    """`--format shell`: the launch with the best fix applied (more GPUs when no flag does it),
    or as given when it needs none; nothing when no fix was found."""
    p = e.plan
    if e.fix is None:
        cmd = command_for(p.engine.name, p.engine.profile, model, dict(p.user_args), env)
    else:
        cmd = fixed_command(e.fix, p, model, env)
    if cmd:
        plain(make_console(), cmd)
