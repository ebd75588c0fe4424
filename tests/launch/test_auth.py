"""The key a launch's server wants, the probes that carry it, and the exposure warnings.

Where each engine takes its key and what it answers without it come from the wheels (cited in
src/servefit/launch/auth.py): SGLang `--api-key`, 401 {"error": "Unauthorized"} on everything
but /health* and /metrics (sglang/srt/utils/auth.py); vLLM `--api-key K [K ...]` or
VLLM_API_KEY, 401 {"error": "Unauthorized"} under /v1
(vllm/entrypoints/openai/server_utils.py:AuthenticationMiddleware). The stand-in server
(tests/standin/openai_server.py, not an engine) answers the same way."""

from __future__ import annotations

import httpx
import pytest

from servefit.launch.auth import (
    ServerKey,
    auth_refused,
    exposure_check,
    is_loopback,
    plain_http_warning,
    server_key,
)
from servefit.launch.command import parse_launch
from servefit.launch.probe import readiness
from servefit.redact import mask
from tests.standin.openai_server import running

KEY = "sk-test-0123456789abcdef"


def test_sglang_key_from_its_flag():
    assert server_key("sglang", ["--model-path", "Q", "--api-key", KEY], {}) == ServerKey(
        KEY, "--api-key"
    )
    # argparse: an abbreviation, and the last occurrence wins
    assert server_key("sglang", ["--api-k", "old-key", "--api-key", KEY], {}).value == KEY
    # --admin-api-key guards only the management endpoints; SGLang reads no key variable
    assert server_key("sglang", ["--admin-api-key", KEY], {"VLLM_API_KEY": "x"}) is None


def test_vllm_key_from_flag_or_environment():
    argv = ["serve", "Q", "--api-key", KEY, "second-key"]
    assert server_key("vllm", argv, {"VLLM_API_KEY": "env-key"}) == ServerKey(KEY, "--api-key")
    assert server_key("vllm", ["serve", "Q"], {"VLLM_API_KEY": KEY}) == ServerKey(
        KEY, "VLLM_API_KEY"
    )
    assert server_key("vllm", ["serve", "Q"], {}) is None


def test_a_key_in_a_config_file_is_the_key_and_the_command_line_wins(tmp_path, monkeypatch):
    # Both engines merge `--config FILE` before the command line's own flags (SGLang
    # ConfigArgumentMerger, vLLM FlexibleArgumentParser._pull_args_from_config): a key set only
    # in the file is what the server requires, and --api-key typed after it wins.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(f"api-key: {KEY}\n")
    (tmp_path / "v.yaml").write_text(f"api-key: {KEY}\n")
    assert server_key("sglang", ["--model-path", "Q", "--config", "s.yaml"], {}) == ServerKey(
        KEY, "--api-key"
    )
    assert server_key("vllm", ["serve", "Q", "--config", "v.yaml"], {}).value == KEY
    typed = ["--config", "s.yaml", "--model-path", "Q", "--api-key", "typed-key-0123"]
    assert server_key("sglang", typed, {}).value == "typed-key-0123"
    # and the launch's redactor masks the file's key wherever it is printed
    from servefit.launch.auth import launch_redactor

    red = launch_redactor("sglang", [["python", "-m", "sglang.launch_server", *typed]], {})
    assert KEY not in red.text(f"Unauthorized: the request carried {KEY} in a header")


def test_loopback_and_exposure():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "", "10.0.0.5", "gpu-box"))
    # vLLM listens on every interface unless --host (vllm create_server_socket((host or "", port)))
    launch = parse_launch(["vllm", "serve", "Qwen/Qwen3-8B"])
    assert launch.host == "0.0.0.0" and launch.host_default
    check = exposure_check(launch.host, launch.port, None, launch.host_default)
    assert check.status == "warn"
    assert check.message == (
        "listens on every interface (the engine's default) without an API key: anyone who "
        "reaches port 8000 can use the server; give it a key (--api-key), or keep it on this "
        "machine (--host 127.0.0.1)"
    )
    ok = exposure_check("0.0.0.0", 8000, ServerKey(KEY, "--api-key"), False)
    assert ok.status == "ok" and ok.message.endswith(f"(--api-key {mask(KEY)})")
    sglang = parse_launch(["python", "-m", "sglang.launch_server", "--model-path", "Q"])
    assert exposure_check(sglang.host, sglang.port, None, True).status == "ok"  # 127.0.0.1


def test_plain_http_warning():
    assert plain_http_warning("http://127.0.0.1:30000", True) is None
    assert plain_http_warning("https://gpu-box:8000", True) is None
    assert plain_http_warning("http://gpu-box:8000/v1", False) is None  # no key, nothing to leak
    assert plain_http_warning("http://gpu-box:8000/v1", True) == (
        "sending the API key over plain HTTP to gpu-box: anyone on the network path can read "
        "it; use https:// or an SSH tunnel to a loopback port"
    )


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_standin_answers_401_like_the_engine(engine):
    with running(engine=engine, api_keys=(KEY,)) as server, httpx.Client() as c:
        assert c.get(server.url + "/health").status_code == 200  # open on both
        r = c.get(server.url + "/v1/models")
        assert (r.status_code, r.json()) == (401, {"error": "Unauthorized"})
        r = c.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        assert r.status_code == 200
        # SGLang guards every path but /health* and /metrics; vLLM only /v1
        assert c.get(server.url + "/get_server_info").status_code == (
            401 if engine == "sglang" else 404
        )


def test_readiness_with_the_key_and_without():
    with running(api_keys=(KEY,)) as server:
        with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}) as c:
            ok = readiness(c, server.url, "/health", 2, 5)
        with httpx.Client() as c:
            refused = readiness(c, server.url, "/health", 2, 5)
    assert ok.ok and ok.model == "stand-in"
    assert not refused.ok and refused.step == "models" and refused.refused == 401
    assert auth_refused(401, None, "vllm", refused.message) == (
        "GET /v1/models: HTTP 401: the server requires an API key that servefit does not know; "
        "give it in the launch command (--api-key) or in its environment (VLLM_API_KEY, with "
        "--env)"
    )
    assert auth_refused(401, ServerKey(KEY, "--api-key"), "sglang", "GET /v1/models") == (
        f"GET /v1/models: HTTP 401: the server refused the key from --api-key {mask(KEY)}"
    )


def test_servefit_messages_survive_the_redaction_of_run_json():
    # run.json is redacted as text: a word after a secret flag's name would read as its value,
    # so servefit's own messages name the flags in parentheses
    from servefit.engines.secretflags import redactor

    red = redactor()
    for message in (
        auth_refused(401, None, "vllm", "GET /v1/models"),
        auth_refused(403, ServerKey(KEY, "--api-key"), "sglang", "POST /v1/chat/completions"),
        exposure_check("0.0.0.0", 8000, None, True).message,
        exposure_check("0.0.0.0", 8000, ServerKey(KEY, "VLLM_API_KEY"), True).message,
    ):
        assert red.text(message) == message
