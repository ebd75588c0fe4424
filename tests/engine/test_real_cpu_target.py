"""servefit's CPU target (`--device cpu`) against the real engine: `plan` reproduces the start-up
figures of each live log in the engine's own words (block size, Mamba page padding, the KV
memory line, KV tokens, maximum concurrency), predicts each failure with the engine's text and
`doctor` replays each live log, calibrated, within 0.5 %, with the block size compared, and names
the same cause and fix as `plan`/`explain`.

Every expected figure is the engine's own: a line of the log of the server just started.
"""

from __future__ import annotations

import pytest

from tests.engine.live import CRASHING, FAILING, LAUNCHED, READY
from tests.engine.machine import (
    KV_REFUSAL,
    format_gib,
    kv_space_lines,
    record_refusal_residual,
    same_refusal,
)
from tests.engine.pool import EnginePool
from tests.engine.real import capacity_lines, engine_error, matches, messages, plan_args, servefit
from tools.engine_cases import CASES

pytestmark = pytest.mark.engine


def planned(pool: EnginePool, name: str, command: str = "plan") -> tuple[int, dict]:
    out = servefit(*plan_args(CASES[name], pool.model(name), pool.flags(name), command))
    return out.rc, out.json()


@pytest.mark.parametrize("name", READY)
def test_plan_reproduces_the_live_start_up(engine_pool: EnginePool, name: str) -> None:
    server = engine_pool.serve(name)
    assert server.outcome.state == "ready", server.log_text()[-4000:]
    engine = capacity_lines(messages(server.log_text()))
    assert {"kv_tokens", "concurrency", "kv_space"} <= set(engine), engine
    if CASES[name].model != "qwen3-tiny":  # hybrids align the attention block to the Mamba page
        assert {"block", "padding"} <= set(engine), engine

    rc, plan = planned(engine_pool, name)
    assert rc == 0 and plan["verdict"] == "ok", plan.get("error")
    # the plan read this machine's node (hardware/cpu.py), not /proc/meminfo's total
    node = plan["hardware"]["cpu_node"]
    assert format_gib(node["total_bytes"]) in engine_pool.sampler.totals(), node
    predicted = capacity_lines(plan["log_lines"])
    assert set(predicted) == set(engine)
    for kind, line in engine.items():
        if kind == "kv_space":  # the node's total: what this machine showed while it ran
            seen = engine_pool.sampler.totals()
            assert line in kv_space_lines(predicted[kind], seen), (predicted[kind], line, seen)
        else:
            assert matches(predicted[kind], line), (kind, predicted[kind], line)


@pytest.mark.parametrize("name", [*FAILING, CRASHING])
def test_plan_predicts_the_live_failure(engine_pool: EnginePool, name: str) -> None:
    server = engine_pool.serve(name)
    assert server.outcome.state == "exited" and server.outcome.returncode != 0
    rc, plan = planned(engine_pool, name)
    assert rc == 1 and plan["verdict"] == "fail"
    error = engine_error(server.log_text())
    if KV_REFUSAL.fullmatch(plan["error"]):  # figures the worker measured on this machine
        record_refusal_residual(plan["error"], error)
        assert same_refusal(plan["error"], error, engine_pool.sampler.totals()), (plan["error"],
                                                                                  error)
    else:
        assert plan["error"] == error


@pytest.mark.parametrize("name", READY)
def test_doctor_replays_the_live_log_calibrated(engine_pool: EnginePool, name: str) -> None:
    server = engine_pool.serve(name)
    config = engine_pool.model(name) / "config.json"
    report = servefit("doctor", str(server.log_path), "-m", str(config), "--format", "json").json()
    replay = report["replay"]
    assert replay is not None and replay["calibrated"], report["findings"]
    checks = {c["name"]: c for c in replay["checks"]}
    if CASES[name].model != "qwen3-tiny":
        assert checks["attention block size"]["gap_pct"] == 0
    assert {"KV tokens", "max concurrency at max_model_len"} <= set(checks)
    for check in checks.values():
        assert abs(check["gap_pct"]) <= 0.5, check
    assert not [f for f in report["findings"] if f["code"] == "planner_gap"], report["findings"]
    if name == LAUNCHED:
        # the launch tests' own requests (one without the API key, tools without a parser) are
        # logged HTTP errors; nothing else may be wrong
        warned = {f["code"] for f in report["findings"] if f["severity"] != "info"}
        assert warned <= {"http_errors"}, report["findings"]
    else:
        assert report["status"] == "ok", report["findings"]


@pytest.mark.parametrize("name", [n for n in [*FAILING, CRASHING] if "unknown-flag" not in n])
def test_doctor_names_the_planned_cause_and_fix(engine_pool: EnginePool, name: str) -> None:
    server = engine_pool.serve(name)
    config = engine_pool.model(name) / "config.json"
    report = servefit("doctor", str(server.log_path), "-m", str(config), "--format", "json").json()
    _, explanation = planned(engine_pool, name, "explain")
    logged = report["root_cause"]["error"]["message"]
    fix = explanation["fix"]
    assert fix and fix["found"], explanation["fix"]
    assert report["fix"] is not None, report
    doctor_fix = {(c["flag"], c["new"]) for c in report["fix"]["best"]["changes"]}
    refusal = KV_REFUSAL.fullmatch(logged)
    if refusal:
        # the same cause; doctor sizes its fix from the available memory the worker measured,
        # explain from the node's now: the same flag, doctor's size within the engine's figure
        assert same_refusal(explanation["plan"]["error"], logged, engine_pool.sampler.totals())
        assert {f for f, _ in doctor_fix} == {c["flag"] for c in fix["best"]["changes"]}
        assert {f for f, _ in doctor_fix} == {"--kv-cache-memory-bytes"}
        assert all(int(v) <= float(refusal["available"]) * 2**30 for _, v in doctor_fix)
        return
    assert explanation["plan"]["error"] == logged
    assert doctor_fix == {(c["flag"], c["new"]) for c in fix["best"]["changes"]}
