"""`servefit verify` and keys: the key from --api-key / SERVEFIT_API_KEY, the 401 a server
started with --api-key answers without it (SGLang and vLLM: {"error": "Unauthorized"}, see
tests/launch/test_auth.py), the warning before a key goes over plain HTTP to another machine,
and credentials inside the URL kept out of the report. The server is the stand-in
(tests/standin/openai_server.py, not an engine)."""

from __future__ import annotations

import json

from servefit.redact import mask
from tests.clihelp import run
from tests.standin.openai_server import running

KEY = "sk-verify-test-0a1b2c3d4e5f"
FAST = ["--skip", "speed", "--skip", "reference", "--timeout", "10", "--format", "json"]


def test_key_from_option_and_environment(capsys, monkeypatch):
    with running(engine="vllm", api_keys=(KEY,)) as server:
        code, out, err = run(capsys, "verify", server.url, "--api-key", KEY, *FAST)
        assert code == 0, out
        assert json.loads(out)["warnings"] == [] and err == ""  # loopback: no warning
        monkeypatch.setenv("SERVEFIT_API_KEY", KEY)
        code, out, _ = run(capsys, "verify", server.url, *FAST)
        assert code == 0, out


def test_a_wrong_key_is_named_by_its_mark_only(capsys):
    with running(api_keys=(KEY,)) as server:
        code, out, _ = run(capsys, "verify", server.url, "--api-key", "sk-wrong-key-99", *FAST)
    liveness = json.loads(out)["checks"][0]
    assert code == 1 and "sk-wrong-key-99" not in out
    assert liveness["summary"] == (
        "GET /v1/models: HTTP 401: Unauthorized: the server refused the API key sent "
        f"({mask('sk-wrong-key-99')})"
    )


def test_plain_http_to_another_host_warns_before_sending(capsys):
    # .invalid never resolves (RFC 2606): the request fails at once, after the warning
    code, out, err = run(
        capsys, "verify", "http://gpu-box.invalid:8000/v1", "--api-key", KEY, *FAST
    )
    warning = (
        "sending the API key over plain HTTP to gpu-box.invalid: anyone on the network path "
        "can read it; use https:// or an SSH tunnel to a loopback port"
    )
    assert code == 1
    assert err.startswith(f"servefit: warning: {warning}\n")
    assert json.loads(out)["warnings"] == [warning]


def test_credentials_in_the_url_stay_out_of_the_report(capsys):
    with running() as server:
        url = server.url.replace("http://", "http://admin:url-pass-1234@")
        code, out, err = run(capsys, "verify", url, *FAST)
    report = json.loads(out)
    assert code == 0, out
    assert "url-pass-1234" not in out + err
    assert report["url"] == server.url.replace("http://", f"http://admin:{mask('url-pass-1234')}@")
