"""Stopping a run: only what servefit started, never anything found by name.

SIGTERM to the engine's process group and to each process carrying the run's SERVEFIT_RUN_ID
outside it (one that called setsid(): a daemon, a start_new_session=True helper), a grace
period, SIGKILL to whatever is left; then wait until the port is closed and, where NVML works,
until the GPUs no longer list any of those processes. The group is signalled only while it is
provably the run's (procs.py: the leader's start time matches, or the members carry the
marker); a process outside it only while it carries the marker (checked through a pidfd).
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servefit.launch import procs
from servefit.launch.liveness import (
    engine_exited,
    log_errors,
    owned_members,
    run_processes,
    supervisor_alive,
    unobserved,
)
from servefit.launch.rundir import RunDir
from servefit.launch.schema import RunRecord, StopInfo

_POLL_S = 0.05


@dataclass
class StopResult:
    run_id: str
    was_running: bool
    signals: list[str] = field(default_factory=list)
    escalated: bool = False
    port_closed: bool | None = None
    gpu_released: bool | None = None
    state: str | None = None
    exit: str | None = None  # "was killed by SIGTERM", ...
    notes: list[str] = field(default_factory=list)
    found: list[int] = field(default_factory=list)  # the run's processes when the stop began
    escapees: list[int] = field(default_factory=list)  # of those, outside the engine's group
    engine_exited: bool = False  # the engine's main process was gone: `found` are survivors

    @property
    def survived(self) -> str | None:
        """'2 processes survived the engine: pid 1, 2' when the engine had exited."""
        if not self.engine_exited or not self.found:
            return None
        n = len(self.found)
        pids = ", ".join(map(str, self.found))
        return f"{n} process{'es' if n != 1 else ''} survived the engine: pid {pids}"

    @property
    def group_ran(self) -> bool:
        """Members of the engine's own group were among what the stop found."""
        return bool(set(self.found) - set(self.escapees))


def escapees(record: RunRecord) -> list[int]:
    """Processes carrying the run's marker outside its engine's process group."""
    return [p for p in procs.marked_processes(record.id) if procs.pgid_of(p) != record.pgid]


def _signal_run(record: RunRecord, signum: int) -> None:
    group = owned_members(record)
    if group:
        assert record.pgid is not None
        procs.signal_group(record.pgid, signum)
    for pid in procs.marked_processes(record.id):
        # the group's members got it from killpg: a second SIGTERM can mean "force" to a server
        if not group or procs.pgid_of(pid) != record.pgid:
            procs.signal_marked(pid, record.id, signum)


def terminate_run(
    record: RunRecord, grace_s: float, kill_wait_s: float = 5.0
) -> tuple[list[str], bool, bool]:
    """SIGTERM, grace, SIGKILL, to the group and the marked processes outside it. Returns
    (signals sent, escalated, all gone)."""
    sent: list[str] = []
    if not run_processes(record):
        return sent, False, True
    _signal_run(record, signal.SIGTERM)
    sent.append("SIGTERM")
    if _wait(lambda: not run_processes(record), grace_s):
        return sent, False, True
    _signal_run(record, signal.SIGKILL)
    sent.append("SIGKILL")
    return sent, True, _wait(lambda: not run_processes(record), kill_wait_s)


