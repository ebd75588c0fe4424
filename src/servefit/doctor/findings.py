"""Root-cause texts and findings, each built from the numbers the log printed."""

from __future__ import annotations

import math
from collections.abc import Callable

from servefit.doctor.calibration import measured
from servefit.doctor.facts import ErrorFact, LaunchFacts, LogFacts
from servefit.doctor.schema import Finding, Fix, FixChange, FixOption, Replay, RootCause

# Tool / reasoning parsers per architecture family. The engine picks a parser from the chat
# template (sglang/srt/parser/template_detection.py, 0.5.23): `<function=` and `<parameter=`
# -> "qwen3_coder" (_is_qwen3_coder, checked before "qwen"); a JSON body in <tool_call> ->
# "qwen"/"qwen25" (function_call/qwen25_detector.py). Qwen3.5/3.6 chat templates emit the
# `<function=...><parameter=...>` form, so the JSON parsers never see a tool call there.
_QWEN35 = (
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
)
PARSERS: dict[tuple[str, ...], dict[str, tuple[set[str], set[str]]]] = {
    # arch -> {"tool": (expected, known-wrong), "reasoning": (expected, known-wrong)}
    _QWEN35: {
        "tool": (
            {"qwen3_coder", "qwen3_xml"},
            {
                "qwen",
                "qwen25",
                "hermes",
                "deepseekv3",
                "llama3",
                "mistral",
                "pythonic",
                "kimi_k2",
                "glm45",
                "gpt-oss",
            },
        ),
        "reasoning": (
            {"qwen3", "deepseek-r1"},
            {"gpt-oss", "kimi", "glm45", "step3", "mistral", "minimax"},
        ),
    },
}

_SERVING = {"decode", "prefill", "http", "throughput", "spec", "finish_text"}


def _f(x: float | None, d: int = 2) -> str:
    return "?" if x is None else f"{x:.{d}f}"


# ---------------------------------------------------------------------------------------------
# Root causes
# ---------------------------------------------------------------------------------------------


# Error kinds whose cause reads the same whatever numbers the log printed: (summary, flags to try).
_FIXED_CAUSES: dict[str, tuple[str, tuple[str, ...]]] = {
    "illegal_memory_access": (
        "a GPU kernel touched memory outside its buffers (an engine or kernel bug, or a backend "
        "that does not support this model or setting); not a sizing problem",
        ("--attention-backend", "--disable-cuda-graph", "CUDA_LAUNCH_BLOCKING=1 (to locate it)"),
    ),
    "nccl": (
        "the GPUs could not communicate (NCCL): peer-to-peer, driver or a hung rank",
        ("--disable-custom-all-reduce", "NCCL_P2P_DISABLE=1", "NCCL_DEBUG=INFO (to see why)"),
    ),
    "engine_dead": (
        "vLLM's engine core died; the line it points to ('root cause above') was not recognised "
        "in this log",
        (),
    ),
}


