"""Start and stop real `vllm serve` processes for the real-engine tests and the log collection.

Each server listens on 127.0.0.1 on a free port, runs in its own process group (start_new_session),
writes stdout and stderr to one log file, and is ready when GET /health answers 200. It is stopped
by signalling its process group, never by name: SIGTERM, then SIGKILL after a grace period, then
a check that no process of the group is left. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Quiet, offline, reproducible: no hub look-ups, no usage reports.
BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass(frozen=True)
class ServeSpec:
    """One `vllm serve` start: the venv's bin folder, the model and the engine's own flags."""

    bin_dir: Path
    model: Path
    flags: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def argv(self, port: int) -> list[str]:
        return [str(self.bin_dir / "vllm"), "serve", str(self.model),
                "--host", "127.0.0.1", "--port", str(port), *self.flags]


@dataclass(frozen=True)
class Outcome:
    """How a start ended: ready (serving), exited (with its return code) or timeout."""

    state: str
    seconds: float
    returncode: int | None = None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is pgid, read from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ... ; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(entry.name))
    return pids


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


class EngineServer:
    """A running (or failed) `vllm serve`; use as a context manager or call stop()."""

    def __init__(self, spec: ServeSpec, log_path: Path, port: int | None = None) -> None:
        self.spec = spec
        self.log_path = Path(log_path)
        self.port = port or free_port()
        self.argv = spec.argv(self.port)
        self.proc: subprocess.Popen | None = None
        self.outcome: Outcome | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pgid(self) -> int:
        assert self.proc is not None
        return self.proc.pid  # start_new_session: the leader's pid is the group id

    def start(self, ready_timeout: float = 900.0) -> Outcome:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **BASE_ENV, **self.spec.env}
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        self.outcome = self._wait_ready(started, ready_timeout)
        return self.outcome

    def _wait_ready(self, started: float, timeout: float) -> Outcome:
        assert self.proc is not None
        while True:
            elapsed = time.monotonic() - started
            rc = self.proc.poll()
            if rc is not None:
                return Outcome("exited", elapsed, rc)
            try:
                status, _ = http_get(self.base_url + "/health", timeout=2.0)
                if status == 200:
                    return Outcome("ready", elapsed)
            except OSError:
                pass
            if elapsed > timeout:
                return Outcome("timeout", elapsed)
            time.sleep(1.0)

    def wait_exit(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float = 30.0) -> list[int]:
        """Stop the whole process group; returns the pids still alive afterwards (none)."""
        if self.proc is None:
            return []
        pgid = self.pgid
        if group_members(pgid):
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while group_members(pgid) and time.monotonic() < deadline:
                time.sleep(0.5)
            if group_members(pgid):
                _signal_group(pgid, signal.SIGKILL)
                deadline = time.monotonic() + 10.0
                while group_members(pgid) and time.monotonic() < deadline:
                    time.sleep(0.2)
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        return group_members(pgid)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> EngineServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
