"""Stopping a run: only the process group servefit started, never anything found by name.

SIGTERM to the group, a grace period, SIGKILL to whatever is left; then wait until the port is
closed and, where NVML works, until the GPUs no longer list the run's processes. The group is
signalled only while it is provably the run's (procs.py: the leader's start time matches, or the
members carry the run's SERVEFIT_RUN_ID marker).
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servefit.launch import procs
from servefit.launch.liveness import log_errors, owned_members, supervisor_alive, unobserved
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


def terminate_group(
    record: RunRecord, grace_s: float, kill_wait_s: float = 5.0
) -> tuple[list[str], bool, bool]:
    """SIGTERM, grace, SIGKILL. Returns (signals sent, escalated, group gone)."""
    sent: list[str] = []
    if not owned_members(record):
        return sent, False, True
    assert record.pgid is not None
    procs.signal_group(record.pgid, signal.SIGTERM)
    sent.append("SIGTERM")
    if _wait(lambda: not owned_members(record), grace_s):
        return sent, False, True
    procs.signal_group(record.pgid, signal.SIGKILL)
    sent.append("SIGKILL")
    return sent, True, _wait(lambda: not owned_members(record), kill_wait_s)


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
    result = StopResult(run_id=run.id, was_running=bool(owned_members(rec)), notes=notes)
    before = set(owned_members(rec))
    if rec.pid:
        before.add(rec.pid)
    if result.was_running:
        result.signals, result.escalated, gone = terminate_group(rec, grace)
        if not gone:
            result.notes.append("some processes of the run survived SIGKILL (uninterruptible I/O?)")
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
            final.stop.note = "; ".join(result.notes) or None
        if not final.terminal and not owned_members(final):
            final.timings.ended = final.timings.ended or time.time()
            if result.was_running:
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
