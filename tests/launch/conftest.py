"""Fixtures for the launch tests: a private runs directory, free ports, in-process supervision
of the stand-in engine (tests/standin/engine.py, not a real engine), and a clean-up that ends
every process these tests started, by run marker (in the engine's group or out of it), never
by name."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from servefit.launch import procs
from servefit.launch.command import parse_launch
from servefit.launch.rundir import RunDir, list_runs
from servefit.launch.schema import RunRecord, SupervisorConfig
from servefit.launch.supervisor import Supervisor, prepare_run

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "tests" / "standin" / "shim"
PYTHON = os.environ.get("PYTHON_FOR_TESTS") or __import__("sys").executable

# Fast settings for the stand-in (its stages take 0.05-0.15 s); the ready timeout and the waits
# in the tests are upper bounds that guard against hangs, not timing assertions: generous, so
# that a loaded machine only makes the tests slower. Tests that want a timeout move the
# supervisor's clock (Supervised.advance).
FAST = SupervisorConfig(
    ready_timeout_s=120.0,
    probe_timeout_s=1.0,
    chat_timeout_s=5.0,
    probe_interval_s=0.05,
    settle_s=0.3,
    health_interval_s=0.2,
    unhealthy_after=2,
    grace_s=3.0,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def standin_argv(engine: str, port: int, fault: str = "none", *extra: str) -> list[str]:
    return [
        PYTHON,
        "-m",
        "tests.standin.engine",
        "--engine",
        engine,
        "--fault",
        fault,
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--tp-size",
        "2",
        "--model-path",
        "Qwen/Qwen3.6-27B",
        *extra,
    ]


def wait_for(pred: Callable[[], bool], timeout: float = 60.0, step: float = 0.02) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


class Supervised:
    """A run under an in-process supervisor thread. Its clock (ready timeout, time since ready)
    runs with the real one until a test moves it on: a timeout is then a test's decision,
    taken once the engine is where the test wants it, whatever the machine's load."""

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self.states: list[str] = []
        self.offset = 0.0
        self.supervisor = Supervisor(run, clock=lambda: time.monotonic() + self.offset)
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.final: RunRecord | None = None
        self.error: BaseException | None = None

    def _main(self) -> None:
        try:
            self.final = self.supervisor.run()
        except BaseException as exc:  # surfaced by .join()
            self.error = exc

    def advance(self, seconds: float) -> None:
        """Move the supervisor's clock on (a ready timeout expires at its next poll)."""
        self.offset += seconds

    def last_probe(self) -> str:
        prober = self.supervisor.prober
        return prober.last if prober is not None else ""

    def start(self) -> Supervised:
        self.thread.start()
        threading.Thread(target=self._watch_states, daemon=True).start()
        return self

    def _watch_states(self) -> None:
        while self.thread.is_alive():
            try:
                state = self.run.read().state
            except (OSError, ValueError):
                state = None
            if state and (not self.states or self.states[-1] != state):
                self.states.append(state)
            time.sleep(0.01)

    def record(self) -> RunRecord:
        return self.run.read()

    def wait_state(self, *states: str, timeout: float = 90.0) -> RunRecord:
        assert wait_for(lambda: self.record().state in states, timeout), (
            f"state {self.record().state!r}, wanted {states}; log:\n{self.log()}"
        )
        return self.record()

    def join(self, timeout: float = 90.0) -> RunRecord:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"supervisor still running; log:\n{self.log()}"
        if self.error is not None:
            raise self.error
        return self.record()

    def log(self) -> str:
        try:
            return self.run.log_path.read_text()
        except OSError:
            return "(no log)"


@pytest.fixture
def runs_root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "runs"
    yield root
    _end_everything(root)


def end_marked(run_id: str, timeout: float = 5.0) -> None:
    """SIGKILL every live process carrying SERVEFIT_RUN_ID=`run_id`, in the engine's group or
    out of it (daemons, new sessions), until none is left; then collect the zombies of those
    this process adopted as a child subreaper."""
    seen: dict[int, int | None] = {}

    def none_left() -> bool:
        pids = procs.marked_processes(run_id)
        for pid in pids:
            seen.setdefault(pid, procs.start_ticks(pid))
            procs.signal_marked(pid, run_id, signal.SIGKILL)
        return not pids

    wait_for(none_left, timeout=timeout)
    procs.reap(seen)


def _end_everything(root: Path) -> None:
    """SIGKILL whatever the tests' runs left: every process carrying a run's marker and the
    detached supervisors (checked by their command line)."""
    for run in list_runs(root):
        try:
            rec = run.read()
        except (OSError, ValueError):
            continue
        end_marked(rec.id)
        w = rec.watcher_pid
        if w and w != os.getpid() and procs.is_alive(w):
            try:
                cmd = Path(f"/proc/{w}/cmdline").read_bytes()
            except OSError:
                cmd = b""
            if b"servefit.launch.watch" in cmd and str(run.path).encode() in cmd:
                procs.kill_pid(w, signal.SIGKILL)


@pytest.fixture
def supervise(runs_root: Path) -> Iterator[Callable[..., Supervised]]:
    started: list[Supervised] = []

    def start(
        argv: list[str],
        engine: str = "sglang",
        config: SupervisorConfig = FAST,
        env: dict[str, str] | None = None,
    ) -> Supervised:
        launch = parse_launch(argv, engine)
        extra = {"PYTHONPATH": str(REPO), **(env or {})}
        run = prepare_run(runs_root, launch, extra_env=extra, config=config)
        s = Supervised(run).start()
        started.append(s)
        return s

    yield start
    _end_everything(runs_root)
    for s in started:
        s.thread.join(10)
