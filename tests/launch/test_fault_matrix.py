"""Launch faults against the stand-in engine (tests/standin/engine.py, not an engine): each fault
ends in the expected state and record, with the message a user reads, and leaves no process of
the run behind. Timeouts are the tests' moves of the supervisor's clock (conftest.Supervised),
never short real timeouts.

A full disk is simulated by making the write of a run's files raise ENOSPC (what
os.write/fsync raise when the filesystem is full); the stop marker is a new, empty file, which
a full filesystem still creates while it has inodes."""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import subprocess

import pytest
from pydantic import ValidationError

from servefit.launch import procs, rundir
from servefit.launch.command import parse_launch
from servefit.launch.events import LogProgress
from servefit.launch.schema import SupervisorConfig
from servefit.launch.stop import owned_members, stop_run
from servefit.launch.supervisor import prepare_run
from tests.clihelp import run as cli
from tests.launch.conftest import free_port, standin_argv
from tests.launch.test_supervisor_faults import _no_gpus

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
