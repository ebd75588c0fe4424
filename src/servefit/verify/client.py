"""An OpenAI-compatible HTTP client for verification, over httpx.

Every way a request can go wrong (no connection, a timeout, an HTTP error, a body that is not
JSON, a stream that stops without its end marker) becomes one EndpointError whose `reason` is a
single line fit for the report. Streams are read as server-sent events (`data: {json}` lines,
ended by `data: [DONE]`), the framing SGLang and vLLM both use
(sglang/srt/entrypoints/openai/serving_chat.py:_generate_chat_stream,
vllm/entrypoints/openai/chat_completion/serving.py:chat_completion_stream_generator).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from servefit.redact import mask, redact_url

# Called with (channel, text) for each streamed delta, channel "content" or "reasoning";
# returning True stops the stream (the client closes the connection).
DeltaCallback = Callable[[str, str], bool]

_SNIPPET = 120


class EndpointError(Exception):
    """A request that gave no usable answer; `reason` is one line for the report."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Completion:
    """One chat completion, streamed or not, reduced to what the checks look at."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    tokens: list[str] | None = None  # from logprobs, when the server returned them
    # Streaming only:
    ttft_s: float | None = None  # request sent -> first generated text
    last_token_s: float | None = None  # request sent -> last generated text
    elapsed_s: float = 0.0
    events: int = 0  # data events that carried generated text
    stopped_early: bool = False  # the callback asked to stop
    done: bool = False  # "[DONE]" seen (streams) / complete body (non-stream)

    @property
    def completion_tokens(self) -> int | None:
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return self.usage["completion_tokens"]
        return None

    @property
    def cached_tokens(self) -> int | None:
        details = (self.usage or {}).get("prompt_tokens_details") or {}
        value = details.get("cached_tokens") if isinstance(details, dict) else None
        return value if isinstance(value, int) else None


def normalize_base_url(url: str) -> str:
    """'http://h:30000/v1/' -> 'http://h:30000' (paths below are added with /v1 where needed)."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


def _snippet(text: str) -> str:
    text = text.strip()
    return repr(text[:_SNIPPET] + ("..." if len(text) > _SNIPPET else ""))


def _error_message(response: httpx.Response) -> str:
    """The server's error text: OpenAI-style {"error": {...}} / {"message": ...} / {"detail": ...}."""
    try:
        body = response.json()
    except ValueError:
        return _snippet(response.text) if response.text.strip() else "(empty body)"
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:200]
        for key in ("message", "detail", "error"):
            if body.get(key):
                return str(body[key])[:200]
    return _snippet(json.dumps(body))


AUTH_STATUS = (401, 403)


