"""Terminal rendering of an Explanation with rich."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from servefit.explain.schema import Explanation, Fix, FixCandidate, LeverValue, Outcome


def _v(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:g}"
    return "-" if x is None else str(x)


SHORT = {
    "kv_cache": "kv",
    "mamba_state": "state",
    "spec_state": "spec",
    "draft_kv": "draft kv",
    "draft_weights": "draft w",
    "req_to_token": "r2t",
    "reserved": "reserve",
    "cuda_context": "cuda",
    "weights": "weights",
}


def _delta(d: dict[str, float]) -> str:
    return " ".join(f"{SHORT.get(k, k)} {v:+.2f}" for k, v in d.items() if k != "free") or "-"


def consumers_table(e: Explanation) -> Table:
    t = Table(
        title="Memory consumers per rank, largest first", title_justify="left", show_edge=False
    )
    for col, just in (
        ("#", "right"),
        ("consumer", "left"),
        ("GiB", "right"),
        ("bytes", "right"),
        ("% GPU", "right"),
        ("formula (actual numbers)", "left"),
    ):
        t.add_column(col, justify=just, overflow="fold")
    for c in e.consumers:
        t.add_row(
            str(c.rank), c.name, f"{c.gib:,.2f}", f"{c.bytes:,}", f"{c.share_of_gpu:.1f}", c.formula
        )
    return t


def levers_table(e: Explanation) -> Table:
    t = Table(title="Levers (each value re-planned)", title_justify="left", show_edge=False)
    t.add_column("flag")
    t.add_column("now")
    t.add_column("effect")
    t.add_column("what it does / why not", overflow="fold")
    for lv in e.levers:
        style = "dim" if lv.effect == "no effect" else ""
        t.add_row(lv.flag, _v(lv.current), lv.effect, lv.reason, style=style)
    return t


def _outcome_cells(o: Outcome | None, rejected: str | None) -> list[str]:
    if o is None:
        return ["rejected", "-", "-", "-", "-", rejected or ""]
    if o.verdict != "ok":
        return ["FAIL", "0", "0", "0", "-", o.error_consumer or ""]
    verdict = "ok" if o.free_gib >= 0 else "OOM"
    return [
        verdict,
        f"{o.kv_tokens:,}",
        str(o.max_running_requests),
        f"{o.effective_concurrency:g}",
        f"{o.free_gib:.2f}",
        "",
    ]


def values_table(e: Explanation) -> Table:
    t = Table(title="Lever values", title_justify="left", show_edge=False)
    for col, just in (
        ("change", "left"),
        ("verdict", "left"),
        ("KV tokens", "right"),
        ("running", "right"),
        ("eff.", "right"),
        ("free", "right"),
        ("pools changed, GiB", "left"),
    ):
        t.add_column(col, justify=just, overflow="fold")
    cur = e.outcome
    t.add_row("(now)", *_outcome_cells(cur, None)[:5], "", style="bold")
    for lv in e.levers:
        if lv.effect == "no effect":
            continue
        for v in lv.values:
            cells = _outcome_cells(v.outcome, v.rejected)
            change = v.label if lv.name == "parallelism" else f"{lv.flag} {v.label}"
            t.add_row(
                change,
                *cells[:5],
                _value_note(v, cells[5]),
                style="dim" if v.same_as_current else "",
            )
    return t


def _value_note(v: LeverValue, fallback: str) -> str:
    if v.rejected:
        return v.rejected
    if v.same_as_current:
        return "same as now" + (f" ({v.note})" if v.note else "")
    return _delta(v.delta_gib) if v.outcome and v.outcome.verdict == "ok" else fallback


def flags_table(e: Explanation) -> Table:
    t = Table(
        title="Your flags: did each one matter? (re-planned without it)",
        title_justify="left",
        show_edge=False,
    )
    t.add_column("flag")
    t.add_column("value")
    t.add_column("mattered")
    t.add_column("why", overflow="fold")
    for f in e.user_flags:
        t.add_row(
            f.flag,
            _v(f.value),
            "yes" if f.mattered else "no",
            f.reason,
            style="" if f.mattered else "yellow",
        )
    return t


def _fix_row(c: FixCandidate) -> list[str]:
    o = c.outcome
    return [
        c.command_flags,
        f"{o.kv_tokens:,}",
        str(o.max_running_requests),
        f"{o.effective_concurrency:g}",
        f"{o.free_gib:.2f}",
        f"{c.concurrency_loss:g}",
        f"{c.context_loss:,}",
    ]


def fix_panel(fix: Fix) -> Panel:
    if not fix.found or fix.best is None:
        return Panel(
            Text(f"No minimal fix: {fix.note}", style="red"),
            title="Minimal fix",
            title_align="left",
            border_style="red",
        )
    b = fix.best
    t = Table(show_edge=False)
    for col in (
        "change",
        "KV tokens",
        "running",
        "eff. conc.",
        "free GiB",
        "conc. loss",
        "ctx loss",
    ):
        t.add_column(col, justify="left" if col == "change" else "right")
    before = fix.before
    t.add_row(
        f"(before: {before.verdict})",
        f"{before.kv_tokens:,}",
        str(before.max_running_requests),
        f"{before.effective_concurrency:g}",
        f"{before.free_gib:.2f}" if before.verdict == "ok" else "-",
        "",
        "",
        style="dim",
    )
    t.add_row(*_fix_row(b), style="bold green")
    for alt in fix.alternatives:
        t.add_row(*_fix_row(alt))
    head = Text(
        f"Smallest change that starts ({fix.tried} plans tried, >= {fix.min_free_gib:g} "
        f"GiB headroom): {b.command_flags}\n",
        style="bold green",
    )
    from rich.console import Group

    return Panel(Group(head, t), title="Minimal fix", title_align="left", border_style="green")


def render_explanation(e: Explanation, console: Console | None = None) -> None:
    console = console or Console()
    p = e.plan
    hw = p.hardware
    console.print(
        f"[bold]{p.model.name}[/] on {hw.num_gpus}x {hw.gpu}, TP {hw.tp_size} PP {hw.pp_size} - "
        f"{p.engine.name} {p.engine.profile}: [bold]{'STARTS' if p.verdict == 'ok' else 'FAILS'}[/]"
    )
    for w in p.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    style = "green" if p.verdict == "ok" else "red"
    console.print(
        Panel(Text("\n".join(e.why)), title="Why", title_align="left", border_style=style)
    )
    console.print(consumers_table(e))
    console.print(levers_table(e))
    console.print(values_table(e))
    if e.user_flags:
        console.print(flags_table(e))
    if e.fix is not None:
        console.print(fix_panel(e.fix))
