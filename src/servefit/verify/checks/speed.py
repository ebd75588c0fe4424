"""Speed: time to first token, single-stream decode rate, a short concurrency sweep, and the
single-stream rate against the bandwidth bound (servefit.verify.roofline) for the model, GPU
and TP, times the accept length the speculative check measured.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from servefit.verify.checks.base import CheckContext, result
from servefit.verify.client import Completion, EndpointError
from servefit.verify.prompts import SPEED
from servefit.verify.result import CheckResult

NAME, TITLE = "speed", "speed"
FAR_BELOW = 0.3  # measured / bound below this is flagged
COLLAPSE = 0.8  # total tok/s at the top concurrency below this x one stream's: throughput collapses
ABOVE = 1.15  # measured / bound above this: the bound's inputs do not describe the deployment


def decode_rate(c: Completion) -> tuple[float | None, int]:
    """(tokens/s after the first token, tokens counted). Usage counts tokens; without it the
    stream events are counted, which undercounts when one event carries several tokens."""
    tokens = c.completion_tokens or c.events
    if c.ttft_s is None or c.last_token_s is None or tokens < 2:
        return None, tokens
    span = c.last_token_s - c.ttft_s
    return ((tokens - 1) / span if span > 0 else None), tokens


def _sweep(ctx: CheckContext, body: dict, level: int) -> tuple[float, float | None, list[str]]:
    """(aggregate tokens/s, mean per-stream decode tokens/s, the loops found) for `level`
    concurrent streams."""
    import time

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=level) as pool:
        done = list(pool.map(lambda _: ctx.client.stream_chat(body), range(level)))
    wall = time.perf_counter() - started
    looped = [c.loop for c in done if c.loop]
    total = sum(c.completion_tokens or c.events for c in done)
    rates = [r for r, _ in map(decode_rate, done) if r]
    mean = sum(rates) / len(rates) if rates else None
    return total / wall if wall > 0 else 0.0, mean, looped


def _gpu(name: str):
    """Catalog GPU, or the first local one through NVML for `local`."""
    from servefit.errors import HardwareError

    if name != "local":
        from servefit.hardware.catalog import get_gpu

        return get_gpu(name)
    from servefit.hardware.nvml import gpu_spec_from_local, local_gpus

    found = local_gpus()
    if not found:
        raise HardwareError(f"--gpu local: {found.reason or 'no GPU'}")
    return gpu_spec_from_local(found[0])


def _bound(ctx: CheckContext, context_tokens: int):
    """The DecodeBound, or a one-line reason why there is none."""
    spec = ctx.options.roofline
    if spec is None:
        return (
            None,
            "no bandwidth bound: give --gpu (and --config when the served name is not a config)",
        )
    from servefit.errors import ServefitError
    from servefit.model.inventory import load_model
    from servefit.verify.roofline import decode_bound

    tp = spec.tp or int((ctx.server_info or {}).get("tp_size") or 1)
    config = spec.config or ctx.model or ""
    try:
        model = load_model(config)
        gpu = _gpu(spec.gpu)
        if gpu.bandwidth_gbs <= 0:
            return None, f"no bandwidth bound: the bandwidth of {gpu.name} is unknown"
        bound = decode_bound(
            model,
            gpu,
            tp=tp,
            context_tokens=context_tokens,
            accept_length=ctx.accept_length or 1.0,
        )
    except ServefitError as exc:
        return None, f"no bandwidth bound for {config!r}: {exc}"
    return bound, ""


def run(ctx: CheckContext) -> CheckResult:
    body = ctx.chat_body(SPEED, max_tokens=ctx.options.speed_max_tokens, thinking=False)
    single = ctx.client.stream_chat(body)
    if single.loop:  # stopped at a certain loop: measured all the same, and failed below
        ctx.loops_seen.append(f"speed prompt, {single.loop}")
    rate, tokens = decode_rate(single)
    ttft = single.ttft_s
    evidence = [
        f"single stream: TTFT {ttft * 1000:.0f} ms, "
        if ttft is not None
        else "single stream: no token, ",
    ]
    evidence[0] += (
        f"{rate:,.1f} tok/s decode over {tokens} tokens"
        if rate
        else f"{tokens} tokens, too few to time"
    )
    if single.completion_tokens is None:
        evidence.append("no usage in the stream: tokens counted as stream events (a lower bound)")
    data: dict = {"ttft_s": ttft, "decode_tok_s": rate, "tokens": tokens}

    sweep: dict[int, float] = {}
    for level in () if single.loop else ctx.options.concurrency:  # a loop has no speed
        if level <= 1:
            continue
        try:
            aggregate, per_stream, looped = _sweep(ctx, body, level)
        except EndpointError as exc:
            evidence.append(f"{level} streams: failed: {exc.reason}")
            return result(
                NAME,
                TITLE,
                "fail",
                f"the server failed under {level} concurrent streams",
                evidence,
                **data,
            )
        if looped:  # one stream alone does not loop, several at once do
            ctx.loops_seen.extend(f"speed, {level} streams, {loop}" for loop in looped)
            evidence.append(f"{level} streams: {len(looped)} loop: {looped[0]}")
            return result(
                NAME,
                TITLE,
                "fail",
                f"{len(looped)} of {level} concurrent streams loop",
                evidence,
                **data,
            )
        sweep[level] = aggregate
        shown = f"{per_stream:,.1f} tok/s per stream" if per_stream else "per stream n/a"
        evidence.append(f"{level} streams: {aggregate:,.1f} tok/s total, {shown}")
    data["concurrency_tok_s"] = sweep

    status, summary = "pass", (f"{rate:,.1f} tok/s single stream" if rate else "no decode rate")
    one_stream = tokens / single.elapsed_s if single.elapsed_s > 0 else 0.0
    if sweep and one_stream:
        top = max(sweep)
        if sweep[top] < COLLAPSE * one_stream:
            # More streams should never deliver fewer tokens per second in total.
            status = "warn"
            summary += (
                f"; {top} streams together deliver {sweep[top]:,.1f} tok/s, "
                f"less than one stream alone ({one_stream:,.1f})"
            )
    prompt_tokens = (single.usage or {}).get("prompt_tokens") or 0
    bound, why = _bound(ctx, int(prompt_tokens) + tokens // 2)
    if bound is None:
        evidence.append(why)
    else:
        evidence.append(f"bound: {bound.describe()}")
        data["bound_tok_s"] = bound.tokens_per_s
        if rate:
            ratio = rate / bound.tokens_per_s
            data["fraction_of_bound"] = ratio
            if ratio < FAR_BELOW:
                status = "warn"
                summary = (
                    f"{rate:,.1f} tok/s is {ratio:.0%} of the {bound.tokens_per_s:,.0f} tok/s "
                    "bandwidth bound: something other than memory bandwidth limits decoding"
                )
            elif ratio > ABOVE:
                status = "warn"
                summary = (
                    f"{rate:,.1f} tok/s exceeds the {bound.tokens_per_s:,.0f} tok/s bound: "
                    "--gpu, --tp or --config do not describe this deployment"
                )
            else:
                summary += f", {ratio:.0%} of the {bound.tokens_per_s:,.0f} tok/s bound"
    if single.loop:
        status, summary = "fail", f"the speed prompt's output loops ({single.loop}); {summary}"
        evidence.append(f"stream stopped at the loop after {single.events} token events")
    return result(NAME, TITLE, status, summary, evidence, **data)
