"""_plan/band.py: a cold plan at the edges of the measured terms' residuals
(engines/residuals.py); MARGINAL when the verdict flips inside."""

from __future__ import annotations

import json

import pytest

from servefit._plan.band import band_of, with_band
from servefit._plan.planner import PlanRequest, plan
from servefit.engines import residuals as R
from tests.clihelp import run
from tests.doctor.test_seed_case import SERVE

SEED_088 = PlanRequest(
    model="Qwen/Qwen3.6-27B",
    gpu="A6000",
    engine="sglang==0.5.9",
    args={
        "tp_size": 2,
        "mem_fraction_static": 0.88,
        "context_length": 32768,
        "max_running_requests": 16,
        "mamba_full_memory_ratio": 0.5,
        "speculative_algorithm": "NEXTN",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
    },
)
QWEN3_8B_4090 = PlanRequest(
    model="Qwen/Qwen3-8B", gpu="RTX 4090", engine="vllm==0.24.0", args={"max_model_len": 32768}
)


def test_sglang_band_is_the_residuals_through_the_budget_and_holds_the_real_start():
    p = plan(SEED_088)
    b = band_of(SEED_088, p)
    assert b is not None and not b.marginal and b.verdict_low == b.verdict_high == "ok"
    # rest_memory = free x mem_fraction_static - weights (0.5.9): the free-memory residual
    # counts 0.88 of itself, the weights' in full
    dp = R.SGLANG_FREE_BEFORE_WEIGHTS_GIB.bound
    dw = R.WEIGHTS_FRACTION.bound * p.per_rank.weights_gib
    assert b.kv_budget_gib == pytest.approx(0.88 * dp + dw, abs=1e-3)  # 0.814
    # the start this plan is of logged 330,089 KV tokens (sglang_0_5_9_seed_088_serve.log)
    assert "#tokens: 330089" in SERVE.read_text()
    assert b.kv_tokens_low < 330089 < b.kv_tokens_high


def test_vllm_band_flips_a_near_miss_to_marginal():
    p = plan(QWEN3_8B_4090)
    assert p.verdict == "fail"  # 4.50 GiB for one 32k request > 4.18 GiB modelled
    b = band_of(QWEN3_8B_4090, p)
    assert b is not None and b.marginal and b.verdict_high == "ok" and b.verdict_low == "fail"
    dn = R.VLLM_NONKV_FRACTION.bound * p.per_rank.activation_gib
    dw = R.WEIGHTS_FRACTION.bound * p.per_rank.weights_gib
    assert b.kv_budget_gib == pytest.approx(dn + dw, abs=2e-3)


def test_a_calibrated_plan_has_no_band():
    from dataclasses import replace

    measured = replace(SEED_088, measured_free_before_gib=46.93, measured_weights_gib=25.49)
    assert with_band(measured, plan(measured)).band is None


def test_the_cli_says_marginal_first(capsys):
    argv = ["plan", "-m", "Qwen/Qwen3-8B", "--gpu", "RTX 4090", "-e", "vllm==0.24.0"]
    code, out, _ = run(capsys, *argv, "--max-model-len", "32768")
    assert code == 1 and out.startswith("MARGINAL: fails as modelled, but starts with 1.03 GiB")
    code, out, _ = run(capsys, *argv, "--max-model-len", "32768", "--format", "json")
    band = json.loads(out)["band"]
    assert band["marginal"] is True and band["verdict_high"] == "ok"
