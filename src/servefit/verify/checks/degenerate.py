"""Degenerate output on a small prompt set, detected on the stream and stopped early.

Each prompt is streamed with the chat template's default thinking; one detector watches the
reasoning, one the content, and the stream is closed as soon as either is certain of a loop
(a looping request otherwise runs to max_tokens and keeps the GPU busy). The count prompt is
also checked for its numbers: speculative decoding that drops tokens loses some of them.
"""

from __future__ import annotations

import re

from servefit.verify.checks.base import CheckContext, result, show
from servefit.verify.detectors import Finding, LoopDetector
from servefit.verify.prompts import DEGENERATE_SET
from servefit.verify.result import CheckResult

NAME, TITLE = "degenerate", "degenerate output"


def stream_watched(ctx: CheckContext, body: dict) -> tuple[object, dict[str, Finding]]:
    """Stream `body` with a loop detector per channel; stop at the first certain loop."""
    detectors = {"reasoning": LoopDetector(), "content": LoopDetector()}
    completion = ctx.client.stream_chat(body, lambda channel, text: detectors[channel].feed(text))
    return completion, {channel: d.finish() for channel, d in detectors.items()}


def missing_numbers(content: str, upto: int = 20) -> list[int]:
    seen = {int(n) for n in re.findall(r"\d+", content)}
    return [i for i in range(1, upto + 1) if i not in seen]


def run(ctx: CheckContext) -> CheckResult:
    evidence: list[str] = []
    status = "pass"
    loops = 0
    for label, prompt in DEGENERATE_SET:
        body = ctx.chat_body(prompt, max_tokens=ctx.options.max_tokens)
        completion, findings = stream_watched(ctx, body)
        looped = {ch: f for ch, f in findings.items() if f.degenerate}
        if looped:
            loops += 1
            status = "fail"
            for channel, finding in looped.items():
                where = f"{label} prompt, {channel}"
                ctx.loops_seen.append(f"{where}: {finding.reason}")
                stopped = " - stream stopped" if completion.stopped_early else ""
                evidence.append(
                    f"{where}: LOOP after {finding.at_char} chars: {finding.reason}{stopped}"
                )
            continue
        suspicious = [f"{ch} {f.reason}" for ch, f in findings.items() if f.suspicious]
        line = (
            f"{label}: {len(completion.reasoning)} reasoning + {len(completion.content)} content chars, "
            f"finish {completion.finish_reason}"
        )
        if suspicious:
            status = "warn" if status == "pass" else status
            line += "; " + "; ".join(suspicious)
        if label == "count":
            gone = missing_numbers(completion.content)
            if completion.finish_reason == "stop" and gone:
                status = "fail"
                line += f"; the count misses {gone}: {show(completion.content)}"
            elif gone:
                status = "warn" if status == "pass" else status
                line += f"; no complete count within {body['max_tokens']} tokens"
            else:
                line += "; all 20 numbers present"
        evidence.append(line)
    summary = (
        f"{loops} of {len(DEGENERATE_SET)} prompts loop"
        if loops
        else "no loop" + ("" if status == "pass" else ", but see the evidence")
    )
    return result(NAME, TITLE, status, summary, evidence, looping_prompts=loops)
