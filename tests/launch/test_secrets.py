"""Servers started with an API key, through servefit: launch -> ready -> verify -> stop, with
every file servefit writes and every line it prints scanned for the secrets, and the run
directory's modes checked under a permissive umask.

The engine is the stand-in (tests/standin/engine.py behind the `sglang` / `vllm` shims, not an
engine): it requires the key as SGLang and vLLM do (401 {"error": "Unauthorized"}, see
tests/launch/test_auth.py) and echoes it in its start-up lines as they do (SGLang's
`server_args=ServerArgs(... api_key='...')`, vLLM's `non-default args: {... 'api_key': [...]}`),
so engine.log holds the real key and everything servefit shows must not."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from servefit.launch.rundir import RunDir, list_runs
from servefit.redact import mask
from tests.clihelp import run
from tests.launch.conftest import PYTHON, REPO, SHIM, free_port, wait_for
from tests.seedcase import HAND_TUNED_ARGV, SEED_SIZING_ARGV, SEED_TARGET_ARGV

KEY = "sk-servefit-test-4f9a0c1e2b7d"
KEY2 = "sk-servefit-second-8e1d2c3b4a"
HF = "hf_StandInTokenNotARealOne0123456789"
HIDDEN = "sk-from-a-config-file-5d6e7f"
SECRETS = (KEY, KEY2, HF, HIDDEN)
M_KEY = mask(KEY)
FAST = ["--probe-interval", "0.05", "--settle", "0.3", "--probe-timeout", "2", "--grace", "3"]
VERIFY_FAST = ["--skip", "speed", "--skip", "reference", "--timeout", "10"]
SGLANG = [PYTHON, "-m", "sglang.launch_server", *SEED_SIZING_ARGV]


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    from servefit.hardware import nvml

    monkeypatch.setattr(nvml, "local_gpus", lambda: nvml.LocalGPUs(reason="NVML library not found"))


def launch(capsys, root: Path, port: int, command: list[str], *options: str):
    return run(
        capsys,
        "launch",
        "--runs-dir",
        str(root),
        "--env",
        f"PYTHONPATH={SHIM}:{REPO}",
        *FAST,
        *options,
        "--",
        *command,
        "--port",
        str(port),
    )


def written_files(root: Path) -> list[Path]:
    """Every file under the runs root except the engine's own log."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != "engine.log")


def assert_no_secret(root: Path, printed: list[str]) -> list[Path]:
    files = written_files(root)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        leaked = [s for s in SECRETS if s in text]
        assert not leaked, f"{path.name} holds {leaked}"
    for i, out in enumerate(printed):
        leaked = [s for s in SECRETS if s in out]
        assert not leaked, f"output #{i} holds {leaked}:\n{out}"
    return files


