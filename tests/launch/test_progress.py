"""The progress view: the engine's numbers next to the plan's prediction of the same line."""

from __future__ import annotations

import io

from rich.console import Console

from servefit._plan.planner import plan
from servefit.launch.progress import (
    Comparison,
    ProgressView,
    comparisons,
    planned_facts,
    render_checks,
)
from servefit.launch.schema import Check, EngineFacts, RunRecord, Timings
from tests.launch.test_preflight import FIX_ARGS, request


def seed_fix_plan() -> dict:
    return plan(request(FIX_ARGS)).model_dump(mode="json")


def test_planned_numbers_are_read_from_the_plans_predicted_log_lines():
    predicted = planned_facts(seed_fix_plan(), "sglang")
    # README: the seed fix plans 337,294 KV tokens and 16 state slots; its predicted line
    # "KV Cache is allocated. #tokens: 337294, K size: 5.15 GB, V size: 5.15 GB"
    assert (predicted.kv_tokens, predicted.mamba_slots, predicted.kv_gib) == (337294, 16, 10.30)
    assert predicted.weights_gib == 25.48  # "Load weight end. ... mem usage=25.48 GB."


def test_comparison_text():
    # (333,712 - 337,294) / 337,294 = -1.06 %
    assert (
        Comparison("KV tokens", 333712, 337294, "").text()
        == "KV tokens 333,712 (planned 337,294, -1.1 %)"
    )
    assert Comparison("state slots", 16, 16, "").text() == "state slots 16 (as planned)"
    assert Comparison("weights", 25.51, None, "GiB").text() == "weights 25.51 GiB"
    facts = EngineFacts(kv_tokens=333712, max_concurrency=10.18)
    labels = [c.label for c in comparisons(facts, None)]
    assert labels == ["KV tokens", "full-context requests"]


def _record(**timings: float) -> RunRecord:
    return RunRecord(
        id="r",
        engine="sglang",
        command_line="x",
        cwd="/",
        host="127.0.0.1",
        port=1,
        url="http://127.0.0.1:1",
        timings=Timings(created=0.0, started=0.0, **timings),
    )


def test_line_mode_prints_each_stage_and_number_once():
    out = io.StringIO()
    view = ProgressView(Console(file=out, width=120), seed_fix_plan(), live=False)
    rec = _record(loading_weights=1.0)
    rec.state = "loading_weights"
    view.update(rec)
    view.update(rec)
    rec.state = "allocating"
    rec.timings.allocating = 2.0
    rec.facts = EngineFacts(weights_gib=25.51, kv_tokens=333712)
    view.update(rec)
    view.update(rec)
    view.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        " … starting",
        " … loading weights",
        "     weights 25.51 GiB (planned 25.48 GiB, +0.1 %)",
        " … allocating",
        "     KV tokens 333,712 (planned 337,294, -1.1 %)",
    ]


def test_live_mode_renders_on_a_terminal():
    out = io.StringIO()
    view = ProgressView(Console(file=out, width=120, force_terminal=True), None, live=True)
    rec = _record(loading_weights=1.0, allocating=3.5)
    rec.state = "allocating"
    view.update(rec)
    view.close()
    text = out.getvalue()
    assert "loading weights" in text and "2.5 s" in text and "run r" in text


def test_preflight_messages_are_printed_as_written():
    # Seen on a real CPU-only machine: the nvml line printed "pip install 'servefit'" because
    # rich read "[gpu]" (servefit/hardware/nvml.py's hint) as markup.
    out = io.StringIO()
    checks = [
        Check(
            name="nvml",
            status="skip",
            message="GPU free memory and processes not checked: nvidia-ml-py is not installed "
            "(pip install 'servefit[gpu]')",
            detail=["[bold] stays as written"],
        )
    ]
    render_checks(Console(file=out, width=200, color_system=None), checks)
    assert "(pip install 'servefit[gpu]')" in out.getvalue()
    assert "[bold] stays as written" in out.getvalue()
