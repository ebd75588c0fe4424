"""Launch faults against the stand-in engine (tests/standin/engine.py, not an engine): each fault
ends in the expected state and record, with the message a user reads, and leaves no process of
the run behind. Timeouts are the tests' moves of the supervisor's clock (conftest.Supervised),
never short real timeouts.

A full disk is simulated by making the write of a run's files raise ENOSPC (what
os.write/fsync raise when the filesystem is full); the stop marker is a new, empty file, which
a full filesystem still creates while it has inodes."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import signal
import subprocess
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from servefit.launch import portlock, procs, rundir
from servefit.launch.command import parse_launch
from servefit.launch.events import LogProgress
from servefit.launch.rundir import list_runs
from servefit.launch.schema import SupervisorConfig
from servefit.launch.stop import owned_members, stop_run
from servefit.launch.supervisor import prepare_run, spawn_supervisor
from tests.clihelp import run as cli
from tests.launch.conftest import FAST, PYTHON, REPO, free_port, standin_argv, wait_for
from tests.launch.test_supervisor_faults import _no_gpus
from tests.standin.engine import CUDA_FAULT, OOM_VLLM
from tests.standin.openai_server import serve_forever_in_thread

ENOSPC = os.strerror(errno.ENOSPC)  # "No space left on device"


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(path, text):  # noqa: ARG001 - write_atomic's signature
        raise OSError(errno.ENOSPC, ENOSPC)

    monkeypatch.setattr(rundir, "write_atomic", no_space)


# ---- records: always readable back


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_record_cannot_hold_a_non_finite_number(runs_root, value):
    with pytest.raises(ValidationError, match="finite number"):
        SupervisorConfig(settle_s=value)
    run = prepare_run(runs_root, parse_launch(["python", "-m", "sglang.launch_server"]))
    rec = run.read()
    with pytest.raises(ValidationError, match="finite number"):
        rec.config.grace_s = value
    with pytest.raises(ValidationError, match="finite number"):
        rec.timings.ended = value
    assert run.read() == rec  # nothing was changed, and what is on disk reads back


def test_a_torn_number_in_the_engine_log_leaves_the_fact_unknown():
    progress = LogProgress("sglang")
    # float("9" * 400) is inf; a 5,000-digit int is beyond Python's int() limit
    assert progress.feed(f"Load weight begin. avail mem={'9' * 400}.00 GB")
    assert progress.stage == "loading_weights"
    assert progress.facts.avail_before_load_gib is None
    assert progress.feed(
        f"KV Cache is allocated. #tokens: {'7' * 5000}, K size: 1.00 GB, V size: 1.00 GB"
    )
    assert progress.facts.kv_tokens is None
    json.loads(progress.facts.model_dump_json())  # standard JSON, no NaN/Infinity


def test_a_corrupt_record_is_one_line_and_skipped_by_commands_over_every_run(capsys, runs_root):
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        good = prepare_run(runs_root, parse_launch(["python", "-m", "sglang.launch_server"]))
        with good.update() as rec:  # a run whose engine is our sleep process
            rec.pid = rec.pgid = sleeper.pid
            rec.pid_start_ticks = procs.start_ticks(sleeper.pid)
            rec.state = "ready"
        bad = prepare_run(runs_root, parse_launch(["vllm", "serve", "m", "--port", "8001"]))
        bad.record_path.write_text('{"id": "x", "state": "ready"')  # torn
        unreadable = (
            f"servefit: run {bad.id}: run.json is unreadable (Invalid JSON: EOF while parsing "
            "an object at line 1 column 28): skipped"
        )

        code, out, err = cli(capsys, "runs", "--runs-dir", str(runs_root))
        assert code == 0 and good.id in out and bad.id not in out
        assert err.strip() == unreadable

        code, out, err = cli(capsys, "stop", bad.id, "--runs-dir", str(runs_root))
        assert code == 2 and err.strip() == (
            f"servefit: error: run {bad.id}: run.json is unreadable (Invalid JSON: EOF while "
            "parsing an object at line 1 column 28)"
        )

        # plain `stop` goes through every run: the torn one is skipped, the running one stopped
        code, out, err = cli(
            capsys, "stop", "--runs-dir", str(runs_root), "--grace", "5", "--port-timeout", "0.1"
        )
        assert code == 0 and err.strip() == unreadable
        assert out.splitlines()[0] == f"{good.id}: sent SIGTERM; the engine exit status unknown"
        assert sleeper.wait(10) == -signal.SIGTERM
        final = good.read()
        assert final.state == "stopped" and final.stop.signals == ["SIGTERM"]
    finally:
        if sleeper.poll() is None:
            os.killpg(sleeper.pid, signal.SIGKILL)
            sleeper.wait()


# ---- stop: signals first, on a full disk too


def test_stop_on_a_full_disk_ends_the_engine_and_says_what_was_not_recorded(supervise, monkeypatch):
    s = supervise(standin_argv("sglang", free_port()))
    rec = s.wait_state("ready")
    members = owned_members(rec)
    assert len(members) == 3  # the stand-in and its 2 TP ranks
    _full_disk(monkeypatch)
    result = stop_run(s.run, grace_s=3.0, gpus_fn=_no_gpus, record_timeout_s=0.5)
    assert result.signals == ["SIGTERM"] and result.was_running
    assert not any(procs.is_alive(p) for p in members)  # no orphan: the engine is gone
    assert result.notes == [
        f"the stop request was not recorded in run.json: {ENOSPC}",
        "GPU release not checked: NVML library not found (no NVIDIA driver on this machine)",
        f"the outcome was not recorded in run.json: {ENOSPC}",
    ]
    assert s.run.stop_marker() == "servefit stop"
    monkeypatch.undo()  # space again: the supervisor writes what it kept in memory
    final = s.join()
    # the supervisor learnt of the stop from stop.requested: a stop, not a crash
    assert final.state == "stopped" and final.stop.by == "servefit stop"
    assert final.message == "stopped by servefit stop: the engine was killed by SIGKILL"


# ---- two launches on one port


def test_a_second_launch_on_a_port_is_refused_naming_the_run_that_holds_it(
    capsys, supervise, runs_root
):
    port = free_port()
    first = supervise(
        standin_argv("sglang", port, "slow-weight-load"), env={"STANDIN_WEIGHT_LOAD_S": "3600"}
    )
    first.wait_state("loading_weights")  # not listening yet: the preflight port check passes
    assert portlock.holder(runs_root, port) == first.run.id
    code, out, err = cli(
        capsys,
        "launch",
        "--engine",
        "sglang",
        "--runs-dir",
        str(runs_root),
        "--",
        *standin_argv("sglang", port),
    )
    assert "127.0.0.1:" + str(port) + " is free" in " ".join(out.split())
    assert code == 1 and err.strip() == (
        f"servefit: error: port {port} is taken by run {first.run.id} (loading weights); "
        f"stop it first (servefit stop {first.run.id}) or choose another --port"
    )
    assert [r.id for r in list_runs(runs_root)] == [first.run.id]  # nothing left of the second
    stop_run(first.run, grace_s=3.0, gpus_fn=_no_gpus)
    assert first.join().state == "stopped"
    assert portlock.holder(runs_root, port) is None  # given up when the run ended


def test_a_stale_port_claim_is_taken_over(runs_root):
    port = free_port()
    launch = parse_launch(["python", "-m", "sglang.launch_server", "--port", str(port)])
    # a claim naming a run that no longer exists
    runs_root.mkdir(mode=0o700)
    portlock.claim(runs_root, port, "20261129T101748Z-000000")
    first = prepare_run(runs_root, launch)
    assert portlock.holder(runs_root, port) == first.id
    # a run whose supervisor died (a pid that is not its start time) and whose engine is gone
    with first.update() as rec:
        rec.watcher_pid, rec.watcher_start_ticks = os.getpid(), 1
    second = prepare_run(runs_root, launch)
    assert portlock.holder(runs_root, port) == second.id
    # a run that has just been prepared holds its port until its supervisor starts
    with pytest.raises(portlock.PortTaken, match=f"taken by run {second.id} \\(starting\\)"):
        prepare_run(runs_root, launch)


# ---- readiness is the run's own


@contextlib.contextmanager
def _foreign_server(port: int) -> Iterator[None]:
    """Another OpenAI server on `port`, in this test process: not the run's."""
    server = serve_forever_in_thread("127.0.0.1", port, model="someone-else")
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def test_a_foreign_server_on_the_port_never_makes_the_run_ready(supervise):
    port = free_port()
    with _foreign_server(port):
        _foreign_answers_while_the_engine_loads(supervise, port)


