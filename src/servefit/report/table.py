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
        "reserved (1 - mem_fraction_static)",
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


def pools_table(plan: Plan) -> Table:
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
    for key in KEY_ARGS:
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
        p = plan.pools
        console.print(
            Panel(
                Text(
                    f"STARTS: {p.max_total_num_tokens:,} KV tokens, up to "
                    f"{p.effective_max_running_requests} running requests ({p.cap_reason}).",
                    style="bold green",
                ),
                border_style="green",
            )
        )
    else:
        msg = Text(f"FAILS: {plan.error}", style="bold red")
        if plan.error_consumer:
            msg.append(f"\ncause: {plan.error_consumer}", style="red")
        if plan.error_detail:
            msg.append(f" - {plan.error_detail}", style="red")
        console.print(Panel(msg, border_style="red"))
