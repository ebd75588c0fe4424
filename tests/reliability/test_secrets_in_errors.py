"""No secret on an error path: every command is driven into its errors (bad input, exit 2; a
refused or failed launch, exit 1; an internal error, exit 3) with secrets planted where users
put them: a password in a model-path URL's userinfo, `?token=` and `X-Amz-Signature=` in its
query, `--api-key` (and a misspelled `--api-keyy`), an `HF_TOKEN=hf_...` prefix of the launch
command, an `Authorization: Bearer` header, a log the doctor reads. Each case fails on any
secret in stdout, stderr or any file servefit wrote (the runs and state directories it is
pointed at, the HTML it writes; not engine.log, the engine's own output kept verbatim).

Each case can fail: its secrets are checked to be in its input, its exit status and a needle
of the expected error are checked, and `quoted` names the secrets the error line quotes back
(their `***` + fingerprint must be printed: without the redaction the secret itself would be).
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from servefit.redact import mask
from tests.clihelp import run
from tests.launch.conftest import PYTHON, REPO, SHIM, _end_everything, free_port

PW = "pw-7f3a9c1e5b2d8e4f"
QTOKEN = "qt-9c41e8b2d7a65f03"
SIG = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
KEY = "sk-errpath-5d2e9f81c4a7b360"
TYPO_KEY = "sk-typo-0e1d2c3b4a596877"
HF = "hf_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL"
BEARER = "brr-3e8f1a9c5b2d7064aa"
SECRETS = (PW, QTOKEN, SIG, KEY, TYPO_KEY, HF, BEARER)
URL = f"https://alice:{PW}@models.example.com/org/m?token={QTOKEN}&X-Amz-Signature={SIG}"
SGLANG = ["python", "-m", "sglang.launch_server"]
SEED_LOG = REPO / "tests" / "doctor" / "logs" / "sglang_0_5_9_seed_085_fail.log"
SEED_FLAGS = "--tp-size 2 --context-length 32768 --speculative-algo NEXTN "
SEED_FLAGS += "--speculative-num-steps 3 --speculative-eagle-topk 1 "
SEED_FLAGS += "--speculative-num-draft-tokens 4 --mem-fraction-static 0.85"
COMMAND = f"HF_TOKEN={HF} python -m sglang.launch_server --model-path '{URL}' --api-key {KEY} "


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    code: int
    needle: str
    planted: tuple[str, ...]  # secrets the input holds
    quoted: tuple[str, ...] = ()  # secrets the output quotes back, masked
    json_error: bool = False  # stdout is exactly {"error": ..., "exit": code}


def _case(id: str, code: int, needle: str, planted: tuple[str, ...], *argv: str, **kw: Any) -> Case:
    return Case(id, argv, code, needle, planted, **kw)


URL_SECRETS = (PW, QTOKEN, SIG)
# fmt: off
CASES = [
    # ---- plan: the model path quoted in the error line, text and JSON
    _case("plan-url-in-launch", 2, "no such file or directory", (*URL_SECRETS, KEY, HF),
          "plan", "--gpu", "A6000", "--", f"HF_TOKEN={HF}", *SGLANG, "--model-path", URL,
          "--api-key", KEY, quoted=URL_SECRETS),
    _case("plan-url-json", 2, "no such file or directory", URL_SECRETS,
          "plan", "--gpu", "A6000", "--format", "json", "--", *SGLANG, "--model-path", URL,
          quoted=URL_SECRETS, json_error=True),
    _case("plan-model-option", 2, "no such file or directory", URL_SECRETS,
          "plan", "-m", URL, "--gpu", "H100", quoted=URL_SECRETS),
    _case("plan-gpu-url", 2, "unknown GPU", URL_SECRETS,
          "plan", "-m", "Qwen/Qwen3-8B", "--gpu", URL, quoted=URL_SECRETS),
    # the engine's argparse quotes a misspelled secret flag with its value
    _case("plan-misspelled-key", 1, "unrecognized arguments: --api-keyy", (TYPO_KEY,),
          "plan", "--gpu", "A6000", "--", *SGLANG, "--model-path", "Qwen/Qwen3-8B",
          "--api-keyy", TYPO_KEY, quoted=(TYPO_KEY,)),
    _case("plan-misspelled-key-json", 1, "unrecognized arguments: --api-keyy", (TYPO_KEY,),
          "plan", "--gpu", "A6000", "--format", "json", "--", *SGLANG, "--model-path",
          "Qwen/Qwen3-8B", "--api-keyy", TYPO_KEY, quoted=(TYPO_KEY,)),
    _case("plan-env-not-assignment", 2, "--env expects KEY=VALUE", (HF,),
          "plan", "-m", "Qwen/Qwen3-8B", "--gpu", "A6000", "--env", HF, quoted=(HF,)),
    _case("plan-env-bearer", 2, "--env expects KEY=VALUE", (BEARER,),
          "plan", "-m", "Qwen/Qwen3-8B", "--gpu", "A6000", "--env",
          f"Authorization: Bearer {BEARER}", quoted=(BEARER,)),
    # click's own usage error echoes the value
    _case("plan-click-bad-int", 2, "Invalid value for '--concurrency'", (QTOKEN,),
          "plan", "-m", "Qwen/Qwen3-8B", "--gpu", "A6000", "--concurrency",
          f"8?token={QTOKEN}", quoted=(QTOKEN,)),
    _case("plan-click-bad-int-json", 2, "Invalid value for '--concurrency'", (QTOKEN,),
          "plan", "-m", "Qwen/Qwen3-8B", "--gpu", "A6000", "--format", "json",
          "--concurrency", f"8?token={QTOKEN}", quoted=(QTOKEN,), json_error=True),
    # ---- explain, fit
    _case("explain-url", 2, "no such file or directory", (*URL_SECRETS, KEY, HF),
          "explain", "--gpu", "A6000", "--", f"HF_TOKEN={HF}", *SGLANG, "--model-path", URL,
          "--api-key", KEY, quoted=URL_SECRETS),
    _case("explain-url-json", 2, "no such file or directory", URL_SECRETS,
          "explain", "--gpu", "A6000", "--format", "json", "--", *SGLANG, "--model-path", URL,
          quoted=URL_SECRETS, json_error=True),
    _case("fit-url", 2, "no such file or directory", (*URL_SECRETS, KEY),
          "fit", "--gpu", "A6000", "-c", "32768", "--html", "{out}/fit.html", "--",
          "vllm", "serve", URL, "--api-key", KEY, quoted=URL_SECRETS),
    _case("fit-model-json", 2, "no such file or directory", URL_SECRETS,
          "fit", URL, "--gpu", "A6000", "-c", "32768", "--format", "json",
          quoted=URL_SECRETS, json_error=True),
    # ---- doctor: bad options, a missing log, and the failed launch of a log full of secrets
    _case("doctor-model-url", 2, "no such file or directory", URL_SECRETS,
          "doctor", "{in}/secrets.log", "--model", URL, quoted=URL_SECRETS),
    _case("doctor-since", 2, "--since", (QTOKEN,),
          "doctor", "{in}/secrets.log", "--since", f"10:40?token={QTOKEN}",
          quoted=(QTOKEN,)),
    _case("doctor-no-such-log", 2, "no such log file", URL_SECRETS,
          "doctor", URL, quoted=(PW, QTOKEN)),
    _case("doctor-failed-launch", 1, "not enough memory at start-up",
          (*URL_SECRETS, KEY, HF, BEARER),
          "doctor", "{in}/secrets.log", "--gpu", "A6000", "-m", "Qwen/Qwen3.6-27B",
          "--command", COMMAND + SEED_FLAGS, quoted=(*URL_SECRETS, KEY, HF)),
    _case("doctor-failed-launch-json", 1, "HfHubHTTPError", (*URL_SECRETS, KEY, HF, BEARER),
          "doctor", "{in}/secrets.log", "--gpu", "A6000", "--format", "json",
          quoted=(*URL_SECRETS, KEY, BEARER, HF)),
    # ---- launch: refused by its preflight (the port is taken), nothing started
    _case("launch-refused", 1, "not launched", (*URL_SECRETS, KEY, HF),
          "launch", "--gpu", "A6000", "--", f"HF_TOKEN={HF}", *SGLANG, "--model-path", URL,
          "--api-key", KEY, "--port", "{busy}", quoted=URL_SECRETS),
    # the plan check quotes the engine's refusal of a misspelled secret flag
    _case("launch-refused-misspelled-key", 1, "unrecognized arguments: --api-keyy",
          (TYPO_KEY, KEY), "launch", "--gpu", "A6000", "--", *SGLANG, "--model-path",
          "Qwen/Qwen3-8B", "--api-keyy", TYPO_KEY, "--api-key", KEY, "--port", "{busy}",
          quoted=(TYPO_KEY,)),
    _case("launch-bad-gpu", 2, "unknown GPU", (*URL_SECRETS, KEY),
          "launch", "--gpu", URL, "--", *SGLANG, "--model-path", "Qwen/Qwen3-8B",
          "--api-key", KEY, quoted=URL_SECRETS),
    # ---- stop, runs, logs: the options quoted back (a run reference: after the launch below)
    _case("stop-extra-argument", 2, "unexpected extra argument", (QTOKEN,),
          "stop", "somerun", f"x?token={QTOKEN}", quoted=(QTOKEN,)),
    _case("runs-bad-count", 2, "--last must be an integer", URL_SECRETS,
          "runs", "--last", URL, quoted=(PW,)),
    # ---- verify: a server that is not there, reached through a URL with credentials
    _case("verify-cannot-connect", 1, "cannot connect", (*URL_SECRETS, KEY),
          "verify", f"http://alice:{PW}@127.0.0.1:{{closed}}/v1?token={QTOKEN}"
          f"&X-Amz-Signature={SIG}", "--api-key", KEY, "--timeout", "2",
          quoted=URL_SECRETS),
    _case("verify-cannot-connect-json", 1, "cannot connect", (PW, QTOKEN, KEY),
          "verify", f"http://alice:{PW}@127.0.0.1:{{closed}}/v1?token={QTOKEN}",
          "--api-key", KEY, "--timeout", "2", "--format", "json",
          quoted=(PW, QTOKEN)),
]
# fmt: on


def _secrets_log() -> str:
    """The seed failure's SGLang 0.5.9 log, as SGLang prints it for a launch from a URL with a
    key (its `server_args=ServerArgs(...)` repr), plus a Hub download error that quotes the URL,
    a bearer header and a token, as a failing download's exception line does."""
    text = SEED_LOG.read_text()
    for old, new in (
        (r"\bmodel_path='/root/models/Qwen3.6-27B'", f"model_path='{URL}'"),
        (r"\bapi_key=None", f"api_key='{KEY}'"),
    ):
        text, n = re.subn(old, lambda m, new=new: new, text)
        assert n == 1, old
    anchor = "\n[2026-04-20 10:02:48]"
    assert text.count(anchor) == 1
    hub = (
        "\n[2026-04-20 10:02:47 TP1] huggingface_hub.errors.HfHubHTTPError: 401 Client Error: "
        f"Unauthorized for url: {URL} (headers {{'Authorization': 'Bearer {BEARER}'}}, "
        f"token {HF})"
    )
    return text.replace(anchor, hub + anchor)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path | int]]:
    """Inputs (read by servefit, may hold secrets), and the directories servefit writes to
    (scanned: nothing there may hold one). A port held open (the launch preflight refuses it)
    and one closed (verify cannot connect)."""
    root = tmp_path_factory.mktemp("secrets")
    inputs, state, out = root / "in", root / "state", root / "out"
    for d in (inputs, state, out):
        d.mkdir()
    (inputs / "secrets.log").write_text(_secrets_log())
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        yield {
            "in": inputs,
            "state": state,
            "out": out,
            "busy": busy.getsockname()[1],
            "closed": free_port(),
        }
    _end_everything(state / "runs")


