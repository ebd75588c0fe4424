"""calibration/store.py: one file per entry, never overwritten, unreadable files skipped."""

from __future__ import annotations

import os
import stat

import pytest

from servefit._plan.planner import PlanRequest
from servefit.calibration import store
from servefit.calibration.entry import Measurements
from servefit.errors import ArgumentError
from tests.calibration.helpers import entry_for


def _entry(source="/logs/a.log", kv=55.4):
    return entry_for(
        PlanRequest(model="Qwen/Qwen3-8B", gpu="H100", engine="vllm==0.24.0"),
        Measurements(kv_available_gib=kv),
        source=source,
    )


def test_the_store_is_where_the_variable_says(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, str(tmp_path / "c"))
    assert store.root() == tmp_path / "c"
    monkeypatch.delenv(store.ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert store.root() == tmp_path / "state" / "servefit" / "calibration"


def test_saved_once_private_and_read_back(tmp_path):
    e = _entry()
    path, written = store.save(e, tmp_path)
    assert written and path == tmp_path / f"{e.id}.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    before = path.read_bytes()
    again, written = store.save(e, tmp_path)  # the same start recorded twice
    assert not written and again == path and path.read_bytes() == before
    entries, notes = store.load(tmp_path)
    assert entries == [e] and notes == []
    assert sorted(os.listdir(tmp_path)) == [f"{e.id}.json"]  # no temporary file left


def test_a_file_that_is_not_an_entry_is_skipped_and_kept(tmp_path):
    store.save(_entry(), tmp_path)
    (tmp_path / "notes.json").write_text("{not json", encoding="utf-8")
    entries, notes = store.load(tmp_path)
    assert len(entries) == 1
    assert len(notes) == 1 and "notes.json: not readable JSON" in notes[0]
    assert (tmp_path / "notes.json").exists()


def test_find_by_prefix_and_forget(tmp_path):
    a, b = _entry("/logs/a.log"), _entry("/logs/b.log", kv=50.0)
    store.save(a, tmp_path)
    store.save(b, tmp_path)
    assert store.find(a.id[:6], tmp_path) == a
    with pytest.raises(ArgumentError, match="no calibration entry 'zzz'"):
        store.find("zzz", tmp_path)
    store.forget(a, tmp_path)
    assert store.load(tmp_path)[0] == [b]


def test_a_missing_store_is_empty(tmp_path):
    assert store.load(tmp_path / "none") == ([], [])
