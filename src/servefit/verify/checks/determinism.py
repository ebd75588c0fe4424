"""Greedy determinism: the same prompt twice at temperature 0 gives the same text.

The second request may hit the prefix cache; the warm-rerun check isolates that case.
Engines that batch differently from step to step can drift after many tokens even at
temperature 0 (SGLang --enable-deterministic-inference and vLLM VLLM_BATCH_INVARIANT=1 make
it exact), so a late difference is a warning and an early one a failure.
"""

from __future__ import annotations

from servefit.verify.checks.base import CheckContext, first_difference, note_loop, result, show
from servefit.verify.detectors import tokenize_words
from servefit.verify.prompts import DETERMINISM
from servefit.verify.result import CheckResult

NAME, TITLE = "determinism", "greedy determinism"
EARLY_WORDS = 32  # a difference before this many words is not numeric drift


def run(ctx: CheckContext) -> CheckResult:
    body = ctx.chat_body(DETERMINISM, max_tokens=ctx.options.short_max_tokens, thinking=False)
    first = ctx.client.chat(body)
    second = ctx.client.chat(body)
    if not first.content.strip():
        return result(
            NAME, TITLE, "fail", "the answer is empty", [f"finish_reason {first.finish_reason!r}"]
        )
    loop = note_loop(ctx, "determinism prompt", first.content)
    if first.content == second.content:
        evidence = [f"{len(first.content)} chars: {show(first.content)}"]
        if loop:
            # Deterministic, but deterministically looping: the degenerate check fails it.
            return result(
                NAME,
                TITLE,
                "pass",
                "two greedy runs gave the same (looping) text",
                evidence + [loop],
            )
        return result(NAME, TITLE, "pass", "two greedy runs gave the same text", evidence)
    a, b = tokenize_words(first.content), tokenize_words(second.content)
    at = first_difference(a, b) or 0
    evidence = [
        f"run 1: {show(' '.join(a[max(0, at - 3) : at + 5]))}",
        f"run 2: {show(' '.join(b[max(0, at - 3) : at + 5]))}",
    ]
    status = "fail" if at < EARLY_WORDS else "warn"
    return result(
        NAME,
        TITLE,
        status,
        f"greedy runs differ from word {at}",
        evidence,
        first_difference_word=at,
    )