@pytest.fixture(autouse=True)
def _env(world: dict[str, Path | int], monkeypatch: pytest.MonkeyPatch) -> None:
    from servefit.hardware import nvml

    state = world["state"]
    assert isinstance(state, Path)
    monkeypatch.setenv("SERVEFIT_RUNS_DIR", str(state / "runs"))
    monkeypatch.setenv("XDG_STATE_HOME", str(state / "xdg-state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(state / "xdg-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a URL that is no file never goes online
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(nvml, "local_gpus", lambda: nvml.LocalGPUs(reason="NVML library not found"))


def _written(world: dict[str, Path | int]) -> list[Path]:
    """Every file servefit wrote, but the engine's own log."""
    dirs = [world["state"], world["out"]]
    return sorted(
        p
        for d in dirs
        if isinstance(d, Path)
        for p in d.rglob("*")
        if p.is_file() and p.name != "engine.log"
    )


# Any 10 characters of a secret count as a leak: a message cut short (`'https://alice:pw-7f3a...`)
# shows the start of one. The secrets share no 10 characters with each other or with any text
# servefit prints.
PIECE = 10


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if any(s[i : i + PIECE] in text for i in range(len(s) - PIECE + 1))]


def assert_no_secret(world: dict[str, Path | int], out: str, err: str) -> None:
    for name, text in (("stdout", out), ("stderr", err)):
        leaked = _leaks(text)
        assert not leaked, f"{name} holds (part of) {leaked}:\n{text[-3000:]}"
    for path in _written(world):
        leaked = _leaks(path.read_text(encoding="utf-8", errors="replace"))
        assert not leaked, f"{path} holds (part of) {leaked}"


def _argv(case: Case, world: dict[str, Path | int]) -> list[str]:
    subs = {"{" + k + "}": str(v) for k, v in world.items()}
    argv = []
    for a in case.argv:
        for k, v in subs.items():
            a = a.replace(k, v)
        argv.append(a)
    return argv


def _input_text(argv: list[str], world: dict[str, Path | int]) -> str:
    """The command line and the input files it names: where the planted secrets must be."""
    files = [Path(a) for a in argv if a.startswith(str(world["in"]))]
    return " ".join(argv) + "".join(p.read_text() for p in files)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_error_path_shows_no_secret(
    case: Case, world: dict[str, Path | int], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _argv(case, world)
    given = _input_text(argv, world)
    assert all(s in given for s in case.planted), "the case plants its secrets"
    code, out, err = run(capsys, *argv)
    said = out + err
    assert code == case.code, f"exit {code}, wanted {case.code}: {said[-1500:]}"
    assert case.needle in said, f"{case.needle!r} not in: {said[-1500:]}"
    assert "Traceback" not in said
    assert_no_secret(world, out, err)
    for s in case.quoted:
        assert mask(s) in said, f"the output does not quote {s!r} (masked): {said[-1500:]}"
    if case.json_error:
        assert json.loads(out) == {"error": json.loads(out)["error"], "exit": case.code}


@pytest.mark.parametrize("debug", [False, True], ids=["line", "traceback"])
def test_an_internal_error_quoting_a_secret_is_redacted(
    world: dict[str, Path | int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    debug: bool,
) -> None:
    """A bug whose message quotes its input (exit 3) is printed redacted too, and so is its
    traceback under SERVEFIT_DEBUG=1."""
    from servefit._plan import planner

    def broken(ref: object) -> None:
        raise RuntimeError(f"cannot size {ref!r}")

    monkeypatch.setattr(planner, "resolve_model", broken)
    if debug:
        monkeypatch.setenv("SERVEFIT_DEBUG", "1")
    assert PW in URL
    code, out, err = run(capsys, "plan", "-m", URL, "--gpu", "A6000")
    assert code == 3, err
    needle = "RuntimeError: cannot size" if debug else "servefit: internal error: RuntimeError"
    assert needle in err and ("Traceback (most recent call last)" in err) == debug, err
    assert_no_secret(world, out, err)
    assert mask(PW) in err and mask(QTOKEN) in err


def test_a_failed_launch_and_the_commands_that_read_it(
    world: dict[str, Path | int], capsys: pytest.CaptureFixture[str]
) -> None:
    """A launch the engine fails (the stand-in's start-up OOM, tests/standin/engine.py, behind
    the `sglang` shim) from a URL with a key and a token: what launch prints and every file of
    its run, then runs, logs, logs --diagnosis and stop on that run."""
    port = free_port()
    launch = [
        "launch",
        "--gpu",
        "A6000",
        "--env",
        f"PYTHONPATH={SHIM}:{REPO}",
        "--env",
        "STANDIN_FAULT=startup-oom",
        "--probe-interval",
        "0.05",
        "--settle",
        "0.3",
        "--grace",
        "3",
        "--",
        f"HF_TOKEN={HF}",
        PYTHON,
        "-m",
        "sglang.launch_server",
        "--model-path",
        URL,
        "--api-key",
        KEY,
        "--tp-size",
        "2",
        "--port",
        str(port),
    ]
    code, out, err = run(capsys, *launch)
    assert code == 1 and "not enough memory at start-up" in out, out + err
    assert_no_secret(world, out, err)
    assert mask(PW) in out and mask(KEY) in out
    state = world["state"]
    assert isinstance(state, Path)
    dirs = [p for p in (state / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(dirs) == 1, dirs
    run_dir = dirs[0]
    engine_log = (run_dir / "engine.log").read_text()
    assert PW in engine_log and KEY in engine_log, "the engine printed the secrets servefit read"
    names = {p.name for p in _written(world)}
    assert {"run.json", "argv.json", "env.json", "diagnosis.txt"} <= names, names
    env = json.loads((run_dir / "env.json").read_text())
    assert env.get("HF_TOKEN") == mask(HF), env  # the prefix reached the engine, masked here

    for argv, needle in (
        (["runs"], run_dir.name),
        (["runs", "--format", "json"], run_dir.name),
        (["logs", run_dir.name], "server_args=ServerArgs("),
        (["logs", run_dir.name, "--diagnosis"], "not enough memory at start-up"),
        (["stop", run_dir.name], "not running"),
    ):
        code, out, err = run(capsys, *argv)
        assert code == 0 and needle in out, (argv, code, out + err)
        assert_no_secret(world, out, err)
    code, out, err = run(capsys, "logs", run_dir.name)
    assert mask(PW) in out and mask(KEY) in out and mask(QTOKEN) in out
    # a run reference that names no run is quoted back
    for command in ("logs", "stop"):
        code, out, err = run(capsys, command, URL)
        assert code == 2 and "servefit: error: no run 'https://alice:" in err, (command, err)
        assert_no_secret(world, out, err)
        assert mask(PW) in err and mask(QTOKEN) in err


def test_every_command_is_driven() -> None:
    driven = {c.argv[0] for c in CASES} | {"launch", "runs", "logs", "stop"}
    assert {
        "plan",
        "explain",
        "fit",
        "doctor",
        "launch",
        "stop",
        "runs",
        "logs",
        "verify",
    } <= driven
    assert os.path.exists(SEED_LOG)
