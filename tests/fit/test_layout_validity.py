"""No recommendation names a layout the engine cannot build (engines/*/layout.py): fit, the
fix's GPU-count search and explain's parallelism lever all go through the same check. The
refusals are the engines' own texts (tests/engines/*/test_layout.py)."""

from __future__ import annotations

import pytest

from servefit._explain.analysis import explain_request
from servefit._fit.search import FitRequest, fit
from servefit._plan.planner import PlanRequest
from tests.seedcase import SEED

QWEN36 = "Qwen/Qwen3.6-27B"
VISION_3 = "AssertionError: 16 is not divisible by 3"
VISION_6 = "AssertionError: 16 is not divisible by 6"


@pytest.mark.parametrize("engine", ["sglang==0.5.23", "vllm==0.33.0"])
def test_fit_on_six_gpus_never_picks_tp_3_or_6(engine):
    """6 GPUs: TP 1, 2, 3, 6 (x PP) are the layouts; Qwen3.6-27B builds at TP 1 and 2 only."""
    r = fit(FitRequest(model=QWEN36, gpu="RTX 4090", num_gpus=6, context=32768, engine=engine,
                       top=5))  # fmt: skip
    assert r.best and {c.tp_size for c in r.best} <= {1, 2}
    notes = {(n.tp_size, n.pp_size): n.rejected or "" for n in r.layouts}
    assert notes[(3, 2)].startswith(VISION_3) and notes[(6, 1)].startswith(VISION_6)


def test_the_seed_on_4090s_needs_tp_4_with_a_running_cap_not_tp_6():
    """The seed launch (MTP) on RTX 4090s: TP 2's weights (25.48 GiB) do not fit a 24 GB card;
    3 and 6 cannot be built; at TP 4 the launch as asked does not meet the floors (48 running
    requests' speculative state), but TP 4 with --max-running-requests 10 does. Before, the
    answer was "TP 6 on 6 GPUs", which SGLang refuses."""
    e = explain_request(
        PlanRequest(
            model=QWEN36,
            gpu="RTX 4090",
            engine="sglang==0.5.9",
            args={**SEED, "mem_fraction_static": 0.85},
        )  # fmt: skip
    )
    g = e.fix.gpus
    assert (g.tp_size, g.pp_size, g.num_gpus) == (4, 1, 4)
    assert g.flags == "--max-running-requests 10"
    assert g.args["max_running_requests"] == 10 and g.outcome.verdict == "ok"


def test_explain_shows_the_refusal_for_a_layout_it_cannot_build():
    """explain's parallelism lever on 3 GPUs: every layout of 3 and 6 GPUs re-planned; TP 3
    and TP 6 carry the engine's refusal, not a memory verdict."""
    e = explain_request(
        PlanRequest(
            model=QWEN36,
            gpu="H200",
            engine="vllm==0.33.0",
            args={"tensor_parallel_size": 1, "max_model_len": 32768},
            num_gpus=3,
        )
    )
    lever = next(lv for lv in e.levers if lv.name == "parallelism")
    seen = set()
    for v in lever.values:
        tp = v.args.get("tensor_parallel_size")
        if tp in (3, 6):
            assert v.outcome is None  # refused outright: no memory outcome to compare
            assert v.rejected.startswith(VISION_3 if tp == 3 else VISION_6)
            seen.add(tp)
    assert seen == {3, 6}
