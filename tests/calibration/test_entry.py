"""calibration/entry.py: the stored form of an entry, read back exactly, refused when wrong."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from servefit._plan.planner import PlanRequest
from servefit.calibration.entry import Measurements, UnreadableEntry, fingerprint, from_dict
from servefit.model.inventory import load_model
from tests.calibration.helpers import entry_for


@pytest.fixture(scope="module")
def entry():
    return entry_for(
        PlanRequest(model="Qwen/Qwen3-8B", gpu="H100", engine="vllm==0.24.0"),
        Measurements(kv_available_gib=55.4, weights_gib=15.27, kv_tokens=403_344),
    )


def test_an_entry_reads_back_as_written(entry):
    data = json.loads(json.dumps(entry.to_dict()))
    assert data["schema_version"] == 1
    assert from_dict(data, "x") == entry


@pytest.mark.parametrize(
    "change, words",
    [
        ({"schema_version": 2}, "calibration schema 2, this servefit reads 1"),
        ({"tp": "2"}, "tp: expected int, got '2'"),
        ({"tp": True}, "tp: expected int, got True"),
        ({"measured": {"weights_gib": -1}}, "measured.weights_gib: expected a non-negative"),
        ({"measured": {"weights_gib": float("nan")}}, "measured.weights_gib"),
        ({"measured": {"peak": 1.0}}, "unknown measured term(s) ['peak']"),
        ({"measured": []}, "'measured' must be an object"),
    ],
)
def test_a_wrong_field_is_named(entry, change, words):
    data = {**entry.to_dict(), **change}
    with pytest.raises(UnreadableEntry) as exc:
        from_dict(data, "f.json")
    assert str(exc.value).startswith("f.json: ") and words in str(exc.value)


def test_a_missing_field_is_named(entry):
    data = entry.to_dict()
    del data["gpu"]
    with pytest.raises(UnreadableEntry, match=r"missing 'gpu'"):
        from_dict(data, "f.json")
    with pytest.raises(UnreadableEntry, match="a JSON object is expected"):
        from_dict([1], "f.json")


def test_the_fingerprint_is_the_model_not_its_name():
    m = load_model("Qwen/Qwen3-8B")
    assert fingerprint(replace(m, name="/root/models/qwen3", source="/root")) == fingerprint(m)
    assert fingerprint(replace(m, dtype="float16")) != fingerprint(m)
    assert fingerprint(load_model("Qwen/Qwen3-32B")) != fingerprint(m)
