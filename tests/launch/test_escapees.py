"""Processes of a run that leave the engine's process group: a daemon's double fork with setsid()
in between, a start_new_session=True helper, one that ignores SIGTERM, one whose parent exits.
They still carry the run's SERVEFIT_RUN_ID, and that is how stop, the supervisor, `runs` and
the port claim find them. The engine is the stand-in (tests/standin/engine.py --escape, not an
engine); every process these tests start carries a marker the fixtures end by."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest

from servefit.hardware.nvml import GPUProcess, LocalGPU, LocalGPUs
from servefit.launch import portlock, procs
from servefit.launch.command import parse_launch
from servefit.launch.rundir import RunDir, list_runs
from servefit.launch.stop import port_open, stop_run
from servefit.launch.supervisor import prepare_run
from tests.clihelp import run as cli
from tests.launch.conftest import (
    FAST,
    PYTHON,
    REPO,
    Supervised,
    end_marked,
    free_port,
    standin_argv,
    wait_for,
)
from tests.launch.test_supervisor_faults import _no_gpus
from tests.standin.engine import ESCAPEE_CODE

ESCAPEE_LINE = re.compile(r"^stand-in escapee (\S+) pid (\d+)$", re.MULTILINE)
MARKER_NOTE = "carried the run's SERVEFIT_RUN_ID and were ended too"


def _escapees(s: Supervised, count: int) -> dict[str, int]:
    """The stand-in's escapees by kind, once it has named `count` of them in its log."""
    assert wait_for(lambda: len(ESCAPEE_LINE.findall(s.log())) >= count, 60), s.log()
    return {kind: int(pid) for kind, pid in ESCAPEE_LINE.findall(s.log())}


def _gone(pid: int) -> bool:
    """Ended and collected: not even a zombie is left."""
    return not os.path.exists(f"/proc/{pid}")


def _holding(pid: int, stuck: int) -> LocalGPUs:
    """One GPU as NVML would list it: `pid` holds memory while it lives; `stuck` is listed
    whatever happens (a driver that has not released it yet)."""
    held = [GPUProcess(stuck, "python", 1024)]
    if procs.is_alive(pid):
        held.append(GPUProcess(pid, "python", 1024))
    return LocalGPUs(devices=(LocalGPU(0, "stand-in", 49140, 1000, 48140, tuple(held)),))


@pytest.fixture
def marker() -> Iterator[str]:
    """A run id for processes started outside any run directory, ended by it afterwards."""
    run_id = f"test-{uuid.uuid4().hex}"
    yield run_id
    end_marked(run_id)


def _sleeper(run_id: str) -> subprocess.Popen[bytes]:
    """A process of the run in a session of its own, asleep until killed."""
    env = {**os.environ, procs.RUN_MARKER: run_id}
    return subprocess.Popen([PYTHON, "-c", ESCAPEE_CODE], env=env, start_new_session=True)


# ---- identity: the marker, exactly


def test_only_the_exact_marker_makes_a_process_the_runs(marker):
    ours, other = _sleeper(marker), _sleeper(marker + "0")  # a run id that extends ours
    try:
        assert procs.marked_processes(marker) == [ours.pid]
        assert not procs.signal_marked(other.pid, marker, signal.SIGKILL)
        assert procs.is_alive(other.pid)  # untouched: it is not this run's
        assert procs.signal_marked(ours.pid, marker, signal.SIGKILL)
        assert ours.wait(10) == -signal.SIGKILL
    finally:
        end_marked(marker + "0")
        other.wait(10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_an_orphan_re_parents_to_the_subreaper_and_is_collected_there(marker):
    # the parent prints its child's pid and exits: the child is an orphan at once
    code = (
        "import os, time\npid = os.fork()\nif pid == 0:\n"
        "    null = os.open(os.devnull, os.O_RDWR)\n"  # the pipes are read to their end
        "    os.dup2(null, 1)\n    os.dup2(null, 2)\n"
        "    time.sleep(60)\nprint(pid)\n"
    )
    was = procs.is_subreaper()
    with procs.child_subreaper() as active:
        assert active and procs.is_subreaper()
        env = {**os.environ, procs.RUN_MARKER: marker}
        out = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, check=True)
        orphan = int(out.stdout)
        assert procs.is_alive(orphan) and procs.parent_of(orphan) == os.getpid()
        end_marked(marker)
        assert _gone(orphan)  # its zombie was collected here, not left to init
    assert procs.is_subreaper() == was  # the flag is as it was found


# ---- stop


def test_stop_ends_a_daemon_and_a_new_session_child_that_ignores_sigterm(supervise):
    port = free_port()
    s = supervise(standin_argv("sglang", port, "none", "--escape", "daemon,session-ignore-sigterm"))
    esc = _escapees(s, 2)
    daemon, session = esc["daemon"], esc["session-ignore-sigterm"]
    rec = s.record()
    assert rec.pgid is not None
    assert procs.run_marker(daemon) == procs.run_marker(session) == rec.id
    # alive, out of the engine's group, and the daemon (its parent exited) adopted by the
    # supervisor, a child subreaper: in this test process
    assert procs.is_alive(daemon) and procs.is_alive(session)
    assert daemon not in procs.group_members(rec.pgid)
    assert session not in procs.group_members(rec.pgid)
    assert procs.parent_of(daemon) == os.getpid()
    result = stop_run(
        s.run, grace_s=0.5, gpu_timeout_s=0.2, gpus_fn=lambda: _holding(daemon, session)
    )
    assert result.signals == ["SIGTERM", "SIGKILL"] and result.escalated
    assert result.escapees == sorted([daemon, session])
    assert not procs.is_alive(daemon) and not procs.is_alive(session)
    # both held the listening socket and GPU memory: the port and GPU waits cover them (the
    # session child that NVML still lists is reported by its pid)
    assert result.port_closed is True and not port_open("127.0.0.1", port)
    assert result.gpu_released is False
    assert f"GPU memory still held by pid {session} after 0.2 s" in result.notes
    pids = ", ".join(map(str, sorted([daemon, session])))
    assert f"2 processes outside the engine's process group {MARKER_NOTE}: pid {pids}" in (
        result.notes
    )
    final = s.join()
    assert final.state == "stopped" and procs.marked_processes(final.id) == []
    assert portlock.holder(s.run.path.parent, port) is None


