"""Whose server answers on a port: the listening sockets of /proc/net/tcp and tcp6, and the
processes holding them (/proc/<pid>/fd links `socket:[inode]`).

Readiness counts only answers from the run's own engine (supervisor.py). Two ways were open:
wait for the engine's own ready line in its log before a probe counts, or check that the socket
that answered belongs to the run. The socket is the robust one: it is the same on every engine
and release (the ready lines differ per release and a wrapper script may print none), and it
cannot be fooled by a foreign server that answers while the engine still loads, nor by an
engine that prints "ready" and then fails to bind its port. Only where ownership cannot be seen
(no /proc, a listener of another user or of a container runtime whose file descriptors are not
readable) does readiness fall back to the engine's own ready line.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterable

from servefit.frozen import frozen
from servefit.launch import procs

_TABLES = (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6))
_LISTEN = "0A"  # TCP_LISTEN in include/net/tcp_states.h
_WILDCARDS = frozenset({"0.0.0.0", "::"})


@frozen
class Listener:
    address: str  # as inet_ntop writes it: "127.0.0.1", "::", "::ffff:127.0.0.1"
    port: int
    inode: str


@frozen
class Owner:
    """Who holds the sockets a probe of host:port can reach."""

    ours: bool
    pid: int | None = None  # a foreign holder, when its process could be found
    name: str = ""
    why: str = ""  # why ownership could not be told (not ours, no foreign pid)

    @property
    def foreign(self) -> bool:
        return not self.ours and self.pid is not None


def _address(hex_addr: str, family: int) -> str:
    raw = bytes.fromhex(hex_addr)
    if sys.byteorder == "little":  # the kernel prints each 32-bit word in host order
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(family, raw)


def listeners(port: int) -> list[Listener] | None:
    """Listening TCP sockets on `port` in this network namespace; None without /proc/net."""
    found: list[Listener] = []
    readable = False
    for table, family in _TABLES:
        try:
            with open(table, encoding="ascii") as fh:
                readable = True
                next(fh, None)
                for row in fh:
                    cols = row.split()
                    if len(cols) < 10 or cols[3] != _LISTEN:
                        continue
                    addr, _, hex_port = cols[1].rpartition(":")
                    if int(hex_port, 16) == port:
                        found.append(Listener(_address(addr, family), port, cols[9]))
        except (OSError, ValueError):
            continue
    return found if readable else None


def holders(inodes: Iterable[str], pids: Iterable[int] | None = None) -> dict[str, int]:
    """inode -> a pid that holds that socket, searched among `pids` (all processes when
    None). Processes whose descriptors cannot be read (another user's) are passed over."""
    targets = {f"socket:[{i}]": i for i in inodes}
    found: dict[str, int] = {}
    if not targets:
        return found
    if pids is None:
        pids = (int(n) for n in _proc_pids())
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                inode = targets.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if inode is not None and inode not in found:
                found[inode] = pid
                if len(found) == len(targets):
                    return found
    return found


def _proc_pids() -> list[str]:
    try:
        return [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def _targets(host: str, port: int) -> set[str]:
    """The addresses a connection to host:port goes to."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return {host}
    return {str(info[4][0]) for info in infos}


def _reaches(listener: Listener, targets: set[str]) -> bool:
    addr = listener.address
    if addr in _WILDCARDS or addr in targets:
        return True
    return addr.startswith("::ffff:") and addr[7:] in targets  # an IPv4-mapped address


def owner(host: str, port: int, run_pids: Iterable[int], run_id: str) -> Owner:
    """Whether the listeners a probe of host:port reaches all belong to the run: held by one of
    `run_pids` (its process group) or by a process carrying the run's marker."""
    found = listeners(port)
    if found is None:
        return Owner(False, why="/proc/net/tcp cannot be read")
    targets = _targets(host, port)
    reached = {lst.inode for lst in found if _reaches(lst, targets)}
    if not reached:
        return Owner(False, why=f"no listening socket on port {port} is visible here")
    ours = holders(reached, list(run_pids))
    rest = reached - set(ours)
    if not rest:
        return Owner(True)
    others = holders(rest)
    for pid in others.values():
        if procs.run_marker(pid) != run_id:
            return Owner(False, pid=pid, name=procs.process_name(pid))
    if set(others) == rest:
        return Owner(True)  # held by processes of the run outside its group (marker)
    return Owner(False, why="the process holding the listening socket cannot be read")
