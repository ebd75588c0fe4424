"""Process identity from /proc, so servefit signals only processes it started.

A pid alone is not an identity: after a process exits the kernel can hand its pid to an
unrelated program. A run therefore records, for the engine it started, the pid, the process
group (the engine is a session leader, so pgid == pid) and the start time in clock ticks since
boot (/proc/<pid>/stat field 22), and every process of the run inherits the environment marker
SERVEFIT_RUN_ID=<run id>. Before any signal, the leader's start time must match, or, once the
leader is gone, the group's members must carry the marker.

A process can leave the engine's group (setsid(), start_new_session=True, a daemon's double
fork) but not its environment: the marker read from /proc/<pid>/environ is what makes it the
run's (`marked_processes`), and it is checked again through a pidfd right before the signal
(`signal_marked`), so a pid reused in between is never hit. Only our own user's (or root's)
environments are readable, which is all a user's runs start.

Engines run on Linux; elsewhere the /proc reads return None and callers fall back to signal 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping

RUN_MARKER = "SERVEFIT_RUN_ID"
_PROC = "/proc"
# prctl(2) options (linux/prctl.h): orphaned descendants re-parent to a child subreaper, not init.
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


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


def pgid_of(pid: int) -> int | None:
    """`pid`'s process group (None when gone or unreadable)."""
    info = _state_and_pgid(pid)
    return info[1] if info is not None else None


def parent_of(pid: int) -> int | None:
    """`pid`'s parent (proc(5) field 4; None when gone or unreadable)."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 2:
        return None
    try:
        return int(fields[1])
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
    for name in _pid_names():
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


def marked_processes(run_id: str) -> list[int]:
    """Live processes carrying SERVEFIT_RUN_ID=`run_id`, in the engine's group or out of it;
    never the calling process (a `servefit stop` typed in a shell of the run must finish)."""
    if not run_id or not os.path.exists(f"{_PROC}/self/environ"):
        return []
    # One exact entry among the NUL-separated ones: "RUN=x" must not match "RUN=x2".
    needle = f"\0{RUN_MARKER}={run_id}\0".encode()
    me = os.getpid()
    found = []
    for name in _pid_names():
        pid = int(name)
        if pid == me:
            continue
        try:
            with open(f"{_PROC}/{pid}/environ", "rb") as fh:
                raw = fh.read()
        except OSError:  # gone, or another user's
            continue
        if needle in b"\0" + raw + b"\0" and is_alive(pid):
            found.append(pid)
    return sorted(found)


def _pid_names() -> list[str]:
    try:
        return [n for n in os.listdir(_PROC) if n.isdigit()]
    except OSError:
        return []


def signal_marked(pid: int, run_id: str, signum: int) -> bool:
    """Send `signum` to `pid` only while it carries the run's marker. The pidfd is opened
    before the marker is read: if the process exits and its pid is reused in between, the
    signal goes to the pidfd's (dead) process and fails, never to the newcomer."""
    pidfd: int | None = None
    with contextlib.suppress(OSError, AttributeError):  # no pidfd (kernel < 5.3, not Linux)
        pidfd = os.pidfd_open(pid)
    try:
        if run_marker(pid) != run_id or not is_alive(pid):
            return False
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signum)
        else:
            os.kill(pid, signum)
    except OSError:  # gone (ESRCH) or not ours (EPERM)
        return False
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return True


def reap(seen: Mapping[int, int | None]) -> None:
    """Collect the exit status of those of `seen` (pid -> start ticks) that ended as zombie
    children of this process: orphans a subreaper adopted. The start time must still match,
    so a pid reused since is left alone. The caller leaves out children it started itself
    (the engine): their status belongs to their subprocess.Popen."""
    me = os.getpid()
    for pid, ticks in seen.items():
        if ticks is None or start_ticks(pid) != ticks or parent_of(pid) != me:
            continue
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


_subreaper_lock = threading.Lock()
_subreaper_users = 0
_subreaper_before = False


def _prctl(option: int, value: int | ctypes.c_int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        arg = ctypes.byref(value) if isinstance(value, ctypes.c_int) else ctypes.c_ulong(value)
        return int(libc.prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError, TypeError):
        return False


def is_subreaper() -> bool:
    out = ctypes.c_int(0)
    return _prctl(_PR_GET_CHILD_SUBREAPER, out) and out.value != 0


@contextlib.contextmanager
def child_subreaper() -> Iterator[bool]:
    """While inside, this process is a child subreaper (Linux): a process of the engine whose
    parent exits (a daemon's double fork) re-parents to it instead of init, so it stays a
    descendant and its zombie is collected here. Yields whether that holds; elsewhere False,
    silently. Counted, so supervisors sharing one process (tests) leave the flag as it was
    found once the last one is done."""
    global _subreaper_users, _subreaper_before
    with _subreaper_lock:
        if _subreaper_users == 0:
            _subreaper_before = is_subreaper()
            active = _subreaper_before or _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        else:
            active = is_subreaper()
        _subreaper_users += 1
    try:
        yield active
    finally:
        with _subreaper_lock:
            _subreaper_users -= 1
            if _subreaper_users == 0 and not _subreaper_before:
                _prctl(_PR_SET_CHILD_SUBREAPER, 0)


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
