"""Speculative decoding: is the reported acceptance plausible?

A loop is trivially predictable, so acceptance climbs while a model loops: a rate near 100 %
is a red flag, not a success, and together with degenerate output it is a failure. An accept
length near 1.0 means drafts are almost never accepted, so speculation only costs time.
The numbers come from the server (servefit.verify.spec_metrics); for vLLM only the requests
since the run started count (counters minus the first scrape).
"""

from __future__ import annotations

from servefit.verify.checks.base import CheckContext, result
from servefit.verify.client import EndpointError
from servefit.verify.result import CheckResult
from servefit.verify.spec_metrics import SpecStats, parse_prometheus, sglang_stats, vllm_stats

NAME, TITLE = "speculative", "speculative decoding"
NEAR_FULL = 0.95  # draft acceptance at or above this is "near 100 %"
HIGH = 0.8  # ... at or above this, with degenerate output, is the loop signature
USELESS_LENGTH = 1.05  # accept length at or below this: drafts are not accepted


def fetch_stats(ctx: CheckContext) -> SpecStats | None:
    """The server's current speculative stats, or None when it publishes none."""
    if ctx.engine in (None, "sglang"):
        for path in ("/server_info", "/get_server_info"):
            try:
                info = ctx.client.get_json(path)
            except EndpointError:
                continue
            if isinstance(info, dict) and "internal_states" in info:
                return sglang_stats(info)
    if ctx.engine in (None, "vllm"):
        response = ctx.client.get("/metrics")
        if response.status_code == 200 and "vllm:" in response.text:
            return vllm_stats(parse_prometheus(response.text), ctx.metrics_baseline)
    return None


def run(ctx: CheckContext) -> CheckResult:
    stats = fetch_stats(ctx)
    if stats is None:
        return result(
            NAME,
            TITLE,
            "skip",
            "the server publishes no speculative metrics (/server_info, /metrics)",
        )
    if not stats.enabled:
        return result(NAME, TITLE, "skip", "speculative decoding is off", [f"from {stats.source}"])
    evidence = [
        f"from {stats.source}" + (f", algorithm {stats.algorithm}" if stats.algorithm else "")
    ]
    if stats.accept_length is None:
        return result(
            NAME,
            TITLE,
            "warn",
            "speculative decoding is on but no acceptance is reported yet",
            evidence,
        )
    ctx.accept_length = stats.accept_length
    rate = stats.draft_acceptance
    shown = f"accept length {stats.accept_length:.2f}"
    if stats.num_draft_tokens:
        shown += f" of {stats.num_draft_tokens} tokens per step"
    if rate is not None:
        shown += f", draft acceptance {rate:.0%}"
    evidence.append(shown)
    if stats.source.startswith("sglang") and stats.num_draft_tokens:
        # What SGLang's own decode log line calls "accept rate" (accept length / draft tokens,
        # sglang/srt/managers/scheduler_metrics_mixin.py:log_decode_stats), to match the log.
        evidence.append(
            f"the engine log's accept rate: {stats.accept_length / stats.num_draft_tokens:.2f}"
        )
    data = {
        "accept_length": stats.accept_length,
        "draft_acceptance": rate,
        "num_draft_tokens": stats.num_draft_tokens,
    }
    if rate is not None and rate >= HIGH and ctx.loops_seen:
        evidence += [f"loop: {seen}" for seen in ctx.loops_seen[:3]]
        return result(
            NAME,
            TITLE,
            "fail",
            f"{rate:.0%} acceptance while the output loops: the rate measures the loop, not the draft",
            evidence,
            **data,
        )
    if rate is not None and rate >= NEAR_FULL:
        return result(
            NAME,
            TITLE,
            "warn",
            f"{rate:.0%} acceptance is typical of loops or a draft that copies the target; "
            "no loop was seen in this run",
            evidence,
            **data,
        )
    if stats.accept_length <= USELESS_LENGTH:
        return result(
            NAME,
            TITLE,
            "warn",
            f"accept length {stats.accept_length:.2f}: drafts are almost never accepted, "
            "speculation only costs time (draft weights not loaded?)",
            evidence,
            **data,
        )
    return result(NAME, TITLE, "pass", shown, evidence, **data)
