"""Terminal rendering of a VerifyReport with rich: one row per check, evidence under it."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from servefit.report.console import make_console
from servefit.report.grid import Cell, Col, Grid
from servefit.verify.result import CheckResult, VerifyReport

STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "skip": "dim"}


def progress_line(check: CheckResult) -> Text:
    """One line printed as each check finishes (to stderr, so JSON on stdout stays clean)."""
    return Text.assemble((f"{check.status.upper():4}", STYLE[check.status]), f" {check.title}")


def report_table(report: VerifyReport) -> Grid:
    engine = report.engine or "unknown engine"
    title = f"servefit verify {report.url} - {report.model or '?'} ({engine})"
    t = Grid(
        [Col("check", wrap=True), Col("result"), Col("evidence", wrap=True, under=True, label="")],
        title,
    )
    for check in report.checks:
        body = "\n".join([check.summary, *check.evidence])
        t.add(check.title, Cell(check.status.upper(), STYLE[check.status]), body)
    return t


def verdict_line(report: VerifyReport) -> Text:
    warns = sum(c.status == "warn" for c in report.checks)
    if report.ok:
        extra = f" ({warns} warning{'s' if warns != 1 else ''})" if warns else ""
        return Text(f"FIT TO SERVE: no check failed{extra}.", style="bold green")
    names = ", ".join(c.title for c in report.failed)
    return Text(f"NOT FIT: {len(report.failed)} check(s) failed: {names}.", style="bold red")


def render_report(report: VerifyReport, console: Console | None = None) -> None:
    console = console or make_console()
    console.print(verdict_line(report))
    console.print()
    console.print(report_table(report))
    console.print()
    console.print(verdict_line(report))