def _foreign_answers_while_the_engine_loads(supervise, port: int) -> None:
    cfg = FAST.model_copy(update={"ready_timeout_s": 600.0, "grace_s": 2.0})
    s = supervise(
        standin_argv("sglang", port, "slow-weight-load"),
        config=cfg,
        env={"STANDIN_WEIGHT_LOAD_S": "3600"},
    )
    s.wait_state("loading_weights")
    foreign = f"port {port} is answered by pid {os.getpid()} ({procs.process_name(os.getpid())}), not by this run's engine"
    assert wait_for(lambda: s.last_probe() == foreign, 60), s.last_probe()
    assert s.record().state == "loading_weights"  # answered in full, and still not ready
    s.advance(601)
    final = s.join()
    assert "ready" not in s.states and final.timings.ready is None
    assert final.state == "failed" and final.message == (
        f"not ready after 600 s (engine: loading weights; last probe: {foreign}); "
        "the engine was killed by SIGTERM"
    )
    assert owned_members(final) == []
    # servefit's own timeout is the diagnosis, not "stopped from outside"
    assert final.diagnosis == (
        "servefit stopped the engine itself (SIGTERM): not ready after 600 s (engine: loading "
        f"weights; last probe: {foreign}); if the start-up only needs longer, raise --ready-timeout"
    )
    assert s.run.diagnosis_path.read_text().startswith(final.diagnosis + "\n")