def error_cause(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    """The root cause of a launch that stopped on `err`: the handler of its kind."""
    return _CAUSES.get(err.kind, _exception)(launch, err)


CauseOf = Callable[[LaunchFacts, ErrorFact], RootCause]


def _startup_memory(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    """Which pool did not fit, as the engine's own message says (`which`)."""
    if launch.engine.name != "vllm":
        return _SGLANG_MEMORY.get(err.numbers.get("which"), _sglang_kv_zero)(launch, err)
    return _VLLM_MEMORY.get(err.numbers.get("which"), _vllm_memory)(launch, err)


def _fraction(launch: LaunchFacts, err: ErrorFact) -> object:
    return err.numbers.get("mem_fraction_static") or launch.args.get("mem_fraction_static")


def _sglang_weights(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    _, W = measured(launch)
    summary = (
        f"the weights ({_f(W)} GiB per rank) leave no GPU memory for the KV cache under "
        f"--mem-fraction-static {_fraction(launch, err)}; the engine asks for more than "
        f"{err.numbers.get('suggested', '?')}"
    )
    return RootCause(
        kind=err.kind,
        summary=summary,
        error=err,
        memory="static pool after weights",
        consumer="weights",
        flags=["--mem-fraction-static", "--tp-size", "--quantization"],
    )


def _sglang_mamba_state(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    summary = (
        "the hybrid (mamba/linear-attention) state cache does not fit: "
        f"{err.message.split('. Try')[0]}"
    )
    return RootCause(
        kind=err.kind,
        summary=summary,
        error=err,
        memory="mamba state pool",
        consumer="mamba state pool",
        flags=[
            "--max-running-requests",
            "--mem-fraction-static",
            "--speculative-num-draft-tokens",
            "--mamba-full-memory-ratio",
        ],
    )


def _sglang_kv_zero(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    P, W = measured(launch)
    f = _fraction(launch, err)
    parts = [f"SGLang sized the KV cache at zero tokens under --mem-fraction-static {f}"]
    if P is not None and W is not None and isinstance(f, (int, float)):
        budget = (P - W) - P * (1 - f)
        parts.append(
            f": of {P:.2f} GiB free before the weights, the weights took {W:.2f} GiB and "
            f"{P * (1 - f):.2f} GiB stays outside the static fraction, so {budget:.2f} GiB was left "
            "for the state and KV pools, and the state reservations took all of it"
        )
    return RootCause(
        kind=err.kind,
        summary="".join(parts),
        error=err,
        memory="KV cache pool",
        flags=["--mem-fraction-static", "--max-running-requests", "--context-length"],
    )


def _vllm_max_model_len(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    n = err.numbers
    need, avail = n.get("needed_gib"), n.get("available_gib")
    est = n.get("estimated_max_len") or n.get("kv_tokens")
    summary = (
        f"one request of max_model_len {n.get('max_model_len')} tokens does not fit in the KV cache"
    )
    if need is not None:
        summary += f": it needs {need} GiB, the memory profile left {avail} GiB per rank"
    if est:
        summary += f"; the cache holds about {est:,} tokens"
    return RootCause(
        kind=err.kind,
        summary=summary,
        error=err,
        memory="KV cache",
        consumer="kv cache",
        flags=[
            "--max-model-len",
            "--gpu-memory-utilization",
            "--kv-cache-dtype",
            "--tensor-parallel-size",
        ],
    )


def _vllm_free_memory(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    n = err.numbers
    return RootCause(
        kind=err.kind,
        error=err,
        memory="free GPU memory at start",
        summary=(
            f"only {n.get('free_gib')} of {n.get('total_gib')} GiB was free when vLLM "
            f"started, less than --gpu-memory-utilization {n.get('util')} asks "
            f"({n.get('wanted_gib')} GiB): another process holds GPU memory"
        ),
        consumer="other processes on the GPU",
        flags=["--gpu-memory-utilization"],
    )


def _vllm_mamba_blocks(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    n = err.numbers
    return RootCause(
        kind=err.kind,
        error=err,
        memory="mamba state blocks",
        consumer="mamba state",
        summary=(
            f"max_num_seqs {n.get('max_num_seqs')} needs more mamba state blocks than "
            f"the {n.get('blocks')} that fit"
        ),
        flags=["--max-num-seqs", "--gpu-memory-utilization"],
    )


def _vllm_memory(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    return RootCause(
        kind=err.kind,
        error=err,
        memory="KV cache",
        summary=err.message,
        flags=["--gpu-memory-utilization"],
    )


def _cuda_oom(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    n = err.numbers
    where = "while serving" if err.phase == "runtime" else f"during start-up ({launch.phase})"
    got = (
        f" trying to allocate {n.get('alloc')} {n.get('unit')}"
        if n.get("alloc") is not None
        else ""
    )
    free = f" with {n.get('free')} {n.get('free_unit')} free" if n.get("free") is not None else ""
    flags = (
        [
            "--mem-fraction-static",
            "--cuda-graph-max-bs",
            "--chunked-prefill-size",
            "--max-running-requests",
        ]
        if launch.engine.name != "vllm"
        else [
            "--gpu-memory-utilization",
            "--max-num-seqs",
            "--max-num-batched-tokens",
            "--enforce-eager",
        ]
    )
    return RootCause(
        kind=err.kind,
        error=err,
        memory="memory outside the static pools (activations, CUDA graphs, draft)",
        summary=f"CUDA ran out of memory {where}{got}{free}: the headroom left outside the "
        "pools was too small",
        flags=flags,
    )


def _fixed(summary: str, flags: tuple[str, ...]) -> CauseOf:
    return lambda launch, err: RootCause(
        kind=err.kind, error=err, summary=summary, flags=list(flags)
    )


def _arg_error(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    return RootCause(
        kind=err.kind,
        error=err,
        summary=f"the engine rejected its arguments before allocating anything: {err.message}",
    )


def _exception(launch: LaunchFacts, err: ErrorFact) -> RootCause:
    return RootCause(
        kind=err.kind, error=err, summary=f"the engine stopped on an exception: {err.message}"
    )


# which pool the engine's "not enough memory" names (the rules' `which`) -> its cause
_SGLANG_MEMORY: dict[object, CauseOf] = {
    "weights": _sglang_weights,
    "mamba_state": _sglang_mamba_state,
}
_VLLM_MEMORY: dict[object, CauseOf] = {
    "max_model_len": _vllm_max_model_len,
    "free_memory": _vllm_free_memory,
    "mamba_blocks": _vllm_mamba_blocks,
}
# error kind -> its cause; any other kind stopped the engine on an exception
_CAUSES: dict[str, CauseOf] = {
    "startup_memory": _startup_memory,
    "cuda_oom": _cuda_oom,
    **{kind: _fixed(summary, flags) for kind, (summary, flags) in _FIXED_CAUSES.items()},
    "arg_error": _arg_error,
}


def exit_cause(launch: LaunchFacts) -> RootCause:
    text = launch.exit.text if launch.exit else ""
    if "-9" in text or "Killed" in text:
        why = (
            "the process was killed with SIGKILL: the kernel's OOM killer (host RAM) or a `kill -9` / "
            "`pkill -9`; check `dmesg | grep -i -e oom -e killed`"
        )
        return RootCause(kind="killed", summary=why, memory="host memory (if the OOM killer)")
    if "SIGTERM" in text or "-15" in text:
        return RootCause(
            kind="stopped",
            summary="the server was stopped with SIGTERM (kill, pkill, Ctrl-C or a "
            "service manager), not by an engine error",
        )
    return RootCause(kind="exited", summary=f"the engine exited: {text}")


def incomplete(launch: LaunchFacts, log: LogFacts) -> Finding:
    cut = (
        " The file ends mid-line: it was cut or is still being written."
        if log.ends_mid_line
        else ""
    )
    return Finding(
        code="incomplete",
        severity="warning",
        title=f"the launch stops during '{launch.phase}'",
        detail=(
            f"no ready line, error or exit after line {launch.last_line} (last recognised: "
            f"{launch.last_event}). The engine is still starting, was killed without a word (SIGKILL, "
            f"OOM killer), or the log is an excerpt.{cut}"
        ),
    )


# ---------------------------------------------------------------------------------------------
# Fix from the log alone (vLLM prints its own estimate)
# ---------------------------------------------------------------------------------------------


def fix_from_log(launch: LaunchFacts, command: str | None) -> Fix | None:
    """The fix computed from the log's own figures, for when the launch cannot be replayed (no
    config): vLLM's estimate of the longest context, or SGLang's memory errors worked back to
    the flag that moves them."""
    err = launch.primary_error
    if err is None:
        return None
    if launch.engine.name != "vllm":
        option = _sglang_from_log(launch, err)
        if option is None:
            return None
        fix = Fix(best=option, source="log")
        if command:
            from servefit.doctor.replay import fixed_command

            fix = fix.model_copy(update={"command": fixed_command(command, fix, "sglang", None)})
        return fix
    if err.numbers.get("which") != "max_model_len":
        return None
    est = err.numbers.get("estimated_max_len") or err.numbers.get("kv_tokens")
    if not est:
        return None
    old = err.numbers.get("max_model_len")
    option = FixOption(
        changes=[FixChange(arg="max_model_len", flag="--max-model-len", old=old, new=int(est))],
        why=f"the engine's own estimate of the longest request the measured KV memory holds ({int(est):,} tokens); "
        "or raise --gpu-memory-utilization / add GPUs to keep the full length",
    )
    fix = Fix(best=option, source="log")
    if command:
        from servefit.doctor.replay import fixed_command

        fix = fix.model_copy(update={"command": fixed_command(command, fix, "vllm", None)})
    return fix


MAX_FRACTION = 0.95  # above this the reserve cannot hold activations and CUDA graphs


def _up(x: float) -> float:
    """Up to the next 0.01: a fraction that is at least `x`."""
    return math.ceil(round(x * 100, 6)) / 100


def _sglang_from_log(launch: LaunchFacts, err: ErrorFact) -> FixOption | None:
    """SGLang's start-up memory errors, worked back from the numbers it printed.

    0.5.23 kv_cache_configurator.py:_handle_max_mamba_cache raises with total_rest_memory, the
    memory --mem-fraction-static leaves for the state and KV pools after the weights (less the
    speculative state in its branch), and mamba_cache_per_req; _profile_available_bytes names
    the fraction the weights need. With the log's free memory before the weights (P) and its
    weights (W), P x f - W is that same budget before the speculative state."""
    n = err.numbers
    which = n.get("which")
    f = _fraction(launch, err)
    P, W = measured(launch)
    if which == "weights" and isinstance(n.get("suggested"), (int, float)):
        new = _up(float(n["suggested"]) + 0.005)
        return _fraction_option(
            f,
            new,
            f"the engine's own bound: the weights need --mem-fraction-static above {n['suggested']}",
        )
    if which not in ("mamba_state", "kv_pool_empty") or not isinstance(f, (int, float)) or not P:
        return None
    rest = n.get("rest_gib")
    budget = P * f - W if W is not None else None
    if rest is None:
        rest = budget
    if rest is None or rest >= 0:
        return None  # the budget is positive: how the state took it needs the replay
    per_req = float(n.get("per_req_mib") or 0) / 1024
    state_room = 2 * per_req  # one request's state and the pool's padding slot
    args = launch.args
    draft, running = args.get("speculative_num_draft_tokens"), args.get("max_running_requests")
    if budget is not None and budget > 0 and per_req and draft and running:
        # the weights fit; the speculative state (per request x (running + 1) x draft tokens)
        # took the budget: fewer running requests give each one back
        fewer = math.ceil((-rest + state_room) / (per_req * draft))
        if running - fewer >= 1:
            return FixOption(
                changes=[
                    FixChange(
                        arg="max_running_requests",
                        flag="--max-running-requests",
                        old=running,
                        new=running - fewer,
                    )
                ],
                why=(
                    f"from the log: --mem-fraction-static {f} leaves {budget:.2f} GiB after the "
                    f"weights ({P:.2f} GiB free x {f} - {W:.2f} GiB), and the speculative state "
                    f"of {running} requests x {draft} draft tokens x {per_req * 1024:.2f} MB takes "
                    f"it to {rest:.2f} GiB; each request fewer gives back "
                    f"{per_req * draft:.2f} GiB"
                ),
            )
    new = _up(f + (-rest + state_room) / P)
    covered = f"--mem-fraction-static {f} leaves {rest:.2f} GiB for the state and KV pools after the weights"
    if new <= MAX_FRACTION:
        return _fraction_option(
            f,
            new,
            f"from the log: {covered}: the static fraction does not even cover them; of "
            f"{P:.2f} GiB free before the weights each +0.01 adds {P / 100:.2f} GiB, so {new} "
            f"brings it back above zero with room for one request's state ({per_req * 1024:.2f} MB) "
            "and its padding slot",
        )
    tp = args.get("tp_size") or 1
    return FixOption(
        changes=[FixChange(arg="tp_size", flag="--tp-size", old=tp, new=2 * tp)],
        why=(
            f"from the log: {covered}; covering it would take --mem-fraction-static {new}, which "
            f"leaves nothing for activations and CUDA graphs: the weights per GPU must shrink "
            f"(twice the GPUs halve them, or a quantized checkpoint)"
        ),
    )


def _fraction_option(old: object, new: float, why: str) -> FixOption:
    return FixOption(
        changes=[
            FixChange(arg="mem_fraction_static", flag="--mem-fraction-static", old=old, new=new)
        ],
        why=why,
    )


# ---------------------------------------------------------------------------------------------
# Findings on any launch that got far enough
# ---------------------------------------------------------------------------------------------


def success_findings(launch: LaunchFacts, rep: Replay | None, log: LogFacts) -> list[Finding]:
    out: list[Finding] = []
    out += _changes(launch)
    out += _caps(launch, rep)
    out += _stranded(launch, rep)
    out += _unused_ratio(launch, rep)
    out += _parsers(launch)
    out += _acceptance(launch)
    out += _after_first_request(launch, log)
    t = launch.traffic
    if t.http_errors:
        out.append(
            Finding(
                code="http_errors",
                severity="warning",
                title=f"{t.http_errors} of {t.http_requests} requests answered with an HTTP error",
                detail="see the access lines in the log for the status codes",
            )
        )
    return out


def _changes(launch: LaunchFacts) -> list[Finding]:
    out = []
    for c in launch.changes:
        if c.arg == "disable_radix_cache" and "speculative" in c.why:
            out.append(
                Finding(
                    code="radix_cache_disabled",
                    severity="warning",
                    at=c.at,
                    title="prefix (radix) cache disabled by speculative decoding",
                    detail="SGLang turned the radix cache off for speculative decoding on a mamba "
                    "model (no_buffer strategy): every request re-computes its whole prompt; repeated "
                    "system prompts and multi-turn chats get no cache hits",
                )
            )
        elif c.arg == "max_running_requests" and "speculative" in c.why:
            out.append(
                Finding(
                    code="max_running_requests_reset",
                    severity="warning",
                    at=c.at,
                    title=f"--max-running-requests set to {c.new} by the engine",
                    detail="speculative decoding resets it when you do not pass it; on hybrid models "
                    "each running request reserves state for every draft token, so this value sizes "
                    "memory, not only concurrency. Pass --max-running-requests explicitly",
                )
            )
        elif c.arg == "enable_prefix_caching" and c.new is False:
            out.append(
                Finding(
                    code="prefix_caching_disabled",
                    severity="info",
                    at=c.at,
                    title="prefix caching disabled for this hybrid model",
                    detail=c.why,
                )
            )
        elif c.arg == "gpu_memory_utilization":
            out.append(
                Finding(
                    code="cudagraph_profiling",
                    severity="info",
                    at=c.at,
                    title=f"--gpu-memory-utilization {c.old} acts like {c.new}",
                    detail="vLLM subtracts the estimated CUDA-graph memory from the KV budget (default "
                    "since 0.21)",
                )
            )
    return out


def _caps(launch: LaunchFacts, rep: Replay | None) -> list[Finding]:
    out = []
    for c in launch.changes:
        if c.arg == "max_running_requests" and "capped" in c.why:
            out.append(
                Finding(
                    code="silent_cap",
                    severity="warning",
                    at=c.at,
                    title=f"concurrency capped at {c.new} running requests",
                    detail=f"{c.why}; requests beyond it wait in the queue",
                    numbers={"max_running_requests": c.new},
                )
            )
    if out:
        return out
    asked = launch.args.get("max_running_requests")
    got = launch.pools.max_running_requests
    if isinstance(asked, int) and got is not None and got < asked:
        why = "the KV pool"
        if rep is not None and rep.max_mamba_cache_size is not None and rep.mamba_slots_per_request:
            why = (
                f"the mamba state cache ({rep.max_mamba_cache_size} slots // "
                f"{rep.mamba_slots_per_request} per request)"
            )
        out.append(
            Finding(
                code="silent_cap",
                severity="warning",
                title=f"concurrency capped at {got} running requests (asked {asked})",
                detail=f"capped by {why}; this SGLang release does not log this cap",
                numbers={"asked": asked, "max_running_requests": got},
            )
        )
    return out


def _stranded(launch: LaunchFacts, rep: Replay | None) -> list[Finding]:
    p = launch.pools
    out = []
    mrr = p.max_running_requests or launch.args.get("max_running_requests")
    ctx = p.context_len or launch.args.get("context_length")
    if p.kv_tokens and p.kv_size_gib and isinstance(mrr, int) and isinstance(ctx, int) and mrr > 0:
        usable = mrr * ctx
        if p.kv_tokens > 1.5 * usable:
            per_tok = p.kv_size_gib / p.kv_tokens
            idle = (p.kv_tokens - usable) * per_tok
            if idle >= 1.0:
                out.append(
                    Finding(
                        code="stranded_kv",
                        severity="warning",
                        title=f"{idle:.1f} GiB of KV cache can never be used",
                        detail=(
                            f"{mrr} running requests x {ctx:,} tokens = {usable:,} tokens at most, the KV pool holds "
                            f"{p.kv_tokens:,}: the state pool runs out long before the KV pool. Raise "
                            "--max-running-requests (if the state pool allows) or give the KV less"
                        ),
                        numbers={
                            "kv_tokens": p.kv_tokens,
                            "usable_tokens": usable,
                            "idle_gib": round(idle, 2),
                        },
                    )
                )
    K = p.max_mamba_cache_size
    ratio = rep.mamba_slots_per_request if rep else None
    if (
        K
        and ratio
        and isinstance(mrr, int)
        and p.conv_state_gib is not None
        and p.ssm_state_gib is not None
    ):
        extra = K - mrr * ratio
        per_slot = (p.conv_state_gib + p.ssm_state_gib) / (K + 1)
        if extra > 0 and extra * per_slot >= 1.0:
            out.append(
                Finding(
                    code="stranded_state",
                    severity="warning",
                    title=f"{extra * per_slot:.1f} GiB of state slots can never be used",
                    detail=(
                        f"{K} state slots, {mrr} running requests x {ratio} slots each = {mrr * ratio}: "
                        f"{extra} slots idle. Lower --mamba-full-memory-ratio or raise --max-running-requests"
                    ),
                    numbers={"idle_slots": extra, "idle_gib": round(extra * per_slot, 2)},
                )
            )
    tokens = p.kv_tokens or p.max_total_num_tokens
    if tokens and isinstance(ctx, int) and tokens < ctx and launch.outcome != "failed":
        out.append(
            Finding(
                code="kv_short_of_context",
                severity="warning",
                title="one full-length request does not fit in the KV cache",
                detail=f"KV pool {tokens:,} tokens < context length {ctx:,}",
            )
        )
    if p.max_concurrency is not None and p.max_concurrency < 1 and launch.outcome != "failed":
        out.append(
            Finding(
                code="kv_short_of_context",
                severity="warning",
                title="one full-length request does not fit in the KV cache",
                detail=f"maximum concurrency {p.max_concurrency}x at {p.concurrency_len:,} tokens",
            )
        )
    return out


def _unused_ratio(launch: LaunchFacts, rep: Replay | None) -> list[Finding]:
    ratio = launch.args.get("mamba_full_memory_ratio")
    if (
        rep is None
        or not isinstance(ratio, (int, float))
        or not rep.mamba_sizing
        or rep.mamba_sizing.startswith("mamba_full")
    ):
        return []
    if abs(ratio - 0.9) < 1e-9:  # the default: nothing to say
        return []
    return [
        Finding(
            code="flag_without_effect",
            severity="info",
            title=f"--mamba-full-memory-ratio {ratio} has no effect on this launch",
            detail=f"the state pool is sized by {rep.mamba_sizing}; the ratio is read only when it is "
            "sized from the memory budget (handle_max_mamba_cache)",
        )
    ]


def _parsers(launch: LaunchFacts) -> list[Finding]:
    arch = launch.architecture
    if not arch:
        return []
    out = []
    for archs, table in PARSERS.items():
        if arch not in archs:
            continue
        for what, arg in (("tool", "tool_call_parser"), ("reasoning", "reasoning_parser")):
            val = launch.args.get(arg)
            expected, wrong = table[what]
            if isinstance(val, str) and val in wrong:
                out.append(
                    Finding(
                        code="parser_mismatch",
                        severity="warning",
                        title=f"--{arg.replace('_', '-')} {val} does not match {arch}",
                        detail=(
                            f"{arch} checkpoints (Qwen3.5/3.6) write {what} calls the "
                            f"{'/'.join(sorted(expected))} parser reads; with {val!r} they arrive as plain text"
                        ),
                        numbers={"given": val, "expected": sorted(expected)},
                    )
                )
    return out


def _draft_tokens(launch: LaunchFacts) -> int | None:
    a = launch.args
    d = a.get("speculative_num_draft_tokens")
    if isinstance(d, int):
        return d
    cfg = a.get("speculative_config")
    if isinstance(cfg, dict) and isinstance(cfg.get("num_speculative_tokens"), int):
        return (
            cfg["num_speculative_tokens"] + 1
        )  # vLLM's mean acceptance length counts the bonus token
    return None


def _acceptance(launch: LaunchFacts) -> list[Finding]:
    s, out = launch.spec, []
    t = launch.traffic
    if t.repeated_outputs:
        out.append(
            Finding(
                code="repeated_output",
                severity="error",
                title=f"{t.repeated_outputs} of {t.outputs_logged} logged outputs repeat themselves",
                detail=f"the output loops on {t.repeated_unit!r}",
            )
        )
    if s.samples < 3 or s.accept_len_mean is None:
        return out
    D = _draft_tokens(launch)
    if s.accept_len_mean <= 1.1:
        out.append(
            Finding(
                code="mtp_not_accepting",
                severity="warning",
                title=f"speculative drafts are almost never accepted (mean accept length {s.accept_len_mean:.2f})",
                detail=(
                    "every step keeps only the target's own token: the draft (MTP) weights are most likely not "
                    "loaded or not trained for this checkpoint (a quantized export without the MTP layers). "
                    "Speculative decoding costs memory and time here for nothing"
                ),
                numbers={"accept_len_mean": s.accept_len_mean, "samples": s.samples},
            )
        )
    near_max = (s.accept_rate_mean is not None and s.accept_rate_mean >= 0.95) or (
        D is not None and s.accept_len_mean >= 0.95 * D
    )
    if near_max:
        evidence = " and logged outputs repeat themselves" if t.repeated_outputs else ""
        out.append(
            Finding(
                code="mtp_suspicious_acceptance",
                severity="error" if t.repeated_outputs else "warning",
                title=f"speculative drafts accepted almost always (mean accept length {s.accept_len_mean:.2f}"
                + (f" of {D}" if D else "")
                + (f", rate {s.accept_rate_mean:.2f})" if s.accept_rate_mean is not None else ")"),
                detail=(
                    "real text is never this predictable: the model is most likely repeating itself "
                    f"(a loop such as `thinking\\n\\nthinking\\n\\n`){evidence}. Check an answer; usual causes: a chat "
                    "template or reasoning parser that does not match the model, or sampling settings"
                ),
                numbers={
                    "accept_len_mean": s.accept_len_mean,
                    "accept_rate_mean": s.accept_rate_mean,
                    "samples": s.samples,
                },
            )
        )
    return out


def _after_first_request(launch: LaunchFacts, log: LogFacts) -> list[Finding]:
    if not launch.ready:
        return []
    t = launch.traffic
    requests = max(t.http_requests, t.new_sequences, 1 if t.decode_logs else 0)
    if requests != 1:
        return []
    is_last = bool(log.launches) and log.launches[-1].index == launch.index
    if launch.exit is not None and exit_cause(launch).kind == "stopped":
        return []  # stopped from outside (SIGTERM) after one request: nothing went wrong
    if launch.exit is not None:
        return [
            Finding(
                code="exited_after_first_request",
                severity="error",
                at=launch.exit,
                title="the server exited after its first request",
                detail=f"the only request was followed by: {launch.exit.text}",
            )
        ]
    if launch.outcome == "ready" and is_last and launch.last_event in _SERVING:
        return [
            Finding(
                code="stopped_after_first_request",
                severity="warning",
                title="the log ends during / right after the first request",
                detail=(
                    f"nothing after line {launch.last_line}: no shutdown message, no error. If the server is gone, "
                    "it was killed from outside without a word (SIGKILL: the OOM killer, `kill -9`, or "
                    "`pkill -f python3` run for another job); SGLang prints 'SIGTERM received' or a traceback "
                    "when it stops on its own"
                ),
            )
        ]
    return []
