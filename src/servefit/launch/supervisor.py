"""Start the engine and watch it to the end.

The engine runs in its own session (start_new_session=True), so its process group is its pid
and every process it forks (schedulers, detokenizer, workers) can be stopped together and only
they. Its stdout and stderr go straight into the run's fresh engine.log: nothing is lost if
servefit itself dies. The supervisor reads that file as it grows and moves the run through
starting -> loading_weights -> allocating -> capturing_graphs from the engine's own lines
(events.py), probes readiness (probe.py) in a thread, and declares the run ready only after
/health, /v1/models and one chat completion have answered and the engine is still alive and
healthy `settle_s` later. The probes send the launch's own key (auth.server_key); a server that
answers 401/403 all the same wants a key servefit does not know: that is recorded
(`auth_note`), readiness rests on /health alone, and the engine is never failed or stopped
for it. When the engine exits, the exit code or signal is recorded (only the
parent can read it, which is why the supervisor is the engine's parent), what is left of the
run is cleaned up (the group's members and the processes carrying the run's marker outside
it), and the doctor is run on the log.

While it supervises, the supervisor is a child subreaper where Linux allows it
(procs.child_subreaper): a process of the engine whose parent exits, the daemon of a double
fork, re-parents to the supervisor instead of init, and its zombie is collected here.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from servefit.launch import portlock, procs, sockets
from servefit.launch.auth import ServerKey, auth_refused, launch_redactor, server_key
from servefit.launch.events import LogProgress, split_lines
from servefit.launch.liveness import owned_members, run_processes
from servefit.launch.probe import check_health, readiness
from servefit.launch.rundir import RunDir
from servefit.launch.schema import (
    STAGES,
    STATE_LABEL,
    Check,
    LaunchSpec,
    RunRecord,
    StopInfo,
    SupervisorConfig,
    Timings,
)

POLL_S = 0.05
STOP_POLL_S = 0.25
# A record that cannot be written (a full disk) is kept in memory and written at the next
# poll; the final one is retried this long before the supervisor gives up and exits.
FINAL_WRITE_S = 30.0
PROBER_JOIN_S = 5.0


class _LogTail:
    """Read a file as it grows, line by line (a \\r also ends a line)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.rest = b""

    def read(self, final: bool = False) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.pos)
                data = fh.read()
        except OSError:
            return []
        self.pos += len(data)
        lines, self.rest = split_lines(self.rest + data)
        if final and self.rest:
            lines.append(self.rest.decode("utf-8", "replace"))
            self.rest = b""
        return lines


class _Prober(threading.Thread):
    """Readiness probes until the first full answer, then health checks until told to stop."""

    def __init__(
        self,
        base_url: str,
        config: Any,
        key: ServerKey | None = None,
        engine: str = "",
        not_ours: Callable[[], str | None] = lambda: None,
    ) -> None:
        super().__init__(name="servefit-probe", daemon=True)
        self.base_url = base_url
        self.not_ours = not_ours  # why the server that answered is not the run's, or None
        self.config = config
        self.key = key
        self.engine = engine
        self.auth_note: str | None = None  # the server answered 401/403: it wants a key
        self.stop_event = threading.Event()
        self.first_ok_at: float | None = None  # monotonic time of the first full answer
        self.settled = threading.Event()  # still healthy settle_s after the first answer
        self.model: str | None = None
        self.last: str = "not probed yet"
        self.unresponsive: str | None = None
        self.tries = 0

    def run(self) -> None:
        import httpx

        cfg = self.config
        headers = {"Authorization": f"Bearer {self.key.value}"} if self.key else {}
        # trust_env=False: the engine is on this machine; an HTTP(S)_PROXY must not carry the probes
        with httpx.Client(trust_env=False, headers=headers) as client:
            while not self.stop_event.is_set():
                self.tries += 1
                result = readiness(
                    client, self.base_url, cfg.health_path, cfg.probe_timeout_s, cfg.chat_timeout_s
                )
                answered = result.ok or result.refused is not None
                why = self.not_ours() if answered else None  # someone answered: whose server?
                self.last = why or result.message  # one assignment: read from another thread
                if why is None and result.ok:
                    self.model = result.model
                    self.first_ok_at = time.monotonic()
                    break
                if why is None and result.refused is not None:
                    # Healthy, and it wants a key: more probes cannot get further.
                    self.auth_note = auth_refused(
                        result.refused, self.key, self.engine, result.message
                    )
                    self.model = result.model
                    self.first_ok_at = time.monotonic()
                    break
                self.stop_event.wait(cfg.probe_interval_s)
            if self.stop_event.wait(cfg.settle_s):
                return
            err = check_health(client, self.base_url, cfg.health_path, cfg.probe_timeout_s)
            if err is not None:
                self.last = err
                self.unresponsive = f"stopped answering right after its first request ({err})"
                return
            self.settled.set()
            failures = 0
            while not self.stop_event.wait(cfg.health_interval_s):
                err = check_health(client, self.base_url, cfg.health_path, cfg.probe_timeout_s)
                failures = failures + 1 if err else 0
                if err:
                    self.last = err
                if failures >= cfg.unhealthy_after:
                    self.unresponsive = (
                        f"stopped answering: {failures} health checks in a row failed ({err})"
                    )
                    return


