"""What every check gets: the client, the options, and what earlier checks found."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servefit.frozen import frozen
from servefit.verify.client import EndpointClient
from servefit.verify.result import CheckResult, Status

# Tokens a chat template adds around the messages (role markers, generation prompt), with room
# to spare: Qwen's template adds 5 per message and 3 for the generation prompt.
PROMPT_TEMPLATE_TOKENS = 64


@frozen
class RooflineInputs:
    """What the bandwidth bound needs: a model config, a GPU, the TP size."""

    config: str  # catalog id, config.json, checkpoint dir or Hub id
    gpu: str  # catalog name
    tp: int | None = None  # None: the server's tp_size when it reports one, else 1


@frozen
class VerifyOptions:
    """Knobs of a verify run; the defaults suit a real deployment."""

    model: str | None = None  # served model id; default: the first one /v1/models lists
    reference_url: str | None = None  # the same model with speculative decoding off
    api_key: str | None = None
    timeout_s: float = 120.0  # per request (between stream events when streaming)
    # the whole run: checks share it (runner._budget), none runs past it
    deadline_s: float = 1200.0
    max_tokens: int = 1024  # degenerate-output and reasoning prompts (loops stop earlier)
    short_max_tokens: int = 128  # determinism, reference comparison, tools
    speed_max_tokens: int = 256
    concurrency: tuple[int, ...] = (1, 4, 8)
    roofline: RooflineInputs | None = None
    skip: tuple[str, ...] = ()  # check names not to run (e.g. "tools" where no tool is served)


@dataclass
class CheckContext:
    """Shared state of one run. Checks read what earlier checks recorded here."""

    client: EndpointClient
    options: VerifyOptions
    model: str | None = None
    engine: str | None = None  # "sglang" | "vllm" | None
    server_info: dict[str, Any] | None = None  # SGLang /server_info at the start
    metrics_baseline: dict[str, float] | None = None  # vLLM /metrics at the start
    reference: EndpointClient | None = None
    results: dict[str, CheckResult] = field(default_factory=dict)
    loops_seen: list[str] = field(default_factory=list)  # "where: reason" of every loop found
    accept_length: float | None = None  # measured by the speculative check
    max_model_len: int | None = None  # the served model's context, from /v1/models

    def output_budget(self, messages: list[dict[str, Any]], max_tokens: int) -> int:
        """max_tokens that fits the server's context with this prompt.

        vLLM refuses a request whose max_tokens exceeds max_model_len (HTTP 400: "max_tokens=1024
        cannot be greater than max_model_len=512", vllm/renderers/params.py:TokenizeParams) and,
        in 0.24, one whose prompt does not fit max_model_len - max_tokens. The prompt's length in
        tokens is bounded by its UTF-8 bytes (byte-level tokenizers) plus the chat template's
        tokens, so that bound is kept free."""
        if self.max_model_len is None:
            return max_tokens
        text = json.dumps([m.get("content") for m in messages], ensure_ascii=False)
        prompt_bound = len(text.encode()) + PROMPT_TEMPLATE_TOKENS
        return max(1, min(max_tokens, self.max_model_len - prompt_bound))

    def chat_body(
        self,
        prompt: str | list[dict[str, Any]],
        *,
        max_tokens: int,
        thinking: bool | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A greedy chat request. thinking=None leaves the chat template's default alone."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        body: dict[str, Any] = {
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.output_budget(messages, max_tokens),
            **extra,
        }
        # The id every answer is checked against (client._check_identity): the one liveness
        # chose, else --model (liveness skipped), else none (the server's default answers).
        model = self.model or self.options.model
        if model:
            body["model"] = model
        if thinking is not None:
            # Qwen3-family templates read enable_thinking; other templates ignore unknown keys.
            body["chat_template_kwargs"] = {"enable_thinking": thinking}
        return body


def result(
    name: str,
    title: str,
    status: Status,
    summary: str,
    evidence: list[str] | None = None,
    **data: Any,
) -> CheckResult:
    return CheckResult(
        name=name, title=title, status=status, summary=summary, evidence=evidence or [], data=data
    )


@frozen
class Check:
    """A named check: `run` returns its result, raising EndpointError on a failed request."""

    name: str
    title: str
    run: Callable[[CheckContext], CheckResult]
    needs_generation: bool = True  # skipped when the endpoint is not answering


def first_difference(a: list[str], b: list[str]) -> int | None:
    """Index of the first differing item; None when the lists are equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def show(text: str, limit: int = 80) -> str:
    """A short, quoted, one-line rendering of generated text for evidence lines."""
    text = text if len(text) <= limit else text[:limit] + "..."
    return repr(text)


def note_loop(ctx: CheckContext, where: str, text: str) -> str | None:
    """Replay a finished (non-streamed) text through the loop detector; record and describe a loop."""
    from servefit.verify.detectors import first_loop

    finding = first_loop(text)
    if not finding.degenerate:
        return None
    ctx.loops_seen.append(f"{where}: {finding.reason}")
    return f"{where}: LOOP: {finding.reason}"
