"""Rich rendering of a DoctorReport for people (`servefit doctor LOG`)."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from servefit.doctor.schema import DoctorReport

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_MARK = {"error": "x", "warning": "!", "info": "i"}
_STATUS = {
    "failed": "bold red",
    "warning": "yellow",
    "ok": "green",
    "incomplete": "yellow",
    "no-launch": "red",
}


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def render(report: DoctorReport, console: Console | None = None) -> None:
    c = console or Console()
    head = Text()
    head.append(f"{report.path}: {report.lines:,} lines, {report.launches_total} launch(es). ")
    if report.launch is not None:
        ln = report.launch
        eng = ln.engine
        head.append(f"Launch {ln.index} (lines {ln.first_line}-{ln.last_line}")
        head.append(f", started {ln.start_time})" if ln.start_time else ")")
        head.append(
            f": {eng.name or '?'} {eng.version or (eng.format_family or '')}, outcome {ln.outcome}."
        )
    c.print(head)
    for note in report.notes:
        c.print(f"  note: {note}")
    ln = report.launch
    if ln is not None and ln.ranks:
        t = Table(title="Measured per rank (GiB, as the engine printed it)", show_edge=False)
        for col in (
            "rank",
            "free before weights",
            "weights",
            "free after weights",
            "after pools",
            "CUDA graphs",
            "draft weights",
            "KV available",
        ):
            t.add_column(col, justify="right" if col != "rank" else "left")
        for r in ln.ranks:
            t.add_row(
                r.rank or "-",
                _g(r.free_before_weights_gib),
                _g(r.weights_gib),
                _g(r.free_after_weights_gib),
                _g(r.free_after_pools_gib),
                _g(r.graph_mem_gib),
                _g(r.draft_weights_gib),
                _g(r.kv_available_gib),
            )
        c.print(t)
    rep = report.replay
    if rep is not None and rep.checks:
        t = Table(
            title=f"Pools: logged vs replayed ({rep.engine}, calibrated on the log)",
            show_edge=False,
        )
        for col in ("pool", "logged", "replayed", "gap"):
            t.add_column(col, justify="left" if col == "pool" else "right")
        for chk in rep.checks:
            style = "bold red" if chk.flagged else ""
            t.add_row(
                chk.name,
                f"{chk.logged:,.6g} {chk.unit}",
                f"{chk.predicted:,.6g}",
                Text(f"{chk.gap_pct:+.2f} %", style=style),
            )
        c.print(t)
    rc = report.root_cause
    if rc is not None:
        body = Text(rc.summary)
        if rc.error is not None:
            body.append(f"\n\nline {rc.error.at.line}: ", style="dim")
            body.append(rc.error.message[:500])
        if rc.consumer:
            body.append(f"\n\nconsumer: {rc.consumer}", style="bold")
        if rc.detail:
            body.append(f" - {rc.detail}")
        if rc.flags:
            body.append("\nflags: " + ", ".join(rc.flags))
        c.print(Panel(body, title=f"Root cause: {rc.kind}", border_style="red"))
    fx = report.fix
    if fx is not None:
        body = Text()
        for opt_i, opt in enumerate([fx.best, *fx.alternatives]):
            prefix = "fix: " if opt_i == 0 else "or:  "
            body.append(prefix, style="bold" if opt_i == 0 else "")
            body.append(" ".join(f"{ch.flag} {ch.new}" for ch in opt.changes))
            body.append(f"  ({opt.why})\n")
        if fx.command:
            body.append("\n" + fx.command, style="bold green")
        src = (
            "re-planned on this log's measured memory"
            if fx.source == "replay"
            else "the engine's own estimate"
        )
        c.print(Panel(body, title=f"Fix ({src})", border_style="green"))
    for f in report.findings:
        line = Text(f"[{_MARK[f.severity]}] ", style=_STYLE[f.severity])
        line.append(f.title, style=_STYLE[f.severity])
        line.append(f": {f.detail}")
        if f.at is not None:
            line.append(f" (line {f.at.line})", style="dim")
        c.print(line)
    if rep is not None:
        for note in rep.notes:
            c.print(f"  replay: {note}", style="dim")
    c.print(Text(f"status: {report.status}", style=_STATUS.get(report.status, "")))
