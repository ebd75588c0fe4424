"""Is a run still alive? Only what is provably the run's counts (procs.py): the engine's
group while its leader's start time matches, or members carrying the run's marker once the
leader is gone; its supervisor while the pid's start time matches the one it recorded.
"""

from __future__ import annotations

import time

from servefit.launch import procs
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


def supervisor_alive(rec: RunRecord, now: float | None = None) -> bool:
    """The run's supervisor runs, or is about to (the run was just prepared)."""
    if rec.watcher_pid is None:
        age = (now if now is not None else time.time()) - rec.timings.created
        return rec.pid is None and age < SPAWN_GRACE_S
    return procs.same_process(rec.watcher_pid, rec.watcher_start_ticks)


def run_is_live(rec: RunRecord, now: float | None = None) -> bool:
    """The run still holds what it started: its engine's group has members, or it has not
    ended and its supervisor runs."""
    if owned_members(rec):
        return True
    return not rec.terminal and supervisor_alive(rec, now)
