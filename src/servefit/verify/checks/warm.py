"""Warm rerun: the same prompt after a prefix-cache hit gives the cold answer.

The first request starts with a unique nonce, so nothing of it can be cached; the second is
the same request, whose whole prompt the prefix cache can now serve. The engines report the
hit in `usage.prompt_tokens_details.cached_tokens` (SGLang with --enable-cache-report, vLLM
with --enable-prompt-tokens-details); without it the hit is assumed, not seen.
"""

from __future__ import annotations

import uuid

from servefit.verify.checks.base import CheckContext, first_difference, result, show
from servefit.verify.checks.determinism import EARLY_WORDS
from servefit.verify.detectors import tokenize_words
from servefit.verify.prompts import WARM_DOCUMENT, WARM_QUESTION
from servefit.verify.result import CheckResult

NAME, TITLE = "warm", "warm rerun (prefix cache)"


def run(ctx: CheckContext) -> CheckResult:
    prompt = f"Request {uuid.uuid4().hex}.\n\n{WARM_DOCUMENT}\n\n{WARM_QUESTION}"
    body = ctx.chat_body(prompt, max_tokens=ctx.options.short_max_tokens, thinking=False)
    cold = ctx.client.chat(body)
    warm = ctx.client.chat(body)
    cached = (cold.cached_tokens, warm.cached_tokens)
    if warm.cached_tokens is None:
        hit = "the server does not report cached tokens"
    elif warm.cached_tokens == 0:
        hit = "0 cached tokens on the rerun: the prefix cache is off or was not hit"
    else:
        hit = f"cached tokens: cold {cold.cached_tokens}, warm {warm.cached_tokens}"
    evidence = [hit]
    if cold.content == warm.content:
        evidence.append(f"both: {show(cold.content)}")
        return result(
            NAME,
            TITLE,
            "pass",
            "the warm rerun gives the cold answer",
            evidence,
            cached_tokens=list(cached),
        )
    a, b = tokenize_words(cold.content), tokenize_words(warm.content)
    at = first_difference(a, b) or 0
    evidence += [
        f"cold: {show(' '.join(a[max(0, at - 3) : at + 6]))}",
        f"warm: {show(' '.join(b[max(0, at - 3) : at + 6]))}",
    ]
    # As for determinism: an early difference is a wrong cache, a late one may be numeric drift.
    status = "fail" if at < EARLY_WORDS else "warn"
    return result(
        NAME,
        TITLE,
        status,
        f"the warm rerun differs from word {at}",
        evidence,
        cached_tokens=list(cached),
        first_difference_word=at,
    )
