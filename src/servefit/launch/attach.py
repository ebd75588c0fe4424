"""Attached to a run while its engine starts: live progress until ready (or until it exits with
--follow), Ctrl-C handling, and the closing summary with the diagnosis of a failure.

`servefit launch` spawns the detached supervisor (launch/supervisor.py) and then attaches here;
everything this module knows about the run it reads from the run directory.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

from rich.console import Console
from rich.markup import escape

from servefit.launch.diagnose import tail
from servefit.launch.progress import ProgressView
from servefit.launch.rundir import RunDir
from servefit.launch.schema import RunRecord
from servefit.launch.stop import stop_run

Supervisor = subprocess.Popen[bytes]


class Terminated(KeyboardInterrupt):
    """SIGTERM to `servefit launch` while attached: handled as Ctrl-C is."""


def _terminated(signum: int, _frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (kill, a service manager, a closing CI job) raises Terminated, so that it stops a
    starting engine as Ctrl-C does instead of killing servefit silently and leaving the engine
    to start without anyone waiting for it. Only the main thread can set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def attach(console: Console, run: RunDir, watcher: Supervisor, follow: bool) -> int:
    """Show the run's progress; the exit status of `servefit launch`: 0 ready (or detached
    once ready), 1 failed, 130 interrupted (143 terminated) while starting: the engine is
    stopped."""
    view = ProgressView(console, run.read_json(run.plan_path))
    rec = run.read()
    try:
        with _sigterm_as_interrupt():
            while True:
                rec = run.read()
                view.update(rec)
                if rec.state == "ready" and not follow:
                    break
                if rec.terminal:
                    wait_supervisor(watcher)
                    rec = run.read()
                    break
                if watcher.poll() is not None:
                    rec = run.read()
                    if not rec.terminal and not (rec.state == "ready" and not follow):
                        view.close()
                        return supervisor_died(console, run, rec)
                time.sleep(0.1)
    except KeyboardInterrupt as exc:
        view.close()
        return interrupted(console, run, rec, isinstance(exc, Terminated))
    view.close()
    return summary(console, run, rec)


def interrupted(console: Console, run: RunDir, rec: RunRecord, terminated: bool) -> int:
    """Ctrl-C or SIGTERM: a ready engine keeps running (detached); a starting one is stopped."""
    what = "SIGTERM" if terminated else "Ctrl-C"
    if rec.state == "ready":
        console.print(f"detached; the engine keeps running (servefit stop {run.id})")
        return 0
    console.print(f"interrupted ({what}): stopping the engine ...")
    # a second SIGTERM must not cut the stop short and leave the engine half stopped
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN) if terminated else None
    try:
        stop_run(run, by=f"{what} during start-up")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    rec = run.read()
    console.print(f"[yellow]stopped[/]: {rec.message or 'stopped'}")
    return 128 + (signal.SIGTERM if terminated else signal.SIGINT)


def wait_supervisor(watcher: Supervisor, timeout_s: float = 60.0) -> None:
    """The supervisor exits once it has recorded the exit and diagnosed the log."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        watcher.wait(timeout=timeout_s)


def supervisor_died(console: Console, run: RunDir, rec: RunRecord) -> int:
    """The supervisor is gone while the run is not finished: record the failure, show why, and
    stop the engine it was watching."""
    console.print(f"[red]the supervisor of run {run.id} exited unexpectedly[/]")
    lines = tail(run.supervisor_log_path, 20)
    for line in lines:
        console.print(f"  {run.redactor.text(line)}", markup=False)
    with run.update() as final:
        if not final.terminal:
            final.state = "failed"
            final.message = "the supervisor exited unexpectedly" + (
                f": {lines[-1]}" if lines else ""
            )
    if rec.pid:
        stop_run(run, by="servefit launch (supervisor failed)")
    return 1


def summary(console: Console, run: RunDir, rec: RunRecord) -> int:
    """The closing lines of a launch: where it serves, or how it ended and the diagnosis."""
    if rec.state == "ready":
        took = rec.timings.time_to_ready_s
        model = f" serving {rec.served_model}" if rec.served_model else ""
        console.print(f"[green]ready[/] after {took:.1f} s: {rec.url}{escape(model)}")
        if rec.auth_note:
            console.print(f"  [yellow]![/] only /health answered: {escape(rec.auth_note)}")
        console.print(
            f"  logs: servefit logs {run.id}    stop: servefit stop {run.id}    run: {run.path}"
        )
        return 0
    colour = "red" if rec.state == "failed" else "yellow"
    # the message quotes the engine's own lines: plain text, never markup
    console.print(f"[{colour}]{rec.state}[/]: {escape(rec.message or '')}", markup=True)
    if rec.state == "failed":
        text = None
        with contextlib.suppress(OSError):
            text = run.diagnosis_path.read_text(encoding="utf-8")
        if text:
            console.print("[bold]diagnosis[/]")
            console.file.flush()
            # already laid out (diagnosis.txt): printed as written, no markup
            console.file.write(text.rstrip() + "\n")
            console.file.flush()
        elif rec.diagnosis:
            console.print(f"diagnosis: {rec.diagnosis}", markup=False)
    console.print(f"  log: {run.log_path}")
    return 1
