"""Rendering of a DoctorReport for people (`servefit doctor LOG`): the verdict of the launch
first, then what the engine measured, the root cause, the fix (its command as plain text) and
the findings."""

from __future__ import annotations

from rich.console import Console, Group
from rich.text import Text

from servefit.doctor.schema import DoctorReport, LaunchSummary
from servefit.report.commands import command_block
from servefit.report.console import make_console, plain
from servefit.report.grid import Cell, Col, Grid, Para
from servefit.report.verdict import first_sentence

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_MARK = {"error": "x", "warning": "!", "info": "i"}
_STATUS = {
    "failed": ("FAILED", "bold red"),
    "warning": ("STARTED, WITH WARNINGS", "bold yellow"),
    "ok": ("STARTED", "bold green"),
    "incomplete": ("INCOMPLETE", "bold yellow"),
    "no-launch": ("NO LAUNCH FOUND", "bold red"),
}
# root-cause kinds (doctor/findings.py) in words
KIND_WORDS = {
    "startup_memory": "not enough memory at start-up",
    "cuda_oom": "CUDA out of memory",
    "illegal_memory_access": "illegal memory access on the GPU",
    "nccl": "the GPUs could not communicate (NCCL)",
    "engine_dead": "the engine core died",
    "arg_error": "the engine rejected its arguments",
    "exception": "the engine stopped on an exception",
    "exited": "the engine exited",
    "killed": "the engine was killed",
    "stopped": "the engine was stopped",
}


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def engine_words(report: DoctorReport) -> str:
    ln = report.launch
    if ln is None:
        return "engine unknown"
    eng = ln.engine
    name = {"sglang": "SGLang", "vllm": "vLLM"}.get(eng.name or "", "engine")
    if eng.version:
        return f"{name} {eng.version}"
    fam = (eng.format_family or "").rpartition("-")[2]
    return f"{name} (log lines of {fam})" if fam else name


def _which(report: DoctorReport) -> str:
    s: LaunchSummary | None = next(
        (x for x in report.launches if x.index == report.diagnosed), None
    )
    if s is None:
        return ""
    when = f", started {s.start_time}" if s.start_time else ""
    return f"launch {s.index} of {report.launches_total} (lines {s.first_line}-{s.last_line}{when})"


def verdict(report: DoctorReport) -> Group:
    word, style = _STATUS[report.status]
    rc = report.root_cause
    which = _which(report)
    if report.status == "failed" and rc is not None:
        head = f"{which}: {KIND_WORDS.get(rc.kind, rc.kind)}"
        if rc.error is not None:
            head += f": {first_sentence(rc.error.message)}"
    elif report.status in ("ok", "warning"):
        n = sum(f.severity != "info" for f in report.findings)
        head = f"{which} started" + (f"; {n} warning(s)" if n else "")
    elif report.status == "incomplete":
        head = f"{which}: the log ends before the launch started or failed"
    else:
        head = f"{report.path}: no engine launch in this file"
    parts = [Para(head.lstrip(": "), prefix=f"{word}: ", prefix_style=style)]
    if report.fix is not None:
        fx = report.fix
        parts.append(
            Para(
                " ".join(f"{ch.flag} {ch.new}" for ch in fx.best.changes),
                prefix="  - fix: ",
                indent=4,
            )
        )
    return Group(*parts)


def measured_table(report: DoctorReport) -> Grid | None:
    ln = report.launch
    if ln is None or not ln.ranks:
        return None
    cols = [
        Col("rank"),
        Col("free before weights", right=True, wrap=True),
        Col("weights", right=True),
        Col("free after weights", right=True, wrap=True),
        Col("after pools", right=True, wrap=True),
        Col("CUDA graphs", right=True, wrap=True),
        Col("draft weights", right=True, wrap=True),
        Col("KV available", right=True, wrap=True),
    ]
    t = Grid(cols, "Measured per rank (GiB, as the engine printed it)")
    for r in ln.ranks:
        t.add(
            r.rank or "-",
            _g(r.free_before_weights_gib),
            _g(r.weights_gib),
            _g(r.free_after_weights_gib),
            _g(r.free_after_pools_gib),
            _g(r.graph_mem_gib),
            _g(r.draft_weights_gib),
            _g(r.kv_available_gib),
        )
    return t


def replay_table(report: DoctorReport) -> Grid | None:
    rep = report.replay
    if rep is None or not rep.checks:
        return None
    how = "calibrated on the log" if rep.calibrated else "not calibrated"
    t = Grid(
        [
            Col("pool", wrap=True),
            Col("logged", right=True),
            Col("replayed", right=True),
            Col("gap", right=True),
        ],
        f"Pools: logged vs replayed ({rep.engine}, {how})",
    )
    for chk in rep.checks:
        t.add(
            chk.name,
            f"{chk.logged:,.6g} {chk.unit}",
            f"{chk.predicted:,.6g}",
            Cell(f"{chk.gap_pct:+.2f} %", "bold red" if chk.flagged else ""),
        )
    return t


# findings that change what the diagnosis is about: said before it, not after
FIRST = ("stale_log", "command_mismatch")


def render(report: DoctorReport, console: Console | None = None) -> None:
    c = console or make_console()
    for f in report.findings:
        if f.code in FIRST:
            c.print(Para(f.detail, prefix=f"{f.title.upper()}: ", prefix_style="bold red"))
    c.print(verdict(report))
    c.print(
        Para(
            f"{report.path}: {report.lines:,} lines, {report.launches_total} launch(es); "
            f"{engine_words(report)}"
        )
    )
    for note in report.notes:
        c.print(Para(note, prefix="note: ", prefix_style="yellow"))
    for block in (measured_table(report), replay_table(report)):
        if block is not None:
            c.print()
            c.print(block)
    rc = report.root_cause
    if rc is not None:
        c.print()
        c.print(Text(f"Root cause: {KIND_WORDS.get(rc.kind, rc.kind)}", style="bold red"))
        c.print(Para(rc.summary, prefix="  "))
        if rc.error is not None:
            c.print(Para(rc.error.message[:500], prefix=f"  line {rc.error.at.line}: ", indent=4))
        if rc.consumer:
            c.print(
                Para(
                    f"{rc.consumer}" + (f": {rc.detail}" if rc.detail else ""),
                    prefix="  consumer: ",
                    indent=4,
                )
            )
        if rc.flags:
            c.print(Para(", ".join(rc.flags), prefix="  flags: ", indent=4))
    fx = report.fix
    if fx is not None:
        src = (
            "re-planned on this log's measured memory"
            if fx.source == "replay"
            else "from the log's own figures"
        )
        c.print()
        c.print(Text(f"Fix ({src})", style="bold"))
        for i, opt in enumerate([fx.best, *fx.alternatives]):
            c.print(Para(opt.why, prefix=f"  {'fix' if i == 0 else 'or'}: ", indent=4))
        if fx.command:
            c.print()
            c.print(Text("The fixed command:", style="bold"))
            plain(c, command_block(fx.command))
    later = [f for f in report.findings if f.code not in FIRST]
    if later:
        c.print()
    for f in later:
        line = f"{f.title}: {f.detail}" + (f" (line {f.at.line})" if f.at is not None else "")
        c.print(
            Para(line, prefix=f"[{_MARK[f.severity]}] ", indent=4, prefix_style=_STYLE[f.severity])
        )
    if report.replay is not None:
        for note in report.replay.notes:
            c.print(Para(note, prefix="  replay: ", indent=4, style="dim"))
    c.print()
    c.print(verdict(report))