def test_an_engine_that_cannot_bind_behind_a_foreign_server_fails_with_its_bind_error(supervise):
    port = free_port()
    with _foreign_server(port):
        s = supervise(standin_argv("sglang", port))
        final = s.join()
    assert "ready" not in s.states and final.timings.ready is None
    assert final.state == "failed" and final.exit_code == 3  # uvicorn's STARTUP_FAILURE
    assert final.message.startswith("the engine exited with code 3 while capturing graphs: ")
    assert final.message.endswith(
        f"[Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
        "address already in use"
    )
    assert owned_members(final) == []


def test_the_socket_of_the_runs_own_engine_is_recognised(supervise):
    from servefit.launch import sockets

    port = free_port()
    s = supervise(standin_argv("sglang", port))
    rec = s.wait_state("ready")
    found = sockets.owner("127.0.0.1", port, owned_members(rec), rec.id)
    assert found == sockets.Owner(True)
    # the same socket seen from outside the run: held by the stand-in's pid
    other = sockets.owner("127.0.0.1", port, [], "another-run")
    assert other.foreign and other.pid == rec.pid
    stop_run(s.run, grace_s=3.0, gpus_fn=_no_gpus)
    s.join()


# ---- a supervisor that died; SIGTERM to launch


def test_a_dead_supervisor_is_detected_and_the_run_ends_with_the_truth(capsys, runs_root):
    port = free_port()
    launch = parse_launch(standin_argv("sglang", port), "sglang")
    run = prepare_run(runs_root, launch, extra_env={"PYTHONPATH": str(REPO)}, config=FAST)
    watcher = spawn_supervisor(run)  # the real, detached supervisor
    assert wait_for(lambda: run.read().state in ("ready", "failed"), 90), run.log_path.read_text()
    rec = run.read()
    assert rec.state == "ready" and rec.watcher_pid == watcher.pid
    os.kill(watcher.pid, signal.SIGKILL)  # the supervisor dies; the engine keeps serving
    watcher.wait()
    code, out, _ = cli(capsys, "runs", "--runs-dir", str(runs_root))
    [row] = [line for line in out.splitlines() if line.startswith(run.id)]
    assert code == 0 and row.split("  ")[1] == "ready (no supervisor)"

    # the engine ends while nobody watches: a crash nobody saw, never recorded as a stop
    members = owned_members(rec)
    os.killpg(rec.pgid, signal.SIGKILL)  # the group this test's run started
    assert wait_for(lambda: not any(procs.is_alive(p) for p in members), 30)
    code, out, err = cli(capsys, "logs", run.id, "-f", "--runs-dir", str(runs_root))
    truth = "the engine ended while no supervisor watched it (last seen ready); exit status unknown"
    assert code == 0 and "The server is fired up and ready to roll!" in out
    assert err.strip() == f"servefit: run {run.id} failed: {truth}"  # -f returned
    final = run.read()
    assert final.state == "failed" and final.message == truth
    assert final.exit_code is None and final.exit_signal is None  # only the parent could know
    code, out, _ = cli(capsys, "stop", run.id, "--runs-dir", str(runs_root))
    assert code == 0 and out.strip() == f"{run.id}: not running (failed)"
    assert portlock.holder(runs_root, port) == run.id  # stale now: the next launch takes it
    prepare_run(runs_root, launch)


