"""Run directories: unique, fresh logs, atomic records, resolving a run by name."""

from __future__ import annotations

import os

import pytest

from servefit.errors import ArgumentError
from servefit.launch.rundir import RunDir, list_runs, resolve, write_atomic
from servefit.launch.schema import RunRecord, Timings


def _record(run: RunDir) -> RunRecord:
    return RunRecord(
        id=run.id,
        engine="sglang",
        command_line="x",
        cwd="/",
        host="127.0.0.1",
        port=30000,
        url="http://127.0.0.1:30000",
        timings=Timings(created=0.0),
    )


def test_names_are_utc_time_and_short_id_and_unique(tmp_path):
    t = 1795947468.0  # 2026-11-29 10:17:48 UTC
    a, b = RunDir.create(tmp_path, now=t), RunDir.create(tmp_path, now=t)
    assert a.id.startswith("20261129T101748Z-") and b.id.startswith("20261129T101748Z-")
    assert a.id != b.id and len(a.id.split("-")[1]) == 6


def test_the_log_is_created_fresh_and_never_reused(tmp_path):
    run = RunDir.create(tmp_path)
    with run.open_new_log() as fh:
        fh.write(b"first launch\n")
    with pytest.raises(FileExistsError):
        run.open_new_log()
    assert run.log_path.read_bytes() == b"first launch\n"


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "run.json"
    write_atomic(target, "one")
    write_atomic(target, "two")
    assert target.read_text() == "two" and os.listdir(tmp_path) == ["run.json"]


def test_update_reads_changes_and_writes_back(tmp_path):
    run = RunDir.create(tmp_path)
    run.save(_record(run))
    with run.update() as rec:
        rec.state = "loading_weights"
    assert run.read().state == "loading_weights"


def test_resolve_by_name_short_id_prefix_and_latest(tmp_path):
    runs = [RunDir.create(tmp_path, now=1795947468.0 + i * 60) for i in range(3)]
    for r in runs:
        r.save(_record(r))
    assert [r.id for r in list_runs(tmp_path)] == sorted(r.id for r in runs)
    assert resolve(tmp_path, None).id == runs[-1].id
    assert resolve(tmp_path, "latest").id == runs[-1].id
    assert resolve(tmp_path, runs[0].id).id == runs[0].id
    assert resolve(tmp_path, runs[1].id.split("-")[1]).id == runs[1].id
    assert resolve(tmp_path, runs[2].id[:15]).id == runs[2].id  # 20261129T102148 is unique
    with pytest.raises(ArgumentError, match="ambiguous"):
        resolve(tmp_path, "20261129")
    with pytest.raises(ArgumentError, match="no run 'nope'"):
        resolve(tmp_path, "nope")
    with pytest.raises(ArgumentError, match="no runs under"):
        resolve(tmp_path / "empty", None)
