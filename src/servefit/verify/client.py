"""An OpenAI-compatible HTTP client for verification, over httpx.

Every way a request can go wrong (no connection, a timeout, an HTTP error, a body that is not
JSON, a stream that stops without its end marker) becomes one EndpointError whose `reason` is a
single line fit for the report. Streams are read as server-sent events (`data: {json}` lines,
ended by `data: [DONE]`), the framing SGLang and vLLM both use
(sglang/srt/entrypoints/openai/serving_chat.py:_generate_chat_stream,
vllm/entrypoints/openai/chat_completion/serving.py:chat_completion_stream_generator).

Nothing a server sends can keep it busy or fill its memory: every response and stream is read
chunk by chunk, decompressed by servefit itself with a byte cap (MAX_BODY_BYTES; it asks for
no compression, and a gzip bomb stops at the cap), a stream line is capped (MAX_LINE_BYTES),
a whole body must arrive within the request timeout and a stream must send a data event
within it (keep-alive comments and dripped bytes do not count), a stream longer than its
max_tokens is cut, a loop in a stream stops it, and every request ends at the client's
Deadline, whatever the server does.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from servefit.errors import ArgumentError
from servefit.redact import mask, redact_url
from servefit.verify.address import normalise_host, split_base_url
from servefit.verify.detectors import LoopDetector
from servefit.verify.identity import identity_problem

# Far above anything a check asks for (a /metrics page is ~100 KB, 1,024 tokens of text ~10 KB
# a stream ~1 MB with its JSON framing), far below what hurts.
MAX_BODY_BYTES = 32 << 20
MAX_LINE_BYTES = 1 << 20
# A stream may carry more token events than max_tokens only by a margin (a final chunk, a
# tool call split in pieces); one event never carries less than one token.
_EVENT_MARGIN = 16

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
    loop: str | None = None  # a stream stopped on a certain loop: "channel: reason"
    # The `model` values the response carried (JSON as sent: a NaN stays a float), for the
    # identity check: one for a body, each distinct one of a stream's events.
    answered_as: list[Any] = field(default_factory=list)

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


class Deadline:
    """A moment (time.monotonic) after which a client sends nothing and reads nothing more."""

    def __init__(self, at: float | None = None) -> None:
        self.at = at

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()

    def expire(self) -> None:
        self.at = time.monotonic() - 1.0


class _Decoder:
    """A response body's Content-Encoding undone with a bound on what each piece of input may
    expand to (zlib's max_length), so a small compressed body cannot become gigabytes."""

    PIECE = 1 << 20

    def __init__(self, encoding: str | None, what: str) -> None:
        enc = (encoding or "identity").strip().lower()
        if enc in ("identity", ""):
            self.zlib = None
        elif enc in ("gzip", "x-gzip"):
            self.zlib = zlib.decompressobj(wbits=31)
        elif enc == "deflate":
            self.zlib = zlib.decompressobj(wbits=15)
        else:
            raise EndpointError(
                f"{what}: the server sent a {enc!r}-encoded body, which servefit did not ask for"
            )
        self.what = what

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.zlib is None:
            yield data
            return
        try:
            while data:
                out = self.zlib.decompress(data, self.PIECE)
                data = self.zlib.unconsumed_tail
                if out:
                    yield out
        except zlib.error as exc:
            raise EndpointError(f"{self.what}: the compressed body is corrupt ({exc})") from None


def normalize_base_url(url: str) -> str:
    """'http://h:30000/v1/' -> 'http://h:30000' (paths below are added with /v1 where needed);
    the query, if any, is dropped here (EndpointClient sends it with every request)."""
    return split_base_url(url)[0]


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
    the server by `shown_url` (through servefit.redact: credentials and secret query values
    masked) and a key by its mark. The URL's host is NFKC-normalised and IDNA-encoded
    (verify/address.py); its query goes with every request.

    Every completion is checked for the model that answered it: its `model` must be the one
    the request asked for, or a name `expect` allowed for it (verify/identity.py)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
        deadline: Deadline | None = None,
        max_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.base_url, self.query = split_base_url(normalise_host(base_url))
        self.shown_url = redact_url(self.base_url + (f"?{self.query}" if self.query else ""))
        self.key_mark = mask(api_key) if api_key else None
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.deadline = deadline or Deadline()
        self.max_bytes = max_bytes
        # identity: the body is decompressed here, with a bound (_Decoder)
        headers = {"Accept-Encoding": "identity"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # requested id -> the ids a response may name (shared by every bound copy)
        self.answers: dict[str, frozenset[str]] = {}
        try:
            self._http = httpx.Client(
                base_url=self.base_url,
                params=self.query or None,
                headers=headers,
                timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
                transport=transport,
            )
        except httpx.InvalidURL as exc:
            raise ArgumentError(
                f"URL: {self.shown_url!r} cannot be sent to ({redact_url(str(exc))})"
            ) from None

    def expect(self, requested: str, names: frozenset[str]) -> None:
        """Accept these `model` names in answers to a request for `requested` (one checkpoint
        served under several names: vLLM answers with the first). Seen by every bound copy."""
        self.answers[requested] = names | {requested}

    def _check_identity(self, out: Completion, body: dict[str, Any], what: str) -> None:
        """EndpointError when the answer names another model than the request asked for."""
        requested = body.get("model")
        if not isinstance(requested, str):
            return  # nothing asked for: the server's default model answers
        accepted = self.answers.get(requested, frozenset({requested}))
        problem = identity_problem(out.answered_as, requested, accepted)
        if problem is not None:
            raise EndpointError(f"{what}: {problem}")

    def bound(self, deadline: Deadline) -> EndpointClient:
        """The same client (connections, key, accepted names) under another deadline: one per
        check, so that a check abandoned at its deadline cannot go on with the next check's
        time."""
        other = object.__new__(EndpointClient)
        other.__dict__.update(self.__dict__)
        other.deadline = deadline
        return other

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

    # ------------------------------------------------------------------ bounded I/O

    def _budget(self, what: str) -> float:
        """Seconds a request may take: the request timeout, cut to the deadline."""
        left = self.deadline.remaining()
        if left is not None and left <= 0:
            raise EndpointError(f"{what}: not sent: the deadline passed")
        return self.timeout_s if left is None else max(0.01, min(self.timeout_s, left))

    def _open(self, method: str, path: str, what: str, body: Any = None) -> httpx.Response:
        """Send a request; the response's body is left unread (the caller closes it)."""
        budget = self._budget(what)
        timeout = httpx.Timeout(budget, connect=min(self.connect_timeout_s, budget))
        try:
            request = self._http.build_request(method, path, json=body, timeout=timeout)
            return self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise EndpointError(self._transport_reason(exc, what)) from None
        except httpx.InvalidURL as exc:
            raise EndpointError(f"{what}: invalid URL ({redact_url(str(exc))})") from None

    def _chunks(self, response: httpx.Response, what: str) -> Iterator[bytes]:
        """The body as it arrives, decompressed, with the byte cap and the deadline."""
        if response.is_stream_consumed:  # read already (a test's transport): decoded, whole
            decoder, raws = _Decoder(None, what), iter([response.content])
        else:
            decoder = _Decoder(response.headers.get("content-encoding"), what)
            raws = response.iter_raw()
        total = 0
        try:
            for raw in raws:
                for data in decoder.feed(raw):
                    total += len(data)
                    if total > self.max_bytes:
                        raise EndpointError(
                            f"{what}: the response is larger than {self.max_bytes:,} bytes "
                            "(decompressed); servefit stops reading there"
                        )
                    yield data
                left = self.deadline.remaining()
                if left is not None and left <= 0:
                    raise EndpointError(f"{what}: stopped at the deadline after {total:,} bytes")
        except httpx.ReadTimeout:
            raise EndpointError(
                f"{what}: no data for {self.timeout_s:g} s after {total:,} bytes (timed out)"
            ) from None
        except httpx.HTTPError as exc:
            raise EndpointError(self._transport_reason(exc, what)) from None

    def _whole(self, response: httpx.Response, what: str, started: float) -> bytes:
        """A whole body: every byte within the request timeout (a drip is not an answer)."""
        out = bytearray()
        for data in self._chunks(response, what):
            out += data
            if time.monotonic() - started > self.timeout_s:
                raise EndpointError(
                    f"{what}: no complete response within {self.timeout_s:g} s "
                    f"({len(out):,} bytes so far)"
                )
        return bytes(out)

    def _request(self, method: str, path: str, what: str, body: Any = None) -> httpx.Response:
        """A request whose whole (bounded) body is read; the response's status is the caller's."""
        started = time.monotonic()
        response = self._open(method, path, what, body)
        try:
            content = self._whole(response, what, started)
        finally:
            response.close()
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(
            response.status_code, headers=headers, content=content, request=response.request
        )

    def get(self, path: str) -> httpx.Response:
        """GET returning the response whatever its status; transport failures raise."""
        return self._request("GET", path, f"GET {path}")

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
        response = self._request("POST", "/v1/chat/completions", what, {**body, "stream": False})
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
            answered_as=[obj["model"]] if "model" in obj else [],
        )
        self._check_identity(out, body, what)
        limit, used = body.get("max_tokens"), out.completion_tokens
        if isinstance(limit, int) and used is not None and used > limit + _EVENT_MARGIN:
            raise EndpointError(
                f"{what}: {used} completion tokens for max_tokens {limit}: the server does not "
                "stop at max_tokens"
            )
        return out

    def stream_chat(
        self, body: dict[str, Any], on_delta: DeltaCallback | None = None
    ) -> Completion:
        """A streamed chat completion; `on_delta` may stop it early (see DeltaCallback).
        Without one, a loop detector per channel stops a stream that loops (Completion.loop)."""
        what = "POST /v1/chat/completions (stream)"
        payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
        watch = _LoopWatch() if on_delta is None else None
        callback = watch.feed if watch is not None else on_delta
        out = Completion()
        calls: dict[int, dict[str, Any]] = {}
        tokens: list[str] = []
        started = time.perf_counter()
        try:
            response = self._open("POST", "/v1/chat/completions", what, payload)
        except EndpointError as exc:
            if exc.reason.endswith("(timed out)"):  # no headers within the timeout
                raise EndpointError(
                    f"{what}: stream stalled, no data for {self.timeout_s:g} s after 0 token events"
                ) from None
            raise
        try:
            if response.status_code >= 400:
                head = httpx.Response(
                    response.status_code,
                    headers=response.headers,
                    content=self._whole(response, what, time.monotonic()),
                )
                raise EndpointError(self._status_reason(head, what))
            ctype = response.headers.get("content-type", "")
            if not ctype.lower().startswith("text/event-stream"):
                first = next(self._chunks(response, what), b"")[:200]
                raise EndpointError(
                    f"{what}: the answer is not a stream of server-sent events (content-type "
                    f"{ctype or 'none'!r}): {_snippet(first.decode('utf-8', 'replace'))}"
                )
            self._read_stream(response, what, body, out, calls, tokens, started, callback)
        finally:
            response.close()
        out.elapsed_s = time.perf_counter() - started
        out.tool_calls = [calls[i] for i in sorted(calls)]
        out.tokens = tokens or None
        if watch is not None:
            out.loop = watch.found
        if not out.stopped_early and not out.done and out.finish_reason is None:
            raise EndpointError(
                f"{what}: stream ended after {out.events} token events without a "
                "finish_reason or [DONE] (dropped connection?)"
            )
        self._check_identity(out, body, what)
        return out

    def _read_stream(
        self,
        response: httpx.Response,
        what: str,
        body: dict[str, Any],
        out: Completion,
        calls: dict[int, dict[str, Any]],
        tokens: list[str],
        started: float,
        on_delta: DeltaCallback,
    ) -> None:
        """Server-sent events, split into lines here: a line without end is caught at its cap."""
        limit = body.get("max_tokens")
        buf = b""
        last_data = time.monotonic()
        try:
            for chunk in self._chunks(response, what):
                buf += chunk
                while (nl := buf.find(b"\n")) >= 0:
                    line, buf = buf[:nl].rstrip(b"\r").decode("utf-8", "replace"), buf[nl + 1 :]
                    if line.startswith("data:"):
                        last_data = time.monotonic()
                    if self._consume(line, out, calls, tokens, started, on_delta):
                        return
                if len(buf) > MAX_LINE_BYTES:
                    raise EndpointError(
                        f"{what}: a stream line longer than {MAX_LINE_BYTES:,} bytes "
                        "(no newline): not server-sent events"
                    )
                if time.monotonic() - last_data > self.timeout_s:
                    raise EndpointError(
                        f"{what}: no data event for {self.timeout_s:g} s after {out.events} "
                        "token events (only keep-alive comments or dripped bytes)"
                    )
                if isinstance(limit, int) and out.events > limit + _EVENT_MARGIN:
                    raise EndpointError(
                        f"{what}: {out.events} token events for max_tokens {limit}: the server "
                        "does not stop at max_tokens"
                    )
        except EndpointError as exc:
            if "no data for" in exc.reason:  # the read timed out: name it as a stalled stream
                raise EndpointError(
                    f"{what}: stream stalled, no data for {self.timeout_s:g} s "
                    f"after {out.events} token events"
                ) from None
            if "closed the connection" in exc.reason and out.events:
                raise EndpointError(
                    f"{what}: stream dropped after {out.events} token events"
                ) from None
            raise
        if buf.strip():
            self._consume(buf.decode("utf-8", "replace"), out, calls, tokens, started, on_delta)

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
        if "model" in obj and obj["model"] not in out.answered_as and len(out.answered_as) < 8:
            out.answered_as.append(obj["model"])
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


class _LoopWatch:
    """A loop detector per channel for streams read without a callback: the first certain
    loop stops the stream and is kept as "channel: reason"."""

    def __init__(self) -> None:
        self.detectors = {"reasoning": LoopDetector(), "content": LoopDetector()}
        self.found: str | None = None

    def feed(self, channel: str, text: str) -> bool:
        if self.detectors[channel].feed(text):
            self.found = f"{channel}: {self.detectors[channel].finish().reason}"
            return True
        return False