def assert_private(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        want = 0o700 if path.is_dir() else 0o600
        assert mode == want, f"{path}: {oct(mode)}"


@pytest.fixture
def open_umask():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_sglang_with_a_key_launches_verifies_and_stops_and_nothing_leaks(
    capsys, runs_root, open_umask
):
    port = free_port()
    printed: list[str] = []
    code, out, err = launch(
        capsys,
        runs_root,
        port,
        [*SGLANG, *HAND_TUNED_ARGV, "--api-key", KEY],
        *SEED_TARGET_ARGV,
        "--env",
        f"HF_TOKEN={HF}",
    )
    printed += [out, err]
    assert code == 0, out + err
    [run_dir] = list_runs(runs_root)
    rec = run_dir.read()
    # the probes sent the launch's own key: /v1/models and the chat completion answered
    assert rec.state == "ready" and rec.served_model == "Qwen/Qwen3.6-27B"
    assert rec.probe_key == f"--api-key {mask(KEY)}" and rec.auth_note is None
    flat = " ".join(out.split())
    assert f"ready after {rec.timings.time_to_ready_s:.1f} s: http://127.0.0.1:{port}" in flat
    assert f"--api-key '{mask(KEY)}'" in flat  # the command as printed
    assert "exposure listens on 127.0.0.1 (this machine only)" in flat

    # verify reads the key from the run (the engine's own command line, never a file)
    code, out, err = run(capsys, "verify", "--run", run_dir.id, "--runs-dir", str(runs_root),
                         *VERIFY_FAST, "--format", "json")  # fmt: skip
    printed += [out, err]
    report = json.loads(out)
    assert code == 0, out
    assert report["url"] == f"http://127.0.0.1:{port}" and report["warnings"] == []
    assert {c["name"]: c["status"] for c in report["checks"]}["liveness"] == "pass"
    # without it the server says 401, and verify says what to do
    code, out, err = run(capsys, "verify", f"http://127.0.0.1:{port}", *VERIFY_FAST,
                         "--format", "json")  # fmt: skip
    printed += [out, err]
    liveness = json.loads(out)["checks"][0]
    assert code == 1 and liveness["status"] == "fail"
    assert liveness["summary"] == (
        "GET /v1/models: HTTP 401: Unauthorized: the server requires an API key; give it with "
        "--api-key or SERVEFIT_API_KEY, or --run RUN for a server servefit launched"
    )

    for args in (["runs"], ["runs", "--format", "json"], ["logs", run_dir.id],
                 ["logs", run_dir.id, "-n", "60"]):  # fmt: skip
        code, out, err = run(capsys, *args, "--runs-dir", str(runs_root))
        assert code == 0, err
        printed += [out, err]
    # SGLang's echo of its arguments is printed with the key masked
    assert f"api_key='{mask(KEY)}'" in printed[-2]

    code, out, err = run(capsys, "stop", run_dir.id, "--runs-dir", str(runs_root))
    printed += [out, err]
    assert code == 0 and "port closed" in out
    assert wait_for(lambda: run_dir.read().state == "stopped", 10)

    # the engine got the real key (it echoed it into its own log, kept verbatim)...
    assert f"api_key='{KEY}'" in run_dir.log_path.read_text()
    # ...and nothing servefit wrote or printed holds it, nor the token of its environment
    files = assert_no_secret(runs_root, printed)
    names = {p.name for p in files}
    assert {"argv.json", "env.json", "run.json", "plan.json", "supervisor.log"} <= names
    assert run_dir.read_json(run_dir.env_path)["HF_TOKEN"] == mask(HF)
    argv = run_dir.read_json(run_dir.argv_path)["argv"]
    assert argv[-4:] == ["--api-key", mask(KEY), "--port", str(port)]
    assert_private(runs_root)  # made under umask 000


def test_vllm_keys_from_flag_and_environment(capsys, runs_root, open_umask):
    port = free_port()
    command = [PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B",
               "--api-key", KEY, KEY2, "--host", "127.0.0.1"]  # fmt: skip
    code, out, err = launch(capsys, runs_root, port, command, "--env", f"HF_TOKEN={HF}")
    printed = [out, err]
    assert code == 0, out + err
    [run_dir] = list_runs(runs_root)
    rec = run_dir.read()
    assert rec.state == "ready" and rec.probe_key == f"--api-key {mask(KEY)}"
    code, out, err = run(capsys, "verify", "--run", run_dir.id, "--runs-dir", str(runs_root),
                         *VERIFY_FAST, "--format", "json")  # fmt: skip
    printed += [out, err]
    assert code == 0, out
    code, out, err = run(capsys, "logs", run_dir.id, "--runs-dir", str(runs_root))
    printed += [out, err]
    # vLLM's echo: vllm/entrypoints/utils.py:log_non_default_args
    assert f"'api_key': ['{mask(KEY)}', '{mask(KEY2)}']" in out
    code, out, err = run(capsys, "stop", run_dir.id, "--runs-dir", str(runs_root))
    printed += [out, err]
    assert code == 0
    assert f"'api_key': ['{KEY}', '{KEY2}']" in run_dir.log_path.read_text()
    assert_no_secret(runs_root, printed)
    assert_private(runs_root)

    # VLLM_API_KEY in the engine's environment, vLLM's default bind (every interface)
    port = free_port()
    command = [PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B"]
    code, out, err = launch(capsys, runs_root, port, command, "--env", f"VLLM_API_KEY={KEY2}")
    printed = [out, err]
    assert code == 0, out + err
    second = list_runs(runs_root)[-1]
    assert second.read().probe_key == f"VLLM_API_KEY {mask(KEY2)}"
    flat = " ".join(out.split())
    assert (
        f"exposure listens on every interface; requests need the key (VLLM_API_KEY {mask(KEY2)})"
        in flat
    )
    code, out, err = run(capsys, "verify", "--run", second.id, "--runs-dir", str(runs_root),
                         *VERIFY_FAST, "--format", "json")  # fmt: skip
    printed += [out, err]
    assert code == 0, out
    code, out, err = run(capsys, "stop", second.id, "--runs-dir", str(runs_root))
    printed += [out, err]
    assert_no_secret(runs_root, printed)
    code, out, err = run(capsys, "verify", "--run", second.id, "--runs-dir", str(runs_root))
    assert code == 2 and err == f"servefit: error: run {second.id} is not running (stopped)\n"


def test_a_key_servefit_does_not_know_is_not_a_failure(capsys, runs_root):
    port = free_port()
    code, out, err = launch(
        capsys, runs_root, port, SGLANG, "--env", f"STANDIN_CONFIG_API_KEY={HIDDEN}"
    )
    printed = [out, err]
    assert code == 0, out + err
    [run_dir] = list_runs(runs_root)
    rec = run_dir.read()
    # up and healthy, never failed or killed for wanting a key; the fix is said
    assert rec.state == "ready" and rec.exit_signal is None and rec.probe_key is None
    assert rec.auth_note == (
        "GET /v1/models: HTTP 401: the server requires an API key that servefit does not know; "
        "give it in the launch command (--api-key)"
    )
    assert f"only /health answered: {rec.auth_note}" in " ".join(out.split())
    assert wait_for(lambda: run_dir.read().state == "ready" and run_dir.read().pid, 1)
    code, out, err = run(capsys, "logs", run_dir.id, "--runs-dir", str(runs_root))
    printed += [out, err]
    assert f"api_key='{mask(HIDDEN)}'" in out  # SGLang echoes the config file's key
    code, out, err = run(capsys, "verify", "--run", run_dir.id, "--runs-dir", str(runs_root),
                         "--api-key", HIDDEN, *VERIFY_FAST, "--format", "json")  # fmt: skip
    printed += [out, err]
    assert code == 0, out
    code, out, err = run(capsys, "stop", run_dir.id, "--runs-dir", str(runs_root))
    printed += [out, err]
    assert code == 0
    assert_no_secret(runs_root, printed)


def test_a_failed_launch_with_a_key_diagnoses_without_showing_it(capsys, runs_root):
    code, out, err = launch(
        capsys,
        runs_root,
        free_port(),
        [*SGLANG, "--api-key", KEY, "--mem-fraction-static", "0.85"],
        *SEED_TARGET_ARGV,
        "--force",
        "--env",
        "STANDIN_FAULT=startup-oom",
        "--env",
        f"HUGGING_FACE_HUB_TOKEN={HF}",
    )
    assert code == 1
    [run_dir] = list_runs(runs_root)
    assert run_dir.read().state == "failed" and run_dir.diagnosis_path.is_file()
    assert "diagnosis" in out
    printed = [out, err]
    code, out, err = run(capsys, "logs", run_dir.id, "--diagnosis", "--runs-dir", str(runs_root))
    printed += [out, err]
    assert_no_secret(runs_root, printed)


def test_runs_of_another_user_are_refused(capsys, runs_root, monkeypatch):
    from servefit.launch.command import parse_launch
    from servefit.launch.supervisor import prepare_run

    mine = prepare_run(runs_root, parse_launch(["vllm", "serve", "Q", "--api-key", KEY]))
    assert mine.read().command_line == f"vllm serve Q --api-key '{mask(KEY)}'"
    assert_private(runs_root)
    other = os.geteuid() + 1  # the run directory is now someone else's
    monkeypatch.setattr(os, "geteuid", lambda: other)
    code, out, err = run(capsys, "logs", mine.id, "--runs-dir", str(runs_root))
    assert code == 2 and out == ""
    assert err.startswith(f"servefit: error: run {mine.id} belongs to ")
    assert "not to you: servefit reads and stops only your own runs" in err
    code, out, err = run(capsys, "stop", mine.id, "--runs-dir", str(runs_root))
    assert code == 2 and "belongs to" in err
    code, out, err = run(capsys, "runs", "--runs-dir", str(runs_root))
    assert code == 0 and mine.id not in out
    assert err == (
        f"servefit: 1 run under {runs_root} belong to other users: not shown (servefit reads "
        "only your own runs)\n"
    )
    assert isinstance(RunDir(mine.path).redactor.flags.options, frozenset)


def test_logs_redact_whole_lines_only(runs_root):
    """A line the engine is still writing is held back until it ends, so a key split between
    two reads of the growing log is still recognised."""
    from servefit.engines.secretflags import redactor
    from servefit.launch import logview
    from servefit.launch.command import parse_launch
    from servefit.launch.supervisor import prepare_run

    rundir = prepare_run(runs_root, parse_launch(["python", "-m", "sglang.launch_server"]))
    printed: list[str] = []
    with rundir.open_new_log() as log:
        log.write(f"[2026-01-01 00:00:00] server_args=ServerArgs(api_key='{KEY[:9]}".encode())
        log.flush()
        pos, rest = logview._emit(rundir.log_path, 0, b"", redactor("sglang"), printed.append)
        assert printed == [] and pos > 0
        log.write(f"{KEY[9:]}', tp_size=2)\nnext line".encode())
        log.flush()
        pos, rest = logview._emit(rundir.log_path, pos, rest, redactor("sglang"), printed.append)
    assert printed == [
        f"[2026-01-01 00:00:00] server_args=ServerArgs(api_key='{M_KEY}', tp_size=2)"
    ]
    assert rest == b"next line"
    assert stat.S_IMODE(rundir.log_path.stat().st_mode) == 0o600


def test_each_command_is_read_on_its_own(runs_root):
    """vLLM's --api-key takes every word up to the next option: the executed argv and the typed
    command are read one by one, so the typed command's words (the model path here) are never
    taken for keys of the executed one's last --api-key."""
    from servefit.launch.command import parse_launch
    from servefit.launch.supervisor import prepare_run

    words = ["vllm", "serve", "/models/qwen3-tiny-checkpoint", "--api-key", KEY, KEY2]
    rundir = prepare_run(runs_root, parse_launch(words), typed=words)
    argv = ["vllm", "serve", "/models/qwen3-tiny-checkpoint", "--api-key", M_KEY, mask(KEY2)]
    assert rundir.read_json(rundir.argv_path) == {"argv": argv, "cwd": os.getcwd(), "typed": argv}
    known = set(rundir.redactor.values)
    assert {KEY, KEY2} <= known and "/models/qwen3-tiny-checkpoint" not in known
