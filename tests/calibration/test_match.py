"""calibration/match.py: an entry applies to the same release, GPU, model and layout only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servefit._plan.planner import PlanRequest
from servefit.calibration import match
from servefit.calibration.entry import Measurements
from tests.calibration.helpers import entry_for


@pytest.fixture(scope="module")
def entry():
    return entry_for(
        PlanRequest(
            model="Qwen/Qwen3-8B",
            gpu="H100",
            engine="vllm==0.24.0",
            args={"max_num_seqs": 256, "served_model_name": "q"},
        ),
        Measurements(kv_available_gib=55.4),
    )


@pytest.mark.parametrize(
    "field, value",
    [
        ("profile", "0.23.0"),
        ("gpu", "NVIDIA A100 80GB"),
        ("gpu_memory_mib", 95_830),
        ("model_fingerprint", "0" * 16),
        ("tp", 2),
        ("dp", 2),
        ("ep", 2),
        ("engine", "sglang"),
    ],
)
def test_each_key_field_must_be_equal(entry, field, value):
    key = match.key_of(entry)
    assert match.best([entry], key, {}) is not None
    assert match.best([entry], replace(key, **{field: value}), {}) is None


def test_the_gpu_name_ignores_case_and_its_memory_one_percent(entry):
    key = match.key_of(entry)
    assert match.same(
        key, replace(key, gpu=key.gpu.upper(), gpu_memory_mib=key.gpu_memory_mib - 500)
    )


def test_the_fewest_differences_win_and_are_named(entry):
    key = match.key_of(entry)
    other = replace(entry, id="other", args={"max_num_seqs": 64})
    hit = match.best([entry, other], key, {"max_num_seqs": 64, "served_model_name": "x"})
    assert hit is not None and hit.entry.id == "other" and hit.differs == ()
    hit = match.best([entry], key, {"max_num_seqs": 64})
    assert hit is not None and hit.differs == ("max_num_seqs: 256 -> 64",)


def test_an_entry_without_its_engine_figures_is_not_used(entry):
    sglang_like = replace(entry, measured=Measurements(weights_gib=15.0))
    assert match.best([sglang_like], match.key_of(entry), {}) is None