def test_an_engine_that_exits_leaving_a_daemon_has_it_ended_by_the_supervisor(supervise):
    port = free_port()
    s = supervise(standin_argv("sglang", port, "exit-when-serving", "--escape", "daemon"))
    final = s.join()
    daemon = _escapees(s, 1)["daemon"]
    assert final.exit_code == 0 and final.state == "failed"
    assert final.leftover_pids == [daemon]  # found alive, outside the group, by its marker
    assert not procs.is_alive(daemon) and _gone(daemon)
    assert not port_open("127.0.0.1", port)  # it held the listening socket
    assert portlock.holder(s.run.path.parent, port) is None  # given up only once it was gone


# ---- runs and stop after the engine exited


def test_runs_shows_the_survivors_of_an_exited_engine_and_stop_ends_them(capsys, runs_root):
    port = free_port()
    launch = parse_launch(["python", "-m", "sglang.launch_server", "--port", str(port)])
    run = prepare_run(runs_root, launch)
    engine, survivor = _sleeper(run.id), _sleeper(run.id)
    try:
        with run.update() as rec:  # a run whose supervisor died (not this pid's start time)
            rec.pid = rec.pgid = engine.pid
            rec.pid_start_ticks = procs.start_ticks(engine.pid)
            rec.watcher_pid, rec.watcher_start_ticks = os.getpid(), 1
            rec.state = "ready"
        os.killpg(engine.pid, signal.SIGKILL)  # the engine ends; what it started in a new session
        engine.wait(10)  # does not

        code, out, _ = cli(capsys, "runs", "--runs-dir", str(runs_root))
        [row] = [line for line in out.splitlines() if line.startswith(run.id)]
        assert code == 0
        assert row.split("  ")[1] == f"failed (exited, 1 process survives: pid {survivor.pid})"
        # the survivor may hold the port: a second launch on it is refused, naming the run
        with pytest.raises(portlock.PortTaken, match=f"taken by run {run.id} \\(failed\\)"):
            prepare_run(runs_root, launch)

        code, out, _ = cli(capsys, "stop", "--runs-dir", str(runs_root), "--port-timeout", "0.1")
        assert code == 0 and out.splitlines()[0] == (
            f"{run.id}: the engine had exited (exit status unknown); sent SIGTERM to 1 "
            f"surviving process: pid {survivor.pid}"
        )
        assert survivor.wait(10) == -signal.SIGTERM
        final = run.read()
        assert final.state == "failed" and final.stop.signals == ["SIGTERM"]
        assert final.stop.note.startswith(f"1 process survived the engine: pid {survivor.pid}")
        code, out, _ = cli(capsys, "runs", "--runs-dir", str(runs_root))
        [row] = [line for line in out.splitlines() if line.startswith(run.id)]
        assert row.split("  ")[1] == "failed"
        prepare_run(runs_root, launch)  # nothing of it lives: the claim is taken over
    finally:
        end_marked(run.id)
        for proc in (engine, survivor):
            proc.wait(10)


# ---- two launches on one port


def test_two_launches_racing_for_a_port_leave_nothing_of_either_behind(runs_root):
    port = free_port()
    argv = standin_argv("sglang", port, "none", "--escape", "daemon")
    start = threading.Barrier(2)
    won: list[RunDir] = []
    refused: list[str] = []

    def launch() -> None:
        start.wait(10)
        try:
            run = prepare_run(
                runs_root, parse_launch(argv, "sglang"), extra_env={"PYTHONPATH": str(REPO)},
                config=FAST,
            )  # fmt: skip
        except portlock.PortTaken as exc:
            refused.append(str(exc))
        else:
            won.append(run)

    threads = [threading.Thread(target=launch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    [run] = won
    assert refused == [
        f"port {port} is taken by run {run.id} (starting); stop it first "
        f"(servefit stop {run.id}) or choose another --port"
    ]
    assert [r.id for r in list_runs(runs_root)] == [run.id]  # the loser wrote nothing lasting
    s = Supervised(run).start()
    try:
        daemon = _escapees(s, 1)["daemon"]
        assert procs.is_alive(daemon)
        result = stop_run(run, grace_s=3.0, gpus_fn=_no_gpus)
        assert result.escapees == [daemon] and not procs.is_alive(daemon)
        assert s.join().state == "stopped"
    finally:
        end_marked(run.id)
        s.thread.join(10)
    assert procs.marked_processes(run.id) == [] and not port_open("127.0.0.1", port)
    assert portlock.holder(runs_root, port) is None
