"""Is a run still alive? Only what is provably the run's counts (procs.py): the engine's
group while its leader's start time matches, or members carrying the run's marker once the
leader is gone; any process carrying the marker outside the group (one that called setsid(),
a daemon); its supervisor while the pid's start time matches the one it recorded.

A supervisor that died (SIGKILL, the OOM killer, a reboot) leaves a record that says
`ready` or `loading_weights` forever. Whoever reads such a record next (`runs`, `logs -f`,
`stop`) settles it (`settle`): while the engine still runs it stays as it is (shown "no
supervisor"); once the engine is gone too, the run is recorded as ended unobserved: `failed`
(or `stopped` when a stop had been asked for), exit status unknown (only the engine's parent,
the supervisor, could read it), with the first error line the engine printed, if any.
"""

from __future__ import annotations

import contextlib
import os
import time

from servefit.launch import procs
from servefit.launch.events import LogProgress, split_lines
from servefit.launch.rundir import RunDir
from servefit.launch.schema import RunRecord

# A run is prepared, then its supervisor records its own pid within moments: a run younger
# than this without a supervisor pid is still starting, not dead.
SPAWN_GRACE_S = 120.0


def owned_members(record: RunRecord) -> list[int]:
    """Live processes of the run's group that are provably the run's."""
    if record.pgid is None:
        return []
    members = procs.group_members(record.pgid)
    if not members:
        return []
    if procs.same_process(record.pid, record.pid_start_ticks):
        return members
    # The leader is gone (or its pid was reused outside the group): trust only marked members.
    return [pid for pid in members if procs.run_marker(pid) == record.id]


def run_processes(record: RunRecord) -> list[int]:
    """Every live process of the run: its verified group and whatever carries its marker
    outside it (a process that left the group still holds the port and GPU memory)."""
    return sorted(set(owned_members(record)) | set(procs.marked_processes(record.id)))


def engine_exited(record: RunRecord) -> bool:
    """The engine's main process was started and is gone (its pid is not the one recorded)."""
    return record.pid is not None and not procs.same_process(record.pid, record.pid_start_ticks)


def survivors(record: RunRecord) -> list[int]:
    """Processes of the run still alive although its engine's main process has exited."""
    return run_processes(record) if engine_exited(record) else []


def supervisor_alive(rec: RunRecord, now: float | None = None) -> bool:
    """The run's supervisor runs, or is about to (the run was just prepared)."""
    if rec.watcher_pid is None:
        age = (now if now is not None else time.time()) - rec.timings.created
        return rec.pid is None and age < SPAWN_GRACE_S
    if rec.watcher_start_ticks is None:  # a record written before start times were kept
        return procs.is_alive(rec.watcher_pid)
    return procs.same_process(rec.watcher_pid, rec.watcher_start_ticks)


def run_is_live(rec: RunRecord, now: float | None = None) -> bool:
    """The run still holds what it started: a process of it lives (in its engine's group or
    marked outside it), or it has not ended and its supervisor runs."""
    if run_processes(rec):
        return True
    return not rec.terminal and supervisor_alive(rec, now)


# The end of engine.log read for the error lines of an engine that ended unobserved.
LOG_TAIL_BYTES = 1 << 20


def unobserved(rec: RunRecord, log_errors: list[str]) -> str:
    """The message of a run whose engine ended while no supervisor watched it."""
    msg = (
        f"the engine ended while no supervisor watched it (last seen {rec.state.replace('_', ' ')});"
        " exit status unknown"
    )
    return f"{msg}: {log_errors[0]}" if log_errors else msg


def log_errors(run: RunDir, engine: str) -> list[str]:
    """The error lines in the last MiB of the run's engine.log."""
    try:
        with open(run.log_path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - LOG_TAIL_BYTES))
            data = fh.read()
    except OSError:
        return []
    progress = LogProgress(engine)
    lines, _ = split_lines(data + b"\n")
    for line in lines:
        progress.feed(line)
    return progress.facts.errors


def settle(run: RunDir, rec: RunRecord) -> RunRecord:
    """`rec`, or, when its supervisor and its engine are both gone without the record saying
    so, the record of a run that ended unobserved (written back when it can be)."""
    if rec.terminal or supervisor_alive(rec) or owned_members(rec):
        return rec
    errors = log_errors(run, rec.engine)
    final = rec.model_copy(deep=True)  # the truth, shown even when it cannot be written
    _end_unobserved(final, errors)
    with contextlib.suppress(OSError, ValueError), run.update() as disk:
        _end_unobserved(disk, errors)
        final = disk
    return final


def _end_unobserved(rec: RunRecord, errors: list[str]) -> None:
    if rec.terminal or supervisor_alive(rec) or owned_members(rec):
        return
    rec.message = unobserved(rec, errors)
    rec.state = "stopped" if rec.stop_requested else "failed"
    rec.timings.ended = rec.timings.ended or time.time()
