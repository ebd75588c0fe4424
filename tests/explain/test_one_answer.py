"""plan's fix, explain's lever table and explain's fix name the same best and closest values,
under the criteria they print (_explain/fix.py:ranking_line). For the seed's
--mem-fraction-static 0.85 the lever table used to say "best 16: effective concurrency 8.88"
and "starts at 0.92, 0.94" while the fix said --max-running-requests 12 (10.31) and 0.93."""

from __future__ import annotations

from servefit._explain.analysis import explain_request, fix_request
from servefit._plan.planner import PlanRequest, plan
from tests.seedcase import SEED

SEED_085 = PlanRequest(model="Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9",
                       args={**SEED, "mem_fraction_static": 0.85})  # fmt: skip


def _lever(e, name):
    return next(lv for lv in e.levers if lv.name == name)


def test_lever_table_and_fix_agree_on_the_seed():
    e = explain_request(SEED_085)
    assert e.fix.best.command_flags == "--max-running-requests 12"
    assert e.fix.minimal.command_flags == "--mem-fraction-static 0.93"
    running = _lever(e, "max_running_requests")
    marked = {v.label: v.fix for v in running.values if v.fix}
    assert marked == {"12": "the fix"}
    # the lever's summary names the same best, by the fix's ranking
    assert "best 12: 10.31 full-context requests at once, 12 running" in running.reason
    fraction = _lever(e, "mem_fraction_static")
    assert {v.label: v.fix for v in fraction.values if v.fix} == {
        "0.93": "closest to what you asked"
    }
    # 0.92 starts with 0.71 requests and 0.94 with 1.92 GiB: neither meets the floors
    assert fraction.reason.startswith("meets the fix's floors at 0.93; best 0.93")


def test_plan_prints_the_same_fix():
    p = plan(SEED_085)
    f = fix_request(SEED_085, p)
    e = explain_request(SEED_085)
    assert f.best.command_flags == e.fix.best.command_flags
    assert f.minimal.command_flags == e.fix.minimal.command_flags
    assert "both change one flag" in f.ranking
