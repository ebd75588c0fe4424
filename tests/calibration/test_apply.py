"""Plans calibrated from real starts (calibration/apply.py), against the real logs.

Expected values are the logs' own lines (tests/data/ground-truth, provenance in
tests/data/PROVENANCE.md):

- held out: vllm-project/recipes#12 ran Qwen3-Coder-480B-A35B-FP8 on 8x H20 (DP 8, EP) twice,
  at --gpu-memory-utilization 0.90 and 0.95, and both starts printed their "available KV cache
  memory" (48.66 and 55.65 GiB) in vLLM's max-model-len refusal. Calibrated on one, the plan of
  the other must give that other's figures; cold, servefit is 2.67 GiB (5.5 %) high on both.
- the same launch re-planned: three vLLM starts that printed "Available KV cache memory" and
  "Model loading took" (Qwen3-Next-80B on 2x H200 with 0.10.2, Qwen3.5-27B on an A100 with
  0.28.0, Qwen3.6-35B-A3B NVFP4 on an RTX 5090 with 0.24.0): the KV tokens within 0.1 %.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.calibration import store
from servefit.calibration.apply import calibrate
from servefit.calibration.entry import Measurements, from_dict
from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log
from tests.calibration.helpers import entry_for
from tests.explain.test_vllm_club612 import ARGS as CLUB612_ARGS
from tests.groundtruth import CASES, DATA, GT, observed

CODER = DATA / "calibration" / "Qwen__Qwen3-Coder-480B-A35B-Instruct-FP8.config.json"
RECIPES = GT / "vllm_qwen3coder480b_fp8_8xh20_dp8ep_util090_recipes12.txt"
H20 = "H20 141GB"
DP8 = {"data_parallel_size": 8, "enable_expert_parallel": True}

AVAIL = r"Available KV cache memory: (?P<gib>[\d.]+) GiB"
TOKENS = r"GPU KV cache size: (?P<tok>[\d,]+) tokens"
LOADED = r"Model loading took (?P<w>[\d.]+) GiB"
REFUSAL = r"available KV cache memory \((?P<gib>[\d.]+) GiB\)\. .* length is (?P<len>\d+)\."


def _recorded_from_launch(index: int, tmp_path) -> None:
    """`servefit doctor` on the recipes12 log, diagnosing launch `index`, as it records it."""
    log = read_log(str(RECIPES))
    launch = log.launches[index - 1]
    report = diagnose(
        log.model_copy(update={"launches": [launch]}),
        model=str(CODER),
        gpu=H20,
        engine="vllm==0.10.1",
    )
    assert report.calibration is not None
    store.save(from_dict(report.calibration, "doctor"), tmp_path)


def _coder(util: float | None) -> PlanRequest:
    args = dict(DP8) | ({"gpu_memory_utilization": util} if util else {})
    return PlanRequest(model=str(CODER), gpu=H20, engine="vllm==0.10.1", args=args)


@pytest.mark.parametrize(
    "recorded, planned, case",
    [
        (2, None, "vllm_qwen3coder480b_fp8_8xh20_dp8ep_util090_recipes12"),  # 0.95 -> 0.90
        (1, 0.95, "vllm_qwen3coder480b_fp8_8xh20_dp8ep_util095_recipes12"),  # 0.90 -> 0.95
    ],
)
def test_a_start_calibrates_its_neighbour(recorded, planned, case, tmp_path):
    want = observed(case, REFUSAL)
    _recorded_from_launch(recorded, tmp_path)
    cold = plan(_coder(planned))
    request, notes = calibrate(_coder(planned), tmp_path)
    assert notes == [] and request.calibration is not None
    assert request.calibration.differs == [
        "gpu_memory_utilization: 0.95 -> default"
        if planned is None
        else "gpu_memory_utilization: default -> 0.95"
    ]
    p = plan(request)
    assert p.calibration is not None and p.verdict == "fail"
    # cold: 2.67 GiB above the log; calibrated: the log's figure, to its 2 decimals
    assert cold.pools.budget_gib - float(want["gib"]) == pytest.approx(2.67, abs=0.01)
    assert p.pools.budget_gib == pytest.approx(float(want["gib"]), abs=0.005)
    assert f"available KV cache memory ({want['gib']} GiB)" in p.error
    # the engine's estimate of the longest request, within its rounding to 2 decimals of GiB
    longest = int(p.error.split("length is ")[1].split(".")[0])
    assert longest == pytest.approx(int(want["len"]), rel=1e-3)


def test_the_doctor_replay_takes_the_logs_available_memory():
    report = diagnose(read_log(str(RECIPES)), model=str(CODER), gpu=H20, engine="vllm==0.10.1")
    rep = report.replay
    assert rep is not None and rep.calibrated
    assert rep.args["data_parallel_size"] == 8  # read from the log's `-dp=8` command
    assert rep.measured_nonkv_correction_gib == pytest.approx(2.667, abs=0.005)
    assert "available KV cache memory (55.65 GiB)" in rep.error


READY = {
    # each case's flags and model as tests/plan/test_ground_truth_vllm.py plans them
    "vllm_qwen3next_80b_instruct_2xh200_tp2_v0102": PlanRequest(
        model="Qwen/Qwen3-Next-80B-A3B-Thinking",
        gpu="H200",
        engine="vllm==0.10.2",
        args={"tensor_parallel_size": 2},
    ),
    "vllm_qwen38_27b_offline_1xa100_v028": PlanRequest(
        model="Qwen/Qwen3.5-27B",
        gpu="A100 80GB",
        engine="vllm==0.28.0",
        args={"max_num_batched_tokens": 8192, "max_num_seqs": 256, "enable_prefix_caching": True},
    ),
    "vllm_qwen36_35b_a3b_nvfp4_1x5090_club612": PlanRequest(
        model="nvidia/Qwen3.6-35B-A3B-NVFP4",
        gpu="RTX 5090",
        engine="vllm==0.24.0",
        args=CLUB612_ARGS,
    ),
}


@pytest.mark.parametrize("case", sorted(READY))
def test_the_same_launch_replanned_is_exact(case, tmp_path):
    request = READY[case]
    loaded = [line for line in CASES[case]["observed"] if re.search(LOADED, line)]
    logged = Measurements(
        kv_available_gib=float(observed(case, AVAIL)["gib"]),
        weights_gib=float(re.search(LOADED, loaded[0])["w"]) if loaded else None,  # type: ignore[index]
    )
    store.save(entry_for(request, logged), tmp_path)
    calibrated, _ = calibrate(request, tmp_path)
    assert calibrated.calibration is not None and calibrated.calibration.differs == []
    p = plan(calibrated)
    tokens = int(observed(case, TOKENS)["tok"].replace(",", ""))
    assert p.pools.budget_gib == pytest.approx(logged.kv_available_gib, abs=0.005)
    assert p.pools.max_total_num_tokens == pytest.approx(tokens, rel=1e-3)
    assert p.calibrated and "calibration correction" in {c.name for c in p.consumers}


def test_a_user_figure_wins_over_the_store(tmp_path):
    request = READY["vllm_qwen38_27b_offline_1xa100_v028"]
    store.save(entry_for(request, Measurements(kv_available_gib=40.0)), tmp_path)
    mine = replace(request, measured_weights_gib=50.0)
    assert calibrate(mine, tmp_path) == (mine, [])
    assert calibrate(replace(request, gpu="H100"), tmp_path)[0].calibration is None
