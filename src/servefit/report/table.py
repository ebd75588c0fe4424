"""Terminal rendering of a Plan with rich."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from servefit.plan.schema import Plan

KEY_ARGS = (
    "mem_fraction_static",
    "max_running_requests",
    "context_len",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "page_size",
    "kv_cache_dtype",
    "disable_radix_cache",
    "disable_overlap_schedule",
    "mamba_scheduler_strategy",
    "mamba_radix_cache_strategy",
    "mamba_full_memory_ratio",
    "max_mamba_cache_size",
    "mamba_ssm_dtype",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)


# vLLM's own names for the same knobs (resolved_args of a vllm profile).
VLLM_KEY_ARGS = (
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "kv_cache_dtype",
    "block_size",
    "enable_prefix_caching",
    "mamba_cache_mode",
    "mamba_block_size",
    "mamba_cache_dtype",
    "mamba_ssm_cache_dtype",
    "num_speculative_tokens",
    "cudagraph_mode",
    "enforce_eager",
)


def _is_vllm(plan: Plan) -> bool:
    return plan.engine.name == "vllm"


def _gib(x: float) -> str:
    return f"{x:,.2f}"


def memory_table(plan: Plan) -> Table:
    r = plan.per_rank
    title = "Memory per GPU rank (GiB)"
    if plan.verdict == "fail":
        title += ": what the engine had reserved when it gave up"
    t = Table(title=title, title_justify="left", show_edge=False)
    t.add_column("consumer")
    t.add_column("GiB", justify="right")
    t.add_column("% of GPU", justify="right")
    rows = [
        ("weights", r.weights_gib),
        ("KV cache", r.kv_cache_gib),
        ("mamba/linear state", r.mamba_state_gib),
        ("speculative state", r.spec_state_gib),
        ("draft weights", r.draft_weights_gib),
        ("draft KV cache", r.draft_kv_gib),
        ("req_to_token", r.req_to_token_gib),
    ]
    for name, val in rows:
        if val or name in ("weights", "KV cache"):
            t.add_row(name, _gib(val), f"{100 * val / r.total_gib:.1f}")
    t.add_row(
        "profiling peak + non-torch + CUDA-graph estimate"
        if _is_vllm(plan)
        else "reserved (1 - mem_fraction_static)",
        _gib(r.reserved_gib),
        f"{100 * r.reserved_gib / r.total_gib:.1f}",
        style="dim",
    )
    t.add_row(
        "not available before load (CUDA/NCCL)",
        _gib(r.total_gib - r.pre_load_free_gib),
        f"{100 * (r.total_gib - r.pre_load_free_gib) / r.total_gib:.1f}",
        style="dim",
    )
    style = "red" if r.free_gib < 0 else ("yellow" if r.free_gib < 1 else "green")
    t.add_row(
        "free after pools (graphs, activations)",
        _gib(r.free_gib),
        f"{100 * r.free_gib / r.total_gib:.1f}",
        style=style,
    )
    return t


def vllm_pools_table(plan: Plan) -> Table:
    """vLLM's one shared block pool: blocks, what a request takes, the concurrency it logs."""
    p = plan.pools
    t = Table(
        title="KV cache pool (per rank)", title_justify="left", show_header=False, show_edge=False
    )
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("Available KV cache memory", f"{p.budget_gib:,.2f} GiB")
    t.add_row("attention block size (tokens)", f"{p.block_size:,}" if p.block_size else "-")
    t.add_row("KV bytes per token (attention layers)", f"{p.kv_bytes_per_token:,}")
    t.add_row(
        "blocks in the pool (num_blocks)", f"{p.num_blocks:,}" if p.num_blocks is not None else "-"
    )
    if p.mamba_layers:
        t.add_row(
            "Mamba cache blocks (checked against max_num_seqs)",
            f"{p.mamba_blocks:,}" if p.mamba_blocks is not None else "-",
        )
        t.add_row(
            "state bytes per request",
            f"{p.mamba_state_bytes_per_request:,} ({p.mamba_layers} layers)",
        )
        t.add_row("Mamba blocks per request and group", str(p.mamba_slots_per_request))
        t.add_row("Mamba cache", p.mamba_sizing or "")
    t.add_row(
        f"Maximum concurrency for {p.context_len:,} tokens per request",
        f"{p.max_concurrency:.2f}x" if p.max_concurrency is not None else "-",
    )
    t.add_row("GPU KV cache size (as logged)", f"{p.max_total_num_tokens:,} tokens")
    t.add_row("max_num_seqs", Text(str(p.effective_max_running_requests), style="bold"))
    return t


