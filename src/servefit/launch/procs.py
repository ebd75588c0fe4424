"""Process identity from /proc, so servefit signals only processes it started.

A pid alone is not an identity: after a process exits the kernel can hand its pid to an
unrelated program. A run therefore records, for the engine it started, the pid, the process
group (the engine is a session leader, so pgid == pid) and the start time in clock ticks since
boot (/proc/<pid>/stat field 22), and every process of the run inherits the environment marker
SERVEFIT_RUN_ID=<run id>. Before any signal, the leader's start time must match, or, once the
leader is gone, the group's members must carry the marker.

Engines run on Linux; elsewhere the /proc reads return None and callers fall back to signal 0.
"""

from __future__ import annotations

import contextlib
import os
import signal

RUN_MARKER = "SERVEFIT_RUN_ID"
_PROC = "/proc"


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (which may contain spaces)."""
    try:
        with open(f"{_PROC}/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            raw = fh.read()
    except OSError:
        return None
    end = raw.rfind(")")
    if end < 0:
        return None
    # fields[0] is the state (field 3 of proc(5)); field N of proc(5) is fields[N - 3].
    return raw[end + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks after boot (proc(5) field 22); None if unknown."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def _state_and_pgid(pid: int) -> tuple[str, int] | None:
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 3:
        return None
    try:
        return fields[0], int(fields[2])
    except ValueError:
        return None


def is_alive(pid: int | None) -> bool:
    """True if `pid` exists and is not a zombie (an exited child nobody has reaped yet)."""
    if not pid or pid <= 0:
        return False
    info = _state_and_pgid(pid)
    if info is not None:
        return info[0] not in ("Z", "X")
    if os.path.isdir(_PROC) and os.path.exists(f"{_PROC}/self"):
        return False  # /proc works and has no such pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def same_process(pid: int | None, ticks: int | None) -> bool:
    """`pid` is alive and is the process that started at `ticks` (not a reused pid)."""
    if not is_alive(pid):
        return False
    now = start_ticks(pid)  # type: ignore[arg-type]
    if now is None or ticks is None:
        return now is None and ticks is None  # no /proc: signal 0 is all there is
    return now == ticks


def group_members(pgid: int | None) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`."""
    if not pgid or pgid <= 0:
        return []
    if not os.path.exists(f"{_PROC}/self/stat"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for name in os.listdir(_PROC):
        if not name.isdigit():
            continue
        info = _state_and_pgid(int(name))
        if info is not None and info[1] == pgid and info[0] not in ("Z", "X"):
            members.append(int(name))
    return sorted(members)


def _nul_separated(pid: int, name: str) -> list[str] | None:
    try:
        with open(f"{_PROC}/{pid}/{name}", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return [item.decode("utf-8", "surrogateescape") for item in raw.split(b"\0") if item]


def cmdline(pid: int) -> list[str]:
    """`pid`'s argv ([] when gone or unreadable)."""
    return _nul_separated(pid, "cmdline") or []


def environ(pid: int) -> dict[str, str]:
    """`pid`'s environment as it started ({} when gone or unreadable: only its user, or root,
    may read it)."""
    out: dict[str, str] = {}
    for item in _nul_separated(pid, "environ") or []:
        name, eq, value = item.partition("=")
        if eq:
            out[name] = value
    return out


def run_marker(pid: int) -> str | None:
    """The SERVEFIT_RUN_ID in `pid`'s environment; None when absent or unreadable."""
    return environ(pid).get(RUN_MARKER)


def process_name(pid: int) -> str:
    try:
        with open(f"{_PROC}/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def describe_exit(returncode: int | None) -> str:
    """'exited with code 1' / 'was killed by SIGKILL' for a Popen returncode."""
    if returncode is None:
        return "exit status unknown"
    if returncode < 0:
        return f"was killed by {signal_name(-returncode)}"
    return f"exited with code {returncode}"


def signal_group(pgid: int, signum: int) -> bool:
    """Send `signum` to process group `pgid`; False if the group no longer exists."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def kill_pid(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)
