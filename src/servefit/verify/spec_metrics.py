"""Speculative-decoding acceptance as the engines publish it.

SGLang: `GET /server_info` (`/get_server_info` before it) returns the server args and one
`internal_states` dict per DP rank (sglang/srt/entrypoints/http_server.py:server_info).
`avg_spec_accept_length` there is `spec_total_num_accepted_tokens / spec_total_num_forward_ct`,
and each verify step adds `accepted + 1` per request
(sglang/srt/managers/scheduler_metrics_mixin.py:update_spec_metrics), so it counts the bonus
token: 1.0 means no draft token was ever accepted, `speculative_num_draft_tokens` means all were.

vLLM: `GET /metrics` (Prometheus text) has counters `vllm:spec_decode_num_drafts`,
`vllm:spec_decode_num_draft_tokens`, `vllm:spec_decode_num_accepted_tokens`
(vllm/v1/spec_decode/metrics.py:SpecDecodingProm; `_total` suffix in the text format). The
engine's own summary (SpecDecodingLogging.log) uses
mean acceptance length = 1 + accepted / drafts and draft acceptance rate = accepted / draft tokens.

Both are reduced here to one SpecStats: accept length including the bonus token, and the
draft acceptance rate (accepted draft tokens / proposed draft tokens, bonus excluded).
"""

from __future__ import annotations

import re
from typing import Any

from servefit.frozen import frozen

_SAMPLE_RE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)"
)


@frozen
class SpecStats:
    """Speculative decoding as the server reports it."""

    source: str  # "sglang /server_info" | "vllm /metrics"
    enabled: bool
    algorithm: str | None = None
    num_draft_tokens: int | None = None  # tokens verified per step, bonus included
    accept_length: float | None = None  # mean tokens produced per verify step, bonus included
    draft_acceptance: float | None = None  # accepted / proposed draft tokens (0..1)
    drafts: float | None = None  # vLLM: verify steps counted (after subtracting a baseline)


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum every sample of each metric name over its labels (all engines, all positions)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE_RE.match(line)
        if not match:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        totals[match["name"]] = totals.get(match["name"], 0.0) + value
    return totals


_VLLM = "vllm:spec_decode_num_"


def vllm_counters(metrics: dict[str, float]) -> tuple[float, float, float] | None:
    """(drafts, draft_tokens, accepted_tokens) or None when speculation is off."""
    names = ("drafts", "draft_tokens", "accepted_tokens")
    values = [metrics.get(f"{_VLLM}{n}_total", metrics.get(f"{_VLLM}{n}")) for n in names]
    if any(v is None for v in values):
        return None
    return values[0], values[1], values[2]  # type: ignore[return-value]


def vllm_stats(metrics: dict[str, float], baseline: dict[str, float] | None = None) -> SpecStats:
    """From /metrics; with a baseline (an earlier scrape) only the requests since it count."""
    now = vllm_counters(metrics)
    if now is None:
        return SpecStats("vllm /metrics", enabled=False)
    drafts, draft_tokens, accepted = now
    before = vllm_counters(baseline) if baseline else None
    if before is not None and drafts > before[0]:
        drafts, draft_tokens, accepted = (
            drafts - before[0],
            draft_tokens - before[1],
            accepted - before[2],
        )
    if drafts <= 0:
        return SpecStats("vllm /metrics", enabled=True, drafts=0)
    # vllm/v1/spec_decode/metrics.py:SpecDecodingLogging.log
    accept_length = 1 + accepted / drafts
    rate = accepted / draft_tokens if draft_tokens > 0 else None
    per_step = round(draft_tokens / drafts) + 1
    return SpecStats(
        "vllm /metrics",
        enabled=True,
        num_draft_tokens=per_step,
        accept_length=accept_length,
        draft_acceptance=rate,
        drafts=drafts,
    )


def sglang_stats(info: dict[str, Any]) -> SpecStats:
    """From /server_info: the server args and the per-DP-rank internal states."""
    algorithm = info.get("speculative_algorithm")
    if not algorithm or str(algorithm).upper() == "NONE":
        return SpecStats("sglang /server_info", enabled=False)
    draft_tokens = info.get("speculative_num_draft_tokens")
    if not isinstance(draft_tokens, int):
        # sglang/srt/server_args.py:ServerArgs._handle_speculative_decoding: with topk 1,
        # num_draft_tokens = num_steps + 1
        steps = info.get("speculative_num_steps")
        draft_tokens = steps + 1 if isinstance(steps, int) else None
    lengths = [
        float(s["avg_spec_accept_length"])
        for s in info.get("internal_states") or []
        if isinstance(s, dict) and isinstance(s.get("avg_spec_accept_length"), (int, float))
    ]
    accept_length = sum(lengths) / len(lengths) if lengths else None
    rate = None
    if accept_length is not None and draft_tokens and draft_tokens > 1:
        rate = (accept_length - 1) / (draft_tokens - 1)
    return SpecStats(
        "sglang /server_info",
        enabled=True,
        algorithm=str(algorithm),
        num_draft_tokens=draft_tokens,
        accept_length=accept_length,
        draft_acceptance=rate,
    )
