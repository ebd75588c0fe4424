"""Reasoning parser: with thinking on, the reasoning comes back apart from the answer.

With a reasoning parser (SGLang and vLLM `--reasoning-parser`), the thinking arrives in
`reasoning_content` (SGLang) / `reasoning` (vLLM) and `content` holds only the answer.
Without one, the model's `<think>...</think>` lands in `content`; Qwen3-family templates open
the `<think>` in the prompt, so often only the closing `</think>` shows.
"""

from __future__ import annotations

from servefit.verify.checks.base import CheckContext, result, show
from servefit.verify.checks.degenerate import stream_watched
from servefit.verify.prompts import REASONING, REASONING_ANSWER
from servefit.verify.result import CheckResult

NAME, TITLE = "reasoning", "reasoning parser"
THINK_TAGS = ("<think>", "</think>")


def run(ctx: CheckContext) -> CheckResult:
    body = ctx.chat_body(REASONING, max_tokens=ctx.options.max_tokens, thinking=True)
    completion, findings = stream_watched(ctx, body)
    content, reasoning = completion.content, completion.reasoning
    evidence = [
        f"reasoning {len(reasoning)} chars, content {len(content)} chars, "
        f"finish {completion.finish_reason}"
    ]
    for channel, finding in findings.items():
        if finding.degenerate:
            ctx.loops_seen.append(f"reasoning prompt, {channel}: {finding.reason}")
            evidence.append(f"{channel}: LOOP after {finding.at_char} chars: {finding.reason}")
            return result(NAME, TITLE, "fail", f"the {channel} loops", evidence)
    tags = [t for t in THINK_TAGS if t in content]
    if tags:
        evidence.append(f"content: {show(content)}")
        return result(
            NAME,
            TITLE,
            "fail",
            f"{' and '.join(tags)} left in content: no reasoning parser on the server "
            "(e.g. --reasoning-parser qwen3 for Qwen3-family models)",
            evidence,
        )
    if not reasoning:
        return result(
            NAME,
            TITLE,
            "skip",
            "no reasoning returned: the model does not think, or its template turns thinking off",
            evidence,
        )
    if not content.strip():
        if completion.finish_reason == "length":
            return result(
                NAME,
                TITLE,
                "warn",
                f"still thinking after {body['max_tokens']} tokens: no answer to judge",
                evidence + [f"reasoning ends: {show(reasoning[-80:])}"],
            )
        return result(
            NAME,
            TITLE,
            "fail",
            "reasoning came back but the answer is empty",
            evidence + [f"reasoning ends: {show(reasoning[-80:])}"],
        )
    evidence.append(f"answer: {show(content)}")
    if REASONING_ANSWER not in content:
        evidence.append(f"the answer does not contain {REASONING_ANSWER} (3 x 12 - 10)")
    return result(NAME, TITLE, "pass", "reasoning and answer are separated", evidence)
