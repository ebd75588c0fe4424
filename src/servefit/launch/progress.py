"""What a launch looks like while it starts: the stages as the engine's own log lines reach
them, the pools it allocated next to what the plan predicted, and the time to ready.

On a terminal the view is a rich Live panel redrawn in place; otherwise (a pipe, CI, a log
file) each stage and each number is printed once, as a line, when it first appears.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from servefit.frozen import frozen
from servefit.launch.schema import STAGES, STATE_LABEL, Check, EngineFacts, RunRecord

_ICON = {"ok": "[green]✓[/]", "warn": "[yellow]![/]", "fail": "[red]✗[/]", "skip": "[dim]-[/]"}


@frozen
class Comparison:
    label: str
    actual: float
    planned: float | None
    unit: str  # "GiB" or "" for counts

    def text(self) -> str:
        def fmt(v: float) -> str:
            if self.unit == "GiB":
                return f"{v:.2f} GiB"
            return f"{v:.2f}x" if self.unit == "x" else f"{int(v):,}"

        out = f"{self.label} {fmt(self.actual)}"
        if self.planned is None:
            return out
        if self.planned == self.actual:
            return out + " (as planned)"
        delta = (
            f", {100 * (self.actual - self.planned) / self.planned:+.1f} %" if self.planned else ""
        )
        return out + f" (planned {fmt(self.planned)}{delta})"


# (label, fact, unit): numbers the engine prints while it starts.
_NUMBERS = (
    ("free before weights", "avail_before_load_gib", "GiB"),
    ("weights", "weights_gib", "GiB"),
    ("state slots", "mamba_slots", ""),
    ("state pool", "mamba_gib", "GiB"),
    ("speculative state", "spec_state_gib", "GiB"),
    ("KV tokens", "kv_tokens", ""),
    ("KV cache", "kv_gib", "GiB"),
    ("free after pools", "pool_end_avail_gib", "GiB"),
    ("max running requests", "max_running_requests", ""),
)
# Which stage a number belongs to, for the display.
_STAGE_OF = {
    "free before weights": "loading_weights",
    "weights": "loading_weights",
    "max running requests": "capturing_graphs",
    "running requests capped to": "capturing_graphs",
}


def planned_facts(plan: dict[str, Any] | None, engine: str) -> EngineFacts | None:
    """What the plan predicts the engine will print: its predicted start-up lines (Plan.log_lines,
    in the engine's own formats) read by the same parser as the engine's real log, so each
    number is compared with exactly the figure the engine prints."""
    if not plan:
        return None
    from servefit.launch.events import LogProgress

    reader = LogProgress(engine)
    for line in plan.get("log_lines") or []:
        reader.feed(str(line))
    return reader.facts


def comparisons(facts: EngineFacts, predicted: EngineFacts | None) -> list[Comparison]:
    """Numbers the engine printed (rank 0), each next to the plan's prediction when it has one."""
    out = []
    for label, fact, unit in _NUMBERS:
        actual = getattr(facts, fact)
        if actual is None:
            continue
        planned = getattr(predicted, fact) if predicted is not None else None
        out.append(
            Comparison(label, float(actual), None if planned is None else float(planned), unit)
        )
    if facts.capped_running_requests is not None:
        out.append(
            Comparison("running requests capped to", float(facts.capped_running_requests), None, "")
        )
    if facts.max_concurrency is not None:
        out.append(Comparison("full-context requests", facts.max_concurrency, None, "x"))
    return out


def render_checks(console: Console, checks: list[Check]) -> None:
    # Messages are plain text: "pip install 'servefit[gpu]'" must not be read as rich markup.
    for c in checks:
        console.print(f" {_ICON[c.status]} {c.name:<15} {escape(c.message)}", highlight=False)
        for d in c.detail:
            console.print(f"   {'':<15} {escape(d)}", highlight=False, style="dim")


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class ProgressView:
    """Feed it the run record as it changes (`update`); `close` ends a live display."""

    def __init__(
        self, console: Console, plan: dict[str, Any] | None, live: bool | None = None
    ) -> None:
        self.console = console
        self.plan = plan
        self.live_mode = console.is_terminal if live is None else live
        self._live: Any = None
        self._printed: set[str] = set()
        self._record: RunRecord | None = None
        self._predicted: EngineFacts | None = None

    # ---- shared

    def _stage_rows(self, rec: RunRecord) -> list[tuple[str, str, str, list[Comparison]]]:
        """(icon, label, elapsed, numbers) per stage."""
        now = time.time()
        current = rec.state if rec.state in STAGES else None
        failed_at = None
        if rec.state in ("failed", "stopped"):
            reached = [
                s for s in STAGES if getattr(rec.timings, s, None) is not None or s == "starting"
            ]
            failed_at = reached[-1]
        numbers: dict[str, list[Comparison]] = {}
        if self._predicted is None and self.plan:
            self._predicted = planned_facts(self.plan, rec.engine)
        for c in comparisons(rec.facts, self._predicted):
            numbers.setdefault(_STAGE_OF.get(c.label, "allocating"), []).append(c)
        rows = []
        entered = [
            (s, rec.timings.started if s == "starting" else getattr(rec.timings, s)) for s in STAGES
        ]
        for i, (stage, at) in enumerate(entered):
            nxt = next((t for _, t in entered[i + 1 :] if t is not None), None)
            end = nxt or rec.timings.ended or now
            elapsed = _fmt_s(end - at) if at is not None and stage != "ready" else ""
            if stage == "ready" and rec.timings.time_to_ready_s is not None:
                elapsed = f"after {_fmt_s(rec.timings.time_to_ready_s)}"
            if at is None:
                icon = "[dim]·[/]"
            elif stage == failed_at:
                icon = "[red]✗[/]" if rec.state == "failed" else "[yellow]■[/]"
            elif stage == current and stage != "ready":
                icon = "[cyan]…[/]"
            else:
                icon = "[green]✓[/]"
            rows.append((icon, STATE_LABEL[stage], elapsed, numbers.get(stage, [])))
        return rows

    def _table(self, rec: RunRecord) -> Group:
        table = Table.grid(padding=(0, 2))
        table.add_column(width=1)
        table.add_column(min_width=16)
        table.add_column(justify="right", min_width=8)
        table.add_column()
        for icon, label, elapsed, nums in self._stage_rows(rec):
            table.add_row(icon, label, elapsed, Text(" · ".join(n.text() for n in nums)))
        return Group(Text(f"run {rec.id}  pid {rec.pid or '-'}  {rec.url}", style="bold"), table)

    # ---- updates

    def update(self, rec: RunRecord) -> None:
        self._record = rec
        if self.live_mode:
            if self._live is None:
                from rich.live import Live

                self._live = Live(
                    self._table(rec), console=self.console, refresh_per_second=8, transient=False
                )
                self._live.start()
            else:
                self._live.update(self._table(rec))
            return
        for icon, label, _elapsed, nums in self._stage_rows(rec):
            if "·" in icon:
                continue
            key = f"stage:{label}"
            if key not in self._printed and not (label == "ready" and rec.state != "ready"):
                self._printed.add(key)
                if label == "ready":
                    continue  # the summary says it
                self.console.print(f" … {label}", highlight=False)
            for n in nums:
                if f"num:{n.label}" not in self._printed:
                    self._printed.add(f"num:{n.label}")
                    self.console.print(f"     {n.text()}", highlight=False)

    def close(self) -> None:
        if self._live is not None:
            if self._record is not None:
                self._live.update(self._table(self._record))
            self._live.stop()
            self._live = None
