"""Cold and doctor accuracy on every real start-up log servefit can replay whole.

A case is a log in tests/data/ground-truth (provenance: tests/data/PROVENANCE.md) whose model
config, GPU, engine release and flags are known (the inputs below, each from the case's notes
in cases.jsonl). For each, two predictions of the figure the engine logged:

    cold    plan() from the config, the catalog GPU and the flags: what a user gets before
            any start
    doctor  the doctor's replay of the log's launch (doctor/replay.py), with the log's own
            measurements: SGLang's free memory before the weights and the weights, vLLM's
            weights and "Available KV cache memory"

The committed table (tests/data/ground-truth/accuracy.json) is what tests/plan/
test_accuracy_table.py checks and the README shows; `python tools/accuracy_table.py --write`
regenerates it after a planner change, `python tools/accuracy_table.py` prints it.

Logs left out, and why, are listed in tests/plan/test_ground_truth_vllm.py and
test_ground_truth_sglang.py (no config, GPU not stated, the V0 engine).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.explain.test_vllm_club612 import ARGS as CLUB612_ARGS
from tests.groundtruth import CASES, DATA, GT

TABLE = GT / "accuracy.json"
CODER = str(DATA / "calibration" / "Qwen__Qwen3-Coder-480B-A35B-Instruct-FP8.config.json")
QWEN38_FP8 = "qwen38-fp8"  # tests/qwen38_fp8.py: the Qwen3.5-27B config with block-FP8 weights
# the three logs the vLLM non-KV constants were fitted on (engines/vllm/profiling.py)
FITTED_ON = {
    "vllm_qwen3next_80b_instruct_2xh200_tp2_v0102",
    "vllm_qwen38_27b_offline_1xa100_v028",
    "vllm_qwen36_35b_a3b_nvfp4_1x5090_club612",
}


@dataclass(frozen=True)
class Case:
    id: str
    model: str
    gpu: str
    gpu_class: str  # for the README's distribution
    engine: str
    args: dict[str, Any]
    launch: int = 1  # the launch of the excerpt that is this case
    metric: str = "kv_tokens"  # or "kv_available_gib": a start that failed before allocating
    replay_args: bool = True  # False: the log carries its own command (doctor reads it)
    notes: list[str] = field(default_factory=list)


SGL38 = {"mem_fraction_static": 0.85, "max_running_requests": 32}
DP8 = {"data_parallel_size": 8, "enable_expert_parallel": True}

ACCURACY_CASES = [
    Case("sgl_qwen38_27b_fp8_1xh100_v0518", QWEN38_FP8, "H100", "datacenter", "sglang==0.5.18", SGL38),
    Case("sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm", QWEN38_FP8, "MI355X", "datacenter", "sglang==0.5.17", {**SGL38, "tp_size": 1}),
    Case("sgl_qwen38_27b_fp8_2xmi355x_tp2_v0517rocm", QWEN38_FP8, "MI355X", "datacenter", "sglang==0.5.17", {**SGL38, "tp_size": 2}, launch=2),
    Case("vllm_qwen36_35b_a3b_nvfp4_1x5090_club612", "nvidia/Qwen3.6-35B-A3B-NVFP4", "RTX 5090", "consumer", "vllm==0.24.0", CLUB612_ARGS),
    Case("vllm_qwen3next_80b_instruct_2xh200_tp2_v0102", "Qwen/Qwen3-Next-80B-A3B-Thinking", "H200", "datacenter", "vllm==0.10.2", {"tensor_parallel_size": 2}),
    Case("vllm_qwen38_27b_offline_1xa100_v028", "Qwen/Qwen3.5-27B", "A100 80GB", "datacenter", "vllm==0.28.0", {"max_num_batched_tokens": 8192, "max_num_seqs": 256, "enable_prefix_caching": True}, launch=2),
    Case("vllm_qwen3coder480b_fp8_8xh20_dp8ep_util090_recipes12", CODER, "H20 141GB", "datacenter", "vllm==0.10.1", DP8, launch=1, metric="kv_available_gib", replay_args=False),
    Case("vllm_qwen3coder480b_fp8_8xh20_dp8ep_util095_recipes12", CODER, "H20 141GB", "datacenter", "vllm==0.10.1", {**DP8, "gpu_memory_utilization": 0.95}, launch=2, metric="kv_available_gib", replay_args=False),
]  # fmt: skip


def _model(ref: str) -> Any:
    if ref == QWEN38_FP8:
        from tests.qwen38_fp8 import qwen38_fp8_spec

        return qwen38_fp8_spec("Qwen/Qwen3.8-27B-FP8 (Qwen3.5-27B arch)")
    return ref


def _figure(p: Any, metric: str) -> float:
    if metric == "kv_tokens":
        return p.pools.max_total_num_tokens
    return round(p.pools.budget_gib, 2)  # as vLLM prints it


def logged(case: Case) -> float:
    """The figure the engine printed for the case's launch, as the doctor reads it."""
    from servefit.doctor.launches import read_log

    launch = read_log(str(GT / f"{case.id}.txt")).launches[case.launch - 1]
    if case.metric == "kv_available_gib":
        from servefit.doctor.calibration import measurements

        value = measurements(launch).kv_available_gib
    else:
        pools = launch.pools
        value = pools.max_total_num_tokens or pools.gpu_kv_cache_tokens or pools.kv_tokens
    assert value is not None, f"{case.id}: launch {case.launch} printed no {case.metric}"
    return value


def row(case: Case) -> dict[str, Any]:
    from servefit._plan.planner import PlanRequest, plan
    from servefit.doctor.launches import read_log
    from servefit.doctor.replay import replay

    model = _model(case.model)
    want = logged(case)
    cold = plan(PlanRequest(model=model, gpu=case.gpu, engine=case.engine, args=case.args))
    launch = read_log(str(GT / f"{case.id}.txt")).launches[case.launch - 1]
    rep, planned, _ = replay(
        launch,
        model=model,
        gpu=case.gpu,
        engine=case.engine,
        command_args=case.args if case.replay_args else None,
    )
    assert rep is not None and planned is not None, f"{case.id}: no replay"
    c, d = _figure(cold, case.metric), _figure(planned[0], case.metric)
    return {
        "case": case.id,
        "engine": case.engine.split("==")[0],
        "gpu_class": case.gpu_class,
        "metric": case.metric,
        "logged": want,
        "cold": c,
        "cold_error_pct": round((c - want) / want * 100, 2),
        "doctor": d,
        "doctor_error_pct": round((d - want) / want * 100, 2),
        "cold_verdict": cold.verdict,
        "doctor_verdict": planned[0].verdict,
        "logged_outcome": launch.outcome,
        "fitted_on": case.id in FITTED_ON,
        "source": CASES[case.id]["source"],
    }


def table() -> list[dict[str, Any]]:
    return [row(c) for c in ACCURACY_CASES]


def committed() -> list[dict[str, Any]]:
    return json.loads(TABLE.read_text(encoding="utf-8"))