def _wait(done: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        if done():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


def port_open(host: str, port: int, timeout_s: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _gpu_holders(gpus: Any, pids: set[int]) -> set[int]:
    held: set[int] = set()
    for dev in gpus.devices:
        held |= {p.pid for p in dev.processes if p.pid in pids}
    return held


def wait_gpu_release(
    pids: set[int], timeout_s: float, gpus_fn: Callable[[], Any] | None = None
) -> tuple[bool | None, str | None]:
    """(True, None) once NVML lists none of `pids`; (None, why) when NVML cannot be asked."""
    if gpus_fn is None:
        from servefit.hardware.nvml import local_gpus as gpus_fn
    gpus = gpus_fn()
    if not gpus.devices:
        return None, f"GPU release not checked: {gpus.reason or 'no GPU visible'}"
    ok = _wait(lambda: not _gpu_holders(gpus_fn(), pids), timeout_s)
    if ok:
        return True, None
    left = sorted(_gpu_holders(gpus_fn(), pids))
    return False, f"GPU memory still held by pid {', '.join(map(str, left))} after {timeout_s:g} s"


def stop_run(
    run: RunDir,
    *,
    grace_s: float | None = None,
    by: str = "servefit stop",
    port_timeout_s: float = 10.0,
    gpu_timeout_s: float = 30.0,
    record_timeout_s: float = 5.0,
    gpus_fn: Callable[[], Any] | None = None,
) -> StopResult:
    """Stop the run's engine, then record how it ended. Signals never wait on the record: the
    stop request is marked first when it can be (it is how the supervisor tells a stop from a
    crash), but a record that cannot be written (a full disk) is a note, never a reason to
    leave the engine running. An unreadable run.json raises rundir.UnreadableRecord."""
    rec = run.read()
    grace = rec.config.grace_s if grace_s is None else grace_s
    notes: list[str] = []
    try:
        with run.update() as rec:
            already_terminal = rec.terminal
            if not rec.stop_requested:
                rec.stop_requested = True
                rec.stop = StopInfo(requested_at=time.time(), by=by, grace_s=grace)
    except OSError as exc:
        already_terminal = rec.terminal
        marked = run.mark_stop_requested(by)  # the supervisor reads it when run.json is stuck
        notes.append(
            f"the stop request was not recorded in run.json: {_os_error(exc)}"
            + ("" if marked else " (nor in stop.requested)")
        )
    # The supervisor may be between "stop requested?" and spawning; it writes the pid under the
    # same lock, so wait briefly for either a pid or its final record.
    if rec.pid is None and not already_terminal and supervisor_alive(rec):
        _wait(lambda: _read(run, rec).pid is not None or _read(run, rec).terminal, record_timeout_s)
        rec = _read(run, rec)
    result = _found(rec, notes)
    before = set(result.found)
    if rec.pid:
        before.add(rec.pid)
    if result.was_running:
        result.signals, result.escalated, gone = terminate_run(rec, grace)
        if not gone:
            left = ", ".join(map(str, run_processes(rec)))
            result.notes.append(
                f"some processes of the run survived SIGKILL (uninterruptible I/O?): pid {left}"
            )
    if result.was_running or rec.state in ("ready", "capturing_graphs"):
        host = "127.0.0.1" if rec.host in ("0.0.0.0", "", "::") else rec.host
        result.port_closed = _wait(lambda: not port_open(host, rec.port), port_timeout_s)
        if not result.port_closed:
            result.notes.append(
                f"port {rec.port} still accepts connections after {port_timeout_s:g} s"
            )
    if result.was_running:
        result.gpu_released, note = wait_gpu_release(before, gpu_timeout_s, gpus_fn)
        if note:
            result.notes.append(note)
    # The supervisor records the exit status (only a parent can read it); without one, say so.
    if supervisor_alive(rec):
        _wait(lambda: _read(run, rec).terminal, record_timeout_s)
    try:
        _record_outcome(run, result, by)
    except OSError as exc:
        result.notes.append(f"the outcome was not recorded in run.json: {_os_error(exc)}")
        result.state = result.state or ("stopped" if result.was_running else rec.state)
    return result


def _found(rec: RunRecord, notes: list[str]) -> StopResult:
    """What the stop will end: the run's processes, those outside the group named in a note."""
    found = run_processes(rec)
    result = StopResult(run_id=rec.id, was_running=bool(found), notes=notes, found=found)
    result.escapees = escapees(rec) if found else []
    result.engine_exited = bool(found) and engine_exited(rec)
    if result.escapees and not result.engine_exited:
        n = len(result.escapees)
        result.notes.append(
            f"{n} process{'es' if n != 1 else ''} outside the engine's process group carried "
            f"the run's {procs.RUN_MARKER} and {'were' if n != 1 else 'was'} ended too: "
            f"pid {', '.join(map(str, result.escapees))}"
        )
    return result


def _read(run: RunDir, fallback: RunRecord | None = None) -> RunRecord:
    """The record as it is now; `fallback` when it cannot be read for a moment."""
    try:
        return run.read()
    except (OSError, ValueError):
        if fallback is None:
            raise
        return fallback


def _os_error(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _record_outcome(run: RunDir, result: StopResult, by: str) -> None:
    with run.update() as final:
        if final.stop is not None:
            final.stop.signals = result.signals
            final.stop.escalated = result.escalated
            final.stop.port_closed = result.port_closed
            final.stop.gpu_released = result.gpu_released
            notes = [result.survived] if result.survived else []
            final.stop.note = "; ".join([*notes, *result.notes]) or None
        if not final.terminal and not owned_members(final):
            final.timings.ended = final.timings.ended or time.time()
            # only escapees left: the engine itself had ended unobserved, which is no stop
            if result.was_running and result.group_ran:
                final.state = "stopped"
                final.message = (
                    f"stopped by {by} ({' then '.join(result.signals)}); "
                    "exit status unknown: the supervisor was not running"
                )
            else:  # it had ended before the stop, unobserved: not a stop (it may have crashed)
                final.message = unobserved(final, log_errors(run, final.engine))
                final.state = "failed"
        result.state = final.state
        if final.exit_signal or final.exit_code is not None:
            result.exit = (
                f"was killed by {final.exit_signal}"
                if final.exit_signal
                else f"exited with code {final.exit_code}"
            )
