"""verify's URL: a full-width or Unicode host is normalised (NFKC, then IDNA) or refused with
one line, exit 2; a query goes with every request and is shown redacted (servefit.redact) in
the header, the failures and the JSON. The server is the stand-in
(tests/standin/openai_server.py, not an engine)."""

from __future__ import annotations

import json

import httpx
import pytest

from servefit.errors import ArgumentError
from servefit.redact import mask
from servefit.verify.address import normalise_host, split_base_url
from servefit.verify.client import EndpointClient
from tests.clihelp import run

SECRET = "sk-query-secret-5f4e3d2c1b"
ONLY_LIVENESS = [
    *("--skip", "determinism", "--skip", "degenerate", "--skip", "reasoning"),
    *("--skip", "tools", "--skip", "warm", "--skip", "speculative"),
    *("--skip", "reference", "--skip", "speed", "--timeout", "5"),
]


def _full_width(text: str) -> str:
    """ASCII letters, digits and dots as their full-width forms (U+FF01 to U+FF5E)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://ｌｏｃａｌｈｏｓｔ:8000/v1", "http://localhost:8000/v1"),
        ("http://１２７．０．０．１:８０００", "http://127.0.0.1:8000"),
        ("http://127。0。0。1:8000", "http://127.0.0.1:8000"),  # ideographic full stops
        ("http://bücher.example:8000/v1?x=ü", "http://xn--bcher-kva.example:8000/v1?x=ü"),
        ("https://u:pässword@bücher.example", "https://u:pässword@xn--bcher-kva.example"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("http://gpu-box:8000", "http://gpu-box:8000"),
    ],
)
def test_hosts_are_normalised(url, expected):
    assert normalise_host(url) == expected


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (
            "http://evil．com／x:80",
            "the host 'evil.com/x' (after NFKC normalisation) is not a host name",
        ),
        ("http://a＠b:80", "the host 'a@b' (after NFKC normalisation) is not a host name"),
        ("http://" + "ü" * 70 + ".example", "cannot be IDNA-encoded (label empty or too long)"),
        ("http://x\ufffdy.example", "cannot be IDNA-encoded (Invalid character '\ufffd')"),
        ("http://h:٨٠٠٠", "the port '٨٠٠٠' is not a number"),
    ],
)
def test_hosts_that_cannot_be_normalised_are_one_line_exit_2(capsys, url, why):
    with pytest.raises(
        ArgumentError, match="^URL: .*" + why.replace("(", r"\(").replace(")", r"\)")
    ):
        normalise_host(url)
    code, out, err = run(capsys, "verify", url)
    assert code == 2 and out == ""
    assert err.startswith("servefit: error: url: ") and err.count("\n") == 1
    assert why in err and "Traceback" not in err


def test_full_width_hosts_reach_the_server(capsys, standin):
    server = standin()
    port = server.server_address[1]
    for host in ("ｌｏｃａｌｈｏｓｔ", _full_width("127.0.0.1")):
        code, out, err = run(capsys, "verify", f"http://{host}:{port}", *ONLY_LIVENESS)
        assert code == 0, err
        assert "FIT TO SERVE" in out and "internal error" not in err
    assert f"servefit verify http://127.0.0.1:{port} - stand-in" in out


def test_an_idn_host_is_connected_to_by_its_ascii_name(capsys):
    # .invalid never resolves (RFC 2606): a failed check that names the encoded host, exit 1
    code, out, err = run(capsys, "verify", "http://bücher.invalid:9", *ONLY_LIVENESS)
    assert code == 1 and "Traceback" not in err
    assert "cannot connect to http://xn--bcher-kva.invalid:9" in out


def test_the_query_goes_with_every_request():
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"object": "list", "data": []})

    client = EndpointClient(f"http://x/v1/?token={SECRET}", transport=httpx.MockTransport(handler))
    client.get_json("/v1/models")
    client.get("/health")
    assert seen == [f"http://x/v1/models?token={SECRET}", f"http://x/health?token={SECRET}"]
    assert split_base_url("http://h:1/v1?a=b#frag") == ("http://h:1", "a=b")


def test_a_query_secret_is_shown_redacted(capsys, standin):
    # servefit.redact.redact_url masks the values of secret query names (token, key, ...)
    server = standin()
    url = f"{server.url}/v1?token={SECRET}"
    code, out, err = run(capsys, "verify", url, *ONLY_LIVENESS)
    assert code == 0, err
    assert SECRET not in out + err
    assert f"servefit verify {server.url}?token={mask(SECRET)} - stand-in" in out  # the header
    code, out, err = run(capsys, "verify", url, *ONLY_LIVENESS, "--format", "json")
    assert code == 0 and SECRET not in out + err
    assert json.loads(out)["url"] == f"{server.url}?token={mask(SECRET)}"
    # a failure message names the server by the same redacted URL
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    code, out, err = run(capsys, "verify", url, *ONLY_LIVENESS, "--format", "json")
    liveness = json.loads(out)["checks"][0]
    assert code == 1 and SECRET not in out + err
    assert liveness["summary"].startswith(
        f"GET /v1/models: cannot connect to http://127.0.0.1:{port}?token={mask(SECRET)} "
    )


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"http://:80/v1?token={SECRET}", "names no host"),
        (f"http://h:80/v1?token={SECRET}&x=1 2", "contains whitespace or control characters"),
    ],
)
def test_a_bad_url_with_a_query_secret_is_named_redacted(capsys, url, why):
    code, out, err = run(capsys, "verify", url)
    assert code == 2 and out == ""
    assert err.startswith("servefit: error: url: 'http://") and err.count("\n") == 1
    assert f"?token={mask(SECRET)}" in err and why in err
    assert SECRET[:12] not in err