def pools_table(plan: Plan) -> Table:
    if _is_vllm(plan):
        return vllm_pools_table(plan)
    p = plan.pools
    t = Table(title="Pools (per rank)", title_justify="left", show_header=False, show_edge=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("budget for state + KV", f"{p.budget_gib:,.2f} GiB")
    t.add_row(
        "left for the KV pool after the state",
        Text(f"{p.kv_budget_gib:,.2f} GiB", style="red" if p.kv_budget_gib <= 0 else ""),
    )
    t.add_row("KV bytes per token", f"{p.kv_bytes_per_token:,}")
    t.add_row("KV tokens (max_total_num_tokens)", f"{p.max_total_num_tokens:,}")
    t.add_row(
        "full-context requests the KV holds",
        f"{p.max_concurrency_at_context:,.2f} x {p.context_len:,}",
    )
    if p.mamba_layers:
        t.add_row(
            "state bytes per request",
            f"{p.mamba_state_bytes_per_request:,} ({p.mamba_layers} layers)",
        )
        t.add_row("state slots (max_mamba_cache_size)", f"{p.max_mamba_cache_size:,}")
        t.add_row("state slots per running request", str(p.mamba_slots_per_request))
        t.add_row("state pool sized by", p.mamba_sizing or "")
    t.add_row(
        "effective max running requests", Text(str(p.effective_max_running_requests), style="bold")
    )
    t.add_row("capped by", p.cap_reason)
    return t


def args_table(plan: Plan) -> Table:
    t = Table(title="Resolved server args", title_justify="left", show_edge=False)
    t.add_column("arg")
    t.add_column("value")
    t.add_column("changed by the engine", overflow="fold")
    changes = {c.arg: c for c in plan.changes}
    for key in VLLM_KEY_ARGS if _is_vllm(plan) else KEY_ARGS:
        if key not in plan.resolved_args:
            continue
        val = plan.resolved_args[key]
        ch = changes.get(key)
        note = f"{ch.old!r} -> {ch.new!r}: {ch.reason}" if ch else ""
        t.add_row(key, repr(val) if isinstance(val, str) else str(val), note)
    return t


def render_plan(plan: Plan, console: Console | None = None) -> None:
    console = console or Console()
    hw = plan.hardware
    quant = plan.model.dtype if plan.model.quantization == "none" else plan.model.quantization
    head = (
        f"[bold]{plan.model.name}[/] ({plan.model.architecture}, {quant}) on "
        f"{hw.num_gpus}x {hw.gpu} ({hw.memory_mib:,} MiB), TP {hw.tp_size} PP {hw.pp_size} DP {hw.dp_size} - "
        f"{plan.engine.name} {plan.engine.profile}"
        + (" - calibrated from a log" if plan.calibrated else "")
    )
    console.print(head)
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    console.print(memory_table(plan))
    console.print(pools_table(plan))
    console.print(args_table(plan))
    if plan.log_lines:
        console.print(
            Panel(
                Text("\n".join(plan.log_lines)),
                title="What the engine will log",
                title_align="left",
                border_style="dim",
            )
        )
    if plan.verdict == "ok":
        console.print(Panel(Text(_starts_line(plan), style="bold green"), border_style="green"))
    else:
        msg = Text(f"FAILS: {plan.error}", style="bold red")
        if plan.error_consumer:
            msg.append(f"\ncause: {plan.error_consumer}", style="red")
        if plan.error_detail:
            msg.append(f" - {plan.error_detail}", style="red")
        console.print(Panel(msg, border_style="red"))


def _starts_line(plan: Plan) -> str:
    p = plan.pools
    if _is_vllm(plan):
        return (
            f"STARTS: {p.num_blocks:,} KV blocks of {p.block_size:,} tokens, "
            f"{p.max_concurrency or 0:.2f}x concurrency at {p.context_len:,} tokens, "
            f"max_num_seqs {p.effective_max_running_requests}."
        )
    return (
        f"STARTS: {p.max_total_num_tokens:,} KV tokens, up to "
        f"{p.effective_max_running_requests} running requests ({p.cap_reason})."
    )


def compare_table(a: Plan, b: Plan) -> Table:
    """Two plans of the same model and GPUs on different engines, side by side."""
    t = Table(title="Side by side (per GPU rank)", title_justify="left", show_edge=False)
    t.add_column("")
    for p in (a, b):
        t.add_column(f"{p.engine.name} {p.engine.profile}", justify="right")

    def row(label: str, fn) -> None:
        t.add_row(label, *(fn(p) for p in (a, b)))

    def ctx(p: Plan) -> str:
        return f"{p.pools.context_len:,}"

    row("verdict", lambda p: "starts" if p.verdict == "ok" else "fails")
    row("weights (GiB)", lambda p: _gib(p.per_rank.weights_gib + p.per_rank.draft_weights_gib))
    row("KV + state budget (GiB)", lambda p: _gib(p.pools.budget_gib))
    row("KV cache (GiB)", lambda p: _gib(p.per_rank.kv_cache_gib))
    row(
        "Mamba / linear state (GiB)",
        lambda p: _gib(p.per_rank.mamba_state_gib + p.per_rank.spec_state_gib),
    )
    row("context length", ctx)
    row(
        "full-context requests that fit",
        lambda p: (
            f"{(p.pools.max_concurrency if p.pools.max_concurrency is not None else p.pools.max_concurrency_at_context):.2f}"
        ),
    )
    row("KV tokens (as the engine logs them)", lambda p: f"{p.pools.max_total_num_tokens:,}")
    row("running-request cap", lambda p: str(p.pools.effective_max_running_requests))
    row("error", lambda p: (p.error or "")[:60])
    return t


def render_compare(a: Plan, b: Plan, console: Console | None = None) -> None:
    console = console or Console()
    render_plan(a, console)
    console.print()
    render_plan(b, console)
    console.print()
    console.print(compare_table(a, b))