class Supervisor:
    """Runs one launch from spawn to exit; `run()` returns the final record."""

    def __init__(self, run: RunDir, clock: Callable[[], float] = time.monotonic) -> None:
        """`clock` measures the ready timeout and the time since ready (tests move it on)."""
        if run.spec is None:
            raise ValueError(
                f"no launch spec for {run.path}: the supervisor gets it from prepare_run or, "
                "detached, on its standard input (spawn_supervisor)"
            )
        self.rundir = run
        self.spec: LaunchSpec = run.spec
        self.record = run.read()
        self.proc: subprocess.Popen[bytes] | None = None
        self.progress = LogProgress(self.record.engine)
        self.prober: _Prober | None = None
        self.clock = clock
        self._t0 = clock()
        self._ready_mono: float | None = None
        self._dirty = False
        self._dirty_since_error = False  # the last write of run.json failed
        # pid -> start ticks of the run's processes this supervisor ended: those adopted here
        # (it is a child subreaper) are collected at the end, so no zombie of them is left
        self._ended: dict[int, int | None] = {}

    # ---- record plumbing: the supervisor owns these fields, `servefit stop` owns stop*

    _OWNED = (
        "state", "message", "pid", "pgid", "pid_start_ticks", "watcher_pid",
        "watcher_start_ticks", "exit_code",
        "exit_signal", "served_model", "timings", "facts", "leftover_pids", "diagnosis",
        "auth_note", "calibration",
    )  # fmt: skip

    def _commit(self) -> bool:
        """Write the owned fields; False (still dirty, retried at the next poll) when run.json
        cannot be written: supervising the engine matters more than recording it."""
        try:
            with self.rundir.update() as rec:
                for name in self._OWNED:
                    setattr(rec, name, getattr(self.record, name))
                self._take_stop(rec)
        except OSError as exc:
            if not self._dirty_since_error:  # once per spell of failures, not every poll
                print(f"servefit: run.json not written: {exc.strerror or exc}", file=sys.stderr)
            self._dirty = self._dirty_since_error = True
            return False
        self._dirty = self._dirty_since_error = False
        return True

    def _take_stop(self, rec: RunRecord) -> None:
        """The stop request: run.json's, else stop.requested (written by a `servefit stop`
        that could not rewrite run.json)."""
        if not rec.stop_requested:
            by = self.rundir.stop_marker()
            if by is not None:
                rec.stop_requested = True
                rec.stop = StopInfo(
                    requested_at=time.time(), by=by, grace_s=self.record.config.grace_s
                )
        self.record.stop_requested = rec.stop_requested
        self.record.stop = rec.stop

    def _refresh_stop(self) -> None:
        try:
            rec = self.rundir.read()
        except (OSError, ValueError):
            return
        self._take_stop(rec)

    def _enter(self, state: str, fill: bool = True) -> None:
        """Move forward to `state`. With `fill`, start-up stages passed without a line of their
        own get the same time (several lines can arrive in one read); ready never fills: an
        engine without CUDA graphs (--disable-cuda-graph) did not capture any."""
        rec = self.record
        if rec.terminal or rec.state not in STAGES or state not in STAGES:
            return
        now, at, to = time.time(), STAGES.index(rec.state), STAGES.index(state)
        for stage in STAGES[at + 1 : to + 1] if fill else STAGES[to : to + 1] if to > at else ():
            setattr(rec.timings, stage, now)
            rec.state = stage  # type: ignore[assignment]
            self._dirty = True

    def _fail(self, message: str) -> None:
        if self.record.terminal:
            return
        self.record.state = "failed"
        self.record.message = message
        self._dirty = True

    # ---- the run

    def run(self) -> RunRecord:
        self.record.watcher_pid = os.getpid()
        self.record.watcher_start_ticks = procs.start_ticks(os.getpid())
        # before the spawn: an orphan of the engine must find the supervisor, not init
        with procs.child_subreaper():
            return self._supervise()

    def _supervise(self) -> RunRecord:
        if not self._spawn():
            return self.record
        spec = self.spec
        key = ServerKey(spec.api_key, spec.api_key_source or "--api-key") if spec.api_key else None
        self.prober = _Prober(
            self.record.url, self.record.config, key, self.record.engine, self._not_ours
        )
        self.prober.start()
        tail = _LogTail(self.rundir.log_path)
        next_stop_poll = 0.0
        try:
            while True:
                self._read_log(tail.read())
                rc = self.proc.poll()  # type: ignore[union-attr]
                if rc is not None:
                    break
                self._check_readiness()
                now = time.monotonic()
                if now >= next_stop_poll:
                    self._refresh_stop()
                    next_stop_poll = now + STOP_POLL_S
                if self._dirty:
                    self._commit()
                time.sleep(POLL_S)
        finally:
            self.prober.stop_event.set()
        # A round in flight when the engine exited ends now (the engine's sockets are closed):
        # an answer it already got ("right after answering its first request") is then known.
        self.prober.join(PROBER_JOIN_S)
        self._read_log(tail.read(final=True))
        self._finish(rc)
        return self.record

    def _not_ours(self) -> str | None:
        """Why the server that answered the probes is not this run's engine, or None when it
        is (sockets.py: the listening socket is held by the run's processes; where that cannot
        be seen, the engine must have printed its own ready line)."""
        rec = self.record
        host = urlsplit(rec.url).hostname or rec.host  # where the probes connect
        found = sockets.owner(host, rec.port, owned_members(rec), rec.id)
        if found.ours:
            return None
        if found.foreign:
            return (
                f"port {rec.port} is answered by pid {found.pid} ({found.name or '?'}), "
                "not by this run's engine"
            )
        if self.progress.facts.engine_says_ready:
            return None
        return (
            f"port {rec.port} answered, but whose server it is cannot be told ({found.why}): "
            "waiting for the engine's own ready line"
        )

    def _spawn(self) -> bool:
        if self._start():
            return True
        portlock.release(self.rundir.path.parent, self.record.port, self.record.id)
        return False

    def _start(self) -> bool:
        # The real argv and environment (argv.json and env.json hold the redacted copies).
        argv = list(self.spec.argv)
        env = {**os.environ, **self.spec.env}
        with self.rundir.update() as rec:
            rec.watcher_pid = self.record.watcher_pid
            rec.watcher_start_ticks = self.record.watcher_start_ticks
            if rec.stop_requested:
                rec.state = "stopped"
                rec.message = "stopped before the engine was started"
                rec.timings.ended = time.time()
                self.record = rec
                return False
            log = self.rundir.open_new_log()
            try:
                self.proc = subprocess.Popen(
                    argv,
                    cwd=rec.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own session and process group: pgid == pid
                    close_fds=True,
                )
            except OSError as exc:
                rec.state = "failed"
                rec.message = (
                    f"cannot run {argv[0] if argv else '(nothing)'}: {exc.strerror or exc}"
                )
                rec.timings.ended = time.time()
                self.record = rec
                return False
            finally:
                log.close()
            pid = self.proc.pid
            rec.pid = pid
            rec.pgid = pid
            rec.pid_start_ticks = procs.start_ticks(pid)
            rec.timings.started = time.time()
            self.record = rec
        self._t0 = self.clock()
        return True

    def _read_log(self, lines: list[str]) -> None:
        for line in lines:
            if self.progress.feed(line):
                self._dirty = True
                self._enter(self.progress.stage)  # at the line that starts it
        if self._dirty:
            self.record.facts = self.progress.facts.model_copy(deep=True)

    def _check_readiness(self) -> None:
        rec, prober = self.record, self.prober
        assert prober is not None
        if rec.state == "ready":
            if prober.unresponsive and not rec.terminal:
                self._fail(f"the engine {prober.unresponsive}")
                self._commit()
                self._diagnose()
            return
        if rec.terminal:
            return
        if prober.settled.is_set():
            rec.served_model = prober.model
            rec.auth_note = prober.auth_note
            self._enter("ready", fill=False)
            rec.timings.time_to_ready_s = round(rec.timings.ready - rec.timings.started, 3)  # type: ignore[operator]
            self._ready_mono = self.clock()
            self._calibrate()
            return
        if prober.unresponsive:
            self._fail(f"the engine {prober.unresponsive}")
            self._not_ready_stop("stopped answering after its first request")
            return
        waited = self.clock() - self._t0
        if waited > rec.config.ready_timeout_s:
            stage = STATE_LABEL[rec.state]
            self._fail(
                f"not ready after {rec.config.ready_timeout_s:g} s (engine: {stage}; "
                f"last probe: {prober.last})"
            )
            self._not_ready_stop("not ready in time")

    def _not_ready_stop(self, why: str) -> None:
        """A start-up that failed while the engine still runs: stop it (it is ours and holds
        the GPUs) unless the user asked to keep it."""
        self._commit()
        if self.record.config.keep_failed:
            return
        info = StopInfo(requested_at=time.time(), by=why, grace_s=self.record.config.grace_s)
        with contextlib.suppress(OSError), self.rundir.update() as rec:  # a full disk: stop anyway
            rec.stop = info
        signals, escalated, _ = self._terminate(self.record.config.grace_s)
        with contextlib.suppress(OSError), self.rundir.update() as rec:
            if rec.stop is not None:
                rec.stop.signals = signals
                rec.stop.escalated = escalated

    def _finish(self, rc: int) -> None:
        rec = self.record
        self._refresh_stop()
        rec.timings.ended = time.time()
        if rc < 0:
            rec.exit_signal = procs.signal_name(-rc)
        else:
            rec.exit_code = rc
        how = procs.describe_exit(rc)
        if rec.terminal:
            rec.message = f"{rec.message}; the engine {how}"
        elif rec.stop_requested:
            rec.state = "stopped"
            by = rec.stop.by if rec.stop else "servefit stop"
            rec.message = f"stopped by {by}: the engine {how}"
        else:
            rec.message = self._exit_message(how)  # reads the stage the engine died in
            rec.state = "failed"
        self._cleanup_leftovers()
        self._reap_adopted()
        deadline = time.monotonic() + FINAL_WRITE_S
        while not self._commit() and time.monotonic() < deadline:
            time.sleep(STOP_POLL_S * 2)
        if rec.state == "failed":
            self._diagnose()
        # The run's processes are gone (cleaned up above): the port is free for the next launch.
        # One that survived SIGKILL may still hold it: the claim stays, naming this run, until
        # it is gone (portlock takes a claim over once nothing of its run lives).
        if not run_processes(rec):
            portlock.release(self.rundir.path.parent, rec.port, rec.id)

    def _exit_message(self, how: str) -> str:
        rec, prober = self.record, self.prober
        if rec.timings.ready is not None and self._ready_mono is not None:
            after = self.clock() - self._ready_mono
            msg = f"the engine {how} {after:.1f} s after it became ready"
        elif prober is not None and prober.first_ok_at is not None:
            msg = f"the engine {how} right after answering its first request"
        else:
            msg = f"the engine {how} while {STATE_LABEL[rec.state]}"
        if rec.facts.errors:
            msg += f": {rec.facts.errors[0]}"
        return msg

    def _cleanup_leftovers(self) -> None:
        """The leader is gone; processes it started may still hold the port and GPU memory,
        in its group or, having left it, carrying the run's marker. They are ours."""
        left = run_processes(self.record)
        if not left:
            return
        self.record.leftover_pids = left
        self._terminate(grace_s=2.0)

    def _terminate(self, grace_s: float) -> tuple[list[str], bool, bool]:
        from servefit.launch.stop import terminate_run

        for pid in run_processes(self.record):
            self._ended.setdefault(pid, procs.start_ticks(pid))
        return terminate_run(self.record, grace_s)

    def _reap_adopted(self) -> None:
        engine = self.proc.pid if self.proc is not None else None
        procs.reap({pid: t for pid, t in self._ended.items() if pid != engine})

    def _calibrate(self) -> None:
        """Record what the start measured (launch/diagnose.py:calibrate_run), after the ready
        state is committed: the user sees ready first."""
        from servefit.launch.diagnose import calibrate_run

        self._commit()
        calibrate_run(self.rundir, self.record)
        if self.record.calibration:
            self._commit()

    def _diagnose(self) -> None:
        from servefit.launch.diagnose import diagnose_run

        try:
            diagnosis = diagnose_run(self.rundir, self.record)
        except Exception as exc:  # the diagnosis must never take the record down with it
            diagnosis = None
            self.record.diagnosis = f"diagnosis failed: {type(exc).__name__}: {exc}"
        if diagnosis is not None:
            with contextlib.suppress(OSError):  # the summary still goes into run.json
                self.rundir.write_text(self.rundir.diagnosis_path, diagnosis.text)
            self.record.diagnosis = diagnosis.summary
        self._commit()