def test_stop_after_a_dead_supervisor_stops_a_live_engine_and_never_calls_a_crash_a_stop(
    capsys, runs_root
):
    sleepers = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    try:
        runs = []
        for proc in sleepers:  # two runs whose supervisor is gone (not this pid's start time)
            run = prepare_run(
                runs_root, parse_launch(["vllm", "serve", "m", "--port", str(free_port())])
            )
            with run.update() as rec:
                rec.pid = rec.pgid = proc.pid
                rec.pid_start_ticks = procs.start_ticks(proc.pid)
                rec.watcher_pid, rec.watcher_start_ticks = os.getpid(), 1
                rec.state = "ready"
            runs.append(run)
        live, crashed = runs
        os.killpg(sleepers[1].pid, signal.SIGKILL)  # this engine ended while nobody watched
        sleepers[1].wait()
        # plain `stop`: the one run that is running; the crashed one is not, whatever it says
        code, out, _ = cli(capsys, "stop", "--runs-dir", str(runs_root), "--port-timeout", "0.1")
        assert code == 0
        assert out.splitlines()[0] == f"{live.id}: sent SIGTERM; the engine exit status unknown"
        assert sleepers[0].wait(10) == -signal.SIGTERM
        rec = live.read()
        assert rec.state == "stopped" and rec.message == (
            "stopped by servefit stop (SIGTERM); exit status unknown: the supervisor was not running"
        )
        code, out, _ = cli(capsys, "stop", crashed.id, "--runs-dir", str(runs_root))
        assert code == 0 and out.strip() == f"{crashed.id}: not running (failed)"
        assert crashed.read().message == (
            "the engine ended while no supervisor watched it (last seen ready); exit status unknown"
        )
    finally:
        for proc in sleepers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_sigterm_to_a_starting_launch_stops_the_engine_as_ctrl_c_does(runs_root):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "STANDIN_WEIGHT_LOAD_S": "3600"}
    servefit = [PYTHON, "-c", "from servefit.cli.main import main; main()"]
    launch = subprocess.Popen(
        [*servefit, "launch", "--engine", "sglang", "--runs-dir", str(runs_root),
         "--probe-interval", "0.05", "--grace", "3", "--",
         *standin_argv("sglang", port, "slow-weight-load")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert wait_for(
            lambda: any(r.read().state == "loading_weights" for r in list_runs(runs_root)), 90
        )
        [run] = list_runs(runs_root)
        members = owned_members(run.read())
        launch.send_signal(signal.SIGTERM)
        out, _ = launch.communicate(timeout=60)
    finally:
        if launch.poll() is None:
            launch.kill()
            launch.wait()
    assert launch.returncode == 128 + signal.SIGTERM, out
    assert "interrupted (SIGTERM): stopping the engine ..." in out
    rec = run.read()
    assert rec.state == "stopped" and rec.stop.by == "SIGTERM during start-up"
    assert rec.stop.signals == ["SIGTERM"] and rec.timings.ready is None
    assert members and not any(procs.is_alive(p) for p in members)


# ---- faults that end the engine on its own: state, exit, message, and nothing left behind


def _marked(run_id: str) -> list[int]:
    """Every live process carrying the run's SERVEFIT_RUN_ID, in or out of its group."""
    pids = (int(n) for n in os.listdir("/proc") if n.isdigit())
    return [p for p in pids if procs.is_alive(p) and procs.run_marker(p) == run_id]


BIND = "[Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): address already in use"


@pytest.mark.parametrize(
    ("engine", "fault", "exit_", "message"),
    [
        (
            "sglang",
            "crash-after-first-request",
            "SIGKILL",
            f"the engine was killed by SIGKILL right after answering its first request: {CUDA_FAULT}",
        ),
        (
            "vllm",
            "crash-after-first-request",
            "SIGKILL",
            # the exception line under "EngineCore encountered a fatal error." and its traceback
            f"the engine was killed by SIGKILL right after answering its first request: {CUDA_FAULT}",
        ),
        (
            "sglang",
            "port-in-use",
            3,
            "the engine exited with code 3 while capturing graphs: ERROR:    " + BIND,
        ),
        ("vllm", "startup-oom", 1, f"the engine exited with code 1 while allocating: {OOM_VLLM}"),
    ],
)
def test_fault_matrix(supervise, engine, fault, exit_, message):
    port = free_port()
    s = supervise(standin_argv(engine, port, fault), engine=engine)
    final = s.join()
    assert "ready" not in s.states and final.timings.ready is None  # never a false ready
    assert final.state == "failed"
    assert (final.exit_signal if isinstance(exit_, str) else final.exit_code) == exit_
    assert final.message == message.format(port=port)
    assert final.diagnosis  # the doctor (or the log's error lines) ran on the run's own log
    assert _marked(final.id) == []  # no process of the run is left, in its group or out of it
    assert portlock.holder(s.run.path.parent, port) is None  # the port is free for the next
    s.run.read()  # and the record reads back


def test_a_launch_on_a_full_disk_is_one_line_and_leaves_nothing(capsys, runs_root, monkeypatch):
    runs_root.mkdir(mode=0o700)
    _full_disk(monkeypatch)
    code, _, err = cli(
        capsys, "launch", "--engine", "sglang", "--runs-dir", str(runs_root), "--",
        *standin_argv("sglang", free_port()),
    )  # fmt: skip
    assert code == 1 and err.strip() == (
        f"servefit: error: cannot write a run under {runs_root}: {ENOSPC}; nothing was started"
    )
    assert list_runs(runs_root) == [] and sorted(p.name for p in runs_root.iterdir()) == []