class EndpointClient:
    """Talks to one server: GETs for metadata, chat completions streamed or not. Messages name
    the server by `shown_url` (credentials inside the URL masked) and a key by its mark."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        self.shown_url = redact_url(self.base_url)
        self.key_mark = mask(api_key) if api_key else None
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EndpointClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plain requests

    def _status_reason(self, response: httpx.Response, what: str) -> str:
        """`what: HTTP status: the server's message`, and for 401/403 what to do about it."""
        reason = f"{what}: HTTP {response.status_code}: {_error_message(response)}"
        if response.status_code not in AUTH_STATUS:
            return reason
        if self.key_mark is None:
            return (
                f"{reason}: the server requires an API key; give it with --api-key or "
                "SERVEFIT_API_KEY, or --run RUN for a server servefit launched"
            )
        return f"{reason}: the server refused the API key sent ({self.key_mark})"

    def _transport_reason(self, exc: httpx.HTTPError, what: str) -> str:
        if isinstance(exc, httpx.ConnectTimeout):
            return f"{what}: no connection to {self.shown_url} within the connect timeout"
        if isinstance(exc, httpx.ConnectError):
            return f"{what}: cannot connect to {self.shown_url} ({redact_url(str(exc))})"
        if isinstance(exc, httpx.TimeoutException):
            return f"{what}: no response within {self.timeout_s:g} s (timed out)"
        if isinstance(exc, httpx.RemoteProtocolError):
            return f"{what}: the server closed the connection mid-response ({exc})"
        return f"{what}: {type(exc).__name__}: {exc}"

    def get(self, path: str) -> httpx.Response:
        """GET returning the response whatever its status; transport failures raise."""
        try:
            return self._http.get(path)
        except httpx.HTTPError as exc:
            raise EndpointError(self._transport_reason(exc, f"GET {path}")) from None

    def get_json(self, path: str) -> Any:
        response = self.get(path)
        if response.status_code >= 400:
            raise EndpointError(self._status_reason(response, f"GET {path}"))
        try:
            return response.json()
        except ValueError:
            raise EndpointError(
                f"GET {path} returned a body that is not JSON: {_snippet(response.text)}"
            ) from None

    # ------------------------------------------------------------------ chat

    def chat(self, body: dict[str, Any]) -> Completion:
        """A non-streamed chat completion."""
        what = "POST /v1/chat/completions"
        started = time.perf_counter()
        try:
            response = self._http.post("/v1/chat/completions", json={**body, "stream": False})
        except httpx.HTTPError as exc:
            raise EndpointError(self._transport_reason(exc, what)) from None
        if response.status_code >= 400:
            raise EndpointError(self._status_reason(response, what))
        try:
            obj = response.json()
        except ValueError:
            raise EndpointError(
                f"{what} returned a body that is not JSON: {_snippet(response.text)}"
            ) from None
        choice = _first_choice(obj, what)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise EndpointError(f"{what}: choice has no message: {_snippet(json.dumps(choice))}")
        out = Completion(
            content=message.get("content") or "",
            reasoning=_reasoning_of(message),
            tool_calls=[c for c in message.get("tool_calls") or [] if isinstance(c, dict)],
            finish_reason=choice.get("finish_reason"),
            usage=obj.get("usage") if isinstance(obj.get("usage"), dict) else None,
            tokens=_logprob_tokens(choice.get("logprobs")),
            elapsed_s=time.perf_counter() - started,
            done=True,
        )
        return out

    def stream_chat(
        self, body: dict[str, Any], on_delta: DeltaCallback | None = None
    ) -> Completion:
        """A streamed chat completion; `on_delta` may stop it early (see DeltaCallback)."""
        what = "POST /v1/chat/completions (stream)"
        payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
        out = Completion()
        calls: dict[int, dict[str, Any]] = {}
        tokens: list[str] = []
        started = time.perf_counter()
        try:
            with self._http.stream("POST", "/v1/chat/completions", json=payload) as response:
                if response.status_code >= 400:
                    response.read()
                    raise EndpointError(self._status_reason(response, what))
                for line in response.iter_lines():
                    if self._consume(line, out, calls, tokens, started, on_delta):
                        break
        except httpx.ReadTimeout:
            raise EndpointError(
                f"{what}: stream stalled, no data for {self.timeout_s:g} s "
                f"after {out.events} token events"
            ) from None
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.RemoteProtocolError) and out.events:
                raise EndpointError(
                    f"{what}: stream dropped after {out.events} token events ({exc})"
                ) from None
            raise EndpointError(self._transport_reason(exc, what)) from None
        out.elapsed_s = time.perf_counter() - started
        out.tool_calls = [calls[i] for i in sorted(calls)]
        out.tokens = tokens or None
        if not out.stopped_early and not out.done and out.finish_reason is None:
            raise EndpointError(
                f"{what}: stream ended after {out.events} token events without a "
                "finish_reason or [DONE] (dropped connection?)"
            )
        return out

    def _consume(
        self,
        line: str,
        out: Completion,
        calls: dict[int, dict[str, Any]],
        tokens: list[str],
        started: float,
        on_delta: DeltaCallback | None,
    ) -> bool:
        """Apply one SSE line to `out`; True to stop reading."""
        what = "POST /v1/chat/completions (stream)"
        if not line.startswith("data:"):
            return False  # blank separators, comments, other SSE fields
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            out.done = True
            return True
        try:
            obj = json.loads(data)
        except ValueError:
            raise EndpointError(
                f"{what}: event after {out.events} token events is not JSON: {_snippet(data)}"
            ) from None
        if not isinstance(obj, dict):
            raise EndpointError(f"{what}: event is not a JSON object: {_snippet(data)}")
        if obj.get("error"):
            err = obj["error"]
            message = err.get("message") if isinstance(err, dict) else err
            raise EndpointError(f"{what}: the server reported an error mid-stream: {message}")
        if isinstance(obj.get("usage"), dict):
            out.usage = obj["usage"]
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices:
            return False  # the usage-only chunk
        choice = choices[0]
        if not isinstance(choice, dict):
            raise EndpointError(f"{what}: malformed choice: {_snippet(data)}")
        if choice.get("finish_reason"):
            out.finish_reason = choice["finish_reason"]
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise EndpointError(f"{what}: malformed delta: {_snippet(data)}")
        pieces: list[tuple[str, str]] = []
        reasoning = _reasoning_of(delta)
        if reasoning:
            out.reasoning += reasoning
            pieces.append(("reasoning", reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.content += content
            pieces.append(("content", content))
        for call in delta.get("tool_calls") or []:
            _merge_tool_call(calls, call)
        new_tokens = _logprob_tokens(choice.get("logprobs"))
        if new_tokens:
            tokens.extend(new_tokens)
        if pieces or delta.get("tool_calls"):
            now = time.perf_counter() - started
            if out.ttft_s is None:
                out.ttft_s = now
            out.last_token_s = now
            out.events += 1
        if on_delta is not None:
            for channel, text in pieces:
                if on_delta(channel, text):
                    out.stopped_early = True
                    return True
        return False


def _first_choice(obj: Any, what: str) -> dict[str, Any]:
    if isinstance(obj, dict) and obj.get("error"):
        err = obj["error"]
        raise EndpointError(f"{what}: {err.get('message') if isinstance(err, dict) else err}")
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise EndpointError(f"{what}: response has no choices: {_snippet(json.dumps(obj))}")
    return choices[0]


def _reasoning_of(message: dict[str, Any]) -> str:
    # SGLang names the field reasoning_content; vLLM renamed it to reasoning
    # (vllm/entrypoints/openai/chat_completion/protocol.py keeps a reasoning_content shim).
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _logprob_tokens(logprobs: Any) -> list[str] | None:
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if not isinstance(content, list):
        return None
    return [str(t.get("token", "")) for t in content if isinstance(t, dict)]


def _merge_tool_call(calls: dict[int, dict[str, Any]], piece: Any) -> None:
    """Streamed tool calls arrive in pieces keyed by index; arguments are concatenated."""
    if not isinstance(piece, dict):
        return
    index = piece.get("index", 0) if isinstance(piece.get("index", 0), int) else 0
    call = calls.setdefault(
        index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
    )
    if piece.get("id"):
        call["id"] = piece["id"]
    fn = piece.get("function") or {}
    if isinstance(fn, dict):
        if fn.get("name"):
            call["function"]["name"] += fn["name"]
        if isinstance(fn.get("arguments"), str):
            call["function"]["arguments"] += fn["arguments"]