def prepare_run(
    root: str | os.PathLike[str],
    launch: Any,
    *,
    extra_env: dict[str, str] | None = None,
    plan: Any | None = None,
    request: Any | None = None,
    checks: list[Check] | None = None,
    config: SupervisorConfig | None = None,
    forced: bool = False,
    typed: list[str] | None = None,
) -> RunDir:
    """A new run directory with everything the supervisor needs: argv.json, env.json,
    plan.json and the first run record, all redacted; the real argv and environment stay in
    memory (`RunDir.spec`) for the supervisor. `launch` is a command.EngineLaunch, `request`
    the PlanRequest of the plan (when planned)."""
    env = {**launch.env, **(extra_env or {})}
    if "PYTHONUNBUFFERED" not in os.environ and "PYTHONUNBUFFERED" not in env:
        env["PYTHONUNBUFFERED"] = "1"  # progress lines reach the log as they are printed
    cwd = os.getcwd()
    key = server_key(launch.engine, launch.engine_argv, {**os.environ, **env})
    typed = list(typed or launch.argv)
    redactor = launch_redactor(launch.engine, [launch.argv, typed], env)
    run = RunDir.create(root, redactor=redactor)
    try:
        env[procs.RUN_MARKER] = run.id  # inherited by every process of the engine: its identity
        run.spec = LaunchSpec(
            argv=list(launch.argv),
            env=env,
            cwd=cwd,
            api_key=key.value if key else None,
            api_key_source=key.source if key else None,
        )
        argv = redactor.argv(launch.argv)
        run.write_json(run.argv_path, {"argv": argv, "cwd": cwd, "typed": redactor.argv(typed)})
        run.write_json(run.env_path, redactor.env(env))
        if plan is not None:
            run.write_json(run.plan_path, plan.model_dump(mode="json"))
        run.save(
            RunRecord(
                id=run.id,
                engine=launch.engine,
                command_line=shlex.join(argv),
                cwd=cwd,
                host=launch.host,
                port=launch.port,
                url=launch.url,
                timings=Timings(created=time.time()),
                config=config or SupervisorConfig(),
                preflight=list(checks or []),
                forced=forced,
                plan_verdict=plan.verdict if plan is not None else None,
                plan_engine=(
                    f"{plan.engine.name}=={plan.engine.version}" if plan is not None else None
                ),
                plan_gpu=str(request.gpu) if request is not None else None,
                plan_model=str(request.model) if request is not None else None,
                probe_key=key.shown if key else None,
            )
        )
        # after the record exists (a claim names a run whose state can be read), before the engine
        portlock.claim(run.path.parent, launch.port, run.id)
    except BaseException:
        shutil.rmtree(run.path, ignore_errors=True)  # a refused or failed start leaves nothing
        raise
    return run


def spawn_supervisor(run: RunDir) -> subprocess.Popen[bytes]:
    """`python -m servefit.launch.watch RUN_DIR` in its own session: it outlives the terminal
    that launched it and does not receive that terminal's Ctrl-C. The launch spec, secrets
    included, goes to it through a pipe on its standard input, never through a file."""
    assert run.spec is not None, "spawn_supervisor needs the run from prepare_run"
    # A launch typed inside another run's process inherits that run's marker: the supervisor
    # must not carry it, or stopping that run would end this one's supervisor.
    env = {k: v for k, v in os.environ.items() if k != procs.RUN_MARKER}
    with run.open_supervisor_log() as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "servefit.launch.watch", str(run.path)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    assert proc.stdin is not None
    try:
        proc.stdin.write(run.spec.model_dump_json().encode())
    except BrokenPipeError:  # it died at once; supervisor.log says why
        pass
    finally:
        proc.stdin.close()
    return proc
