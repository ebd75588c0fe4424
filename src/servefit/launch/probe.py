"""Readiness: the server is ready when `/health` (or `/health_generate`), `/v1/models` and one
tiny chat completion all answer.

A log line saying "ready" is not enough: in the user's report a server printed it and then died
on its first request. SGLang answers /health with 503 until its own warm-up request is done
(sglang/srt/entrypoints/http_server.py:health_generate, ServerStatus.Starting) and
/health_generate runs a one-token generation; vLLM answers /health once the engine core is up.

A server started with a key answers /v1/models and chat completions with 401 (SGLang: 403 on
the endpoints only the admin key unlocks) when the request lacks it, while /health stays open
(sglang/srt/utils/auth.py:decide_request_auth, vllm/entrypoints/openai/server_utils.py:
AuthenticationMiddleware). The probes carry the key in their client's headers; a 401/403 is
reported as `refused`, not as a server that is not ready.
"""

from __future__ import annotations

from typing import Any

from servefit.frozen import frozen

# A request any chat model can answer in a few tokens; max_tokens keeps it cheap on a slow start.
CHAT_PROMPT = "Reply with the single word: ready"
CHAT_MAX_TOKENS = 8


@frozen
class ProbeResult:
    ok: bool
    step: str  # health | models | chat
    message: str  # what answered, or why not
    model: str | None = None
    refused: int | None = None  # 401/403: the server is up and wants a (different) key


AUTH_STATUS = (401, 403)


def _reason(exc: Exception, timeout: float) -> str:
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused (not listening yet)"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "connection closed without a response"
    return f"{type(exc).__name__}: {exc}"


def _get(client: Any, url: str, timeout: float) -> tuple[Any | None, str | None]:
    import httpx

    try:
        return client.get(url, timeout=timeout), None
    except httpx.HTTPError as exc:
        return None, _reason(exc, timeout)


def check_health(client: Any, base_url: str, path: str, timeout: float) -> str | None:
    """None when healthy, else why not."""
    resp, err = _get(client, base_url + path, timeout)
    if err is not None:
        return f"GET {path}: {err}"
    if resp.status_code != 200:
        return f"GET {path}: HTTP {resp.status_code}"
    return None


def list_model(
    client: Any, base_url: str, timeout: float
) -> tuple[str | None, str | None, int | None]:
    """(first model id, None, None), or (None, why not, the status when it is 401/403)."""
    resp, err = _get(client, base_url + "/v1/models", timeout)
    if err is not None:
        return None, f"GET /v1/models: {err}", None
    if resp.status_code in AUTH_STATUS:
        return None, "GET /v1/models", resp.status_code
    if resp.status_code != 200:
        return None, f"GET /v1/models: HTTP {resp.status_code}", None
    try:
        data = resp.json().get("data") or []
        model = data[0]["id"]
    except (ValueError, AttributeError, LookupError, TypeError):
        return None, "GET /v1/models: no model listed", None
    return str(model), None, None


def tiny_chat(
    client: Any, base_url: str, model: str, timeout: float
) -> tuple[str | None, int | None]:
    """(None, None) when a chat completion came back, else (why not, the status when it is
    401/403)."""
    import httpx

    body = {
        "model": model,
        "messages": [{"role": "user", "content": CHAT_PROMPT}],
        "max_tokens": CHAT_MAX_TOKENS,
        "temperature": 0,
    }
    try:
        resp = client.post(base_url + "/v1/chat/completions", json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        return f"POST /v1/chat/completions: {_reason(exc, timeout)}", None
    if resp.status_code in AUTH_STATUS:
        return "POST /v1/chat/completions", resp.status_code
    if resp.status_code != 200:
        detail = resp.text.strip().replace("\n", " ")[:200]
        return f"POST /v1/chat/completions: HTTP {resp.status_code} {detail}".rstrip(), None
    try:
        choice = resp.json()["choices"][0]
    except (ValueError, LookupError, TypeError):
        return "POST /v1/chat/completions: the answer has no choices", None
    if not isinstance(choice, dict) or not (choice.get("message") or choice.get("finish_reason")):
        return "POST /v1/chat/completions: the answer has no message", None
    return None, None


def readiness(
    client: Any, base_url: str, health_path: str, probe_timeout: float, chat_timeout: float
) -> ProbeResult:
    """One round of the three checks, stopping at the first that does not answer."""
    err = check_health(client, base_url, health_path, probe_timeout)
    if err is not None:
        return ProbeResult(False, "health", err)
    model, err, refused = list_model(client, base_url, probe_timeout)
    if err is not None or model is None:
        return ProbeResult(False, "models", err or "no model", refused=refused)
    err, refused = tiny_chat(client, base_url, model, chat_timeout)
    if err is not None:
        return ProbeResult(False, "chat", err, model, refused=refused)
    return ProbeResult(
        True, "chat", f"{health_path}, /v1/models and a chat completion answered", model
    )
