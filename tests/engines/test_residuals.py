"""engines/residuals.py: each residual, recomputed from its real log (logged - modelled)."""

from __future__ import annotations

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.doctor.calibration import measured
from servefit.doctor.launches import read_log
from servefit.doctor.replay import replay
from servefit.engines import residuals as R
from tests.doctor.test_seed_case import FAIL
from tests.groundtruth import GT
from tests.groundtruth_accuracy import ACCURACY_CASES, _model

BY_ID = {c.id: c for c in ACCURACY_CASES}
SEED = "sglang_0_5_9_seed_085_fail"
SEED_ARGS = {
    "tp_size": 2,
    "mem_fraction_static": 0.85,
    "context_length": 32768,
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}


def _cold_and_launch(case_id: str):
    if case_id == SEED:
        request = PlanRequest(
            model="Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", args=SEED_ARGS
        )
        return plan(request), read_log(str(FAIL)).launches[0], None
    c = BY_ID[case_id]
    request = PlanRequest(model=_model(c.model), gpu=c.gpu, engine=c.engine, args=c.args)
    launch = read_log(str(GT / f"{c.id}.txt")).launches[c.launch - 1]
    return plan(request), launch, c


@pytest.mark.parametrize("case_id", sorted(R.SGLANG_FREE_BEFORE_WEIGHTS_GIB.values))
def test_free_memory_before_the_weights(case_id):
    cold, launch, _ = _cold_and_launch(case_id)
    P, _ = measured(launch)
    got = P - cold.per_rank.pre_load_free_gib
    assert got == pytest.approx(R.SGLANG_FREE_BEFORE_WEIGHTS_GIB.values[case_id], abs=5e-4)


@pytest.mark.parametrize("case_id", sorted(R.WEIGHTS_FRACTION.values))
def test_weights(case_id):
    cold, launch, _ = _cold_and_launch(case_id)
    _, W = measured(launch)
    got = W / cold.per_rank.weights_gib - 1
    assert got == pytest.approx(R.WEIGHTS_FRACTION.values[case_id], abs=5e-5)


@pytest.mark.parametrize("case_id", sorted(R.VLLM_NONKV_FRACTION.values))
def test_vllm_profiling_run(case_id):
    cold, launch, c = _cold_and_launch(case_id)
    args = c.args if c.replay_args else None
    rep, _, _ = replay(launch, model=_model(c.model), gpu=c.gpu, engine=c.engine, command_args=args)
    got = rep.measured_nonkv_correction_gib / cold.per_rank.activation_gib
    assert got == pytest.approx(R.VLLM_NONKV_FRACTION.values[case_id], abs=5e-5)


def test_bounds_and_held_out_logs():
    assert R.SGLANG_FREE_BEFORE_WEIGHTS_GIB.bound == 0.239
    assert R.SGLANG_FREE_BEFORE_WEIGHTS_GIB.held_out == {SEED: -0.239}
    assert R.WEIGHTS_FRACTION.bound == 0.0237
    assert R.VLLM_NONKV_FRACTION.held_out == {
        "vllm_qwen3coder480b_fp8_8xh20_dp8ep_util090_recipes12": 0.3891
    }
