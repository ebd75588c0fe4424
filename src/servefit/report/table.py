"""Terminal rendering of a Plan: the verdict first, then memory, pools, args, the engine's
lines, and the verdict again at the end (where a terminal leaves the eye)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.text import Text

from servefit._explain.schema import Fix
from servefit._plan.schema import EngineRef, Plan
from servefit.report.console import make_console
from servefit.report.fixes import command_block, fix_block, with_fix
from servefit.report.grid import Cell, Col, Grid, Para
from servefit.report.verdict import (
    STYLE,
    WORDS,
    Verdict,
    first_sentence,
    floor_for,
    of_plan,
    requests,
)

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


def gib(x: float) -> str:
    return f"{x:,.2f}"


def num(x: object) -> str:
    """A resolved value as a user would type it: 0.7721792968749999 -> 0.7722."""
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:,.0f}"
    return "-" if x is None else str(x)


def _was(x: object) -> str:
    return "unset" if x is None else num(x)


def memory_rows(plan: Plan) -> list[tuple[str, float]]:
    """The rows that partition one rank's GPU memory: what the engine allocated, what was in
    use before it loaded anything, and what is left free. They add up to the GPU's total."""
    r = plan.per_rank
    rows = [
        ("weights", r.weights_gib),
        ("KV cache", r.kv_cache_gib),
        ("mamba/linear state", r.mamba_state_gib),
        ("speculative state", r.spec_state_gib),
        ("draft weights", r.draft_weights_gib),
        ("draft KV cache", r.draft_kv_gib),
        ("req_to_token", r.req_to_token_gib),
        ("memory outside torch (NCCL, cuBLAS)", r.non_torch_gib),
        ("CUDA graphs", r.graphs_gib),
    ]
    out = [(name, val) for name, val in rows if val or name in ("weights", "KV cache")]
    before = (
        "in use on the node before start (other processes)"
        if plan.hardware.cpu_node is not None
        else "not available before load (CUDA/NCCL)"
    )
    out.append((before, r.total_gib - r.pre_load_free_gib))
    out.append(("free after pools (graphs, activations)" if not _is_vllm(plan)
                else "free after pools (activations)", r.free_gib))  # fmt: skip
    return out


def within_free(plan: Plan) -> tuple[str, float] | None:
    """vLLM's profiled activation peak: inside its budget, but transient, so at rest its memory
    is part of the free row; shown under it and not counted again."""
    r = plan.per_rank
    if not _is_vllm(plan) or not 0 < r.activation_gib <= r.free_gib:
        return None
    return "(within the free) the activation peak vLLM profiled, transient", r.activation_gib


def memory_table(plan: Plan, floor_gib: float) -> Grid:
    r = plan.per_rank
    title = "Memory per GPU rank (GiB)"
    if plan.verdict == "fail":
        title += ": what the engine had reserved when it gave up"
    t = Grid(
        [Col("consumer", wrap=True), Col("GiB", right=True), Col("% of GPU", right=True)], title
    )

    def pct(v: float) -> str:
        return f"{100 * v / r.total_gib:.1f}"

    *used, (free_name, free) = memory_rows(plan)
    for name, val in used:
        dim = name.startswith(("not available", "in use on the node"))
        t.add(name, gib(val), pct(val), style="dim" if dim else "")
    ok = plan.verdict == "ok"
    style = "red" if free < 0 else ("yellow" if free < floor_gib or not ok else "")
    t.add(free_name, gib(free), pct(free), style=style)
    inner = within_free(plan)
    if inner is not None:
        t.add(inner[0], gib(inner[1]), "", style="dim")
    return t


def _pool_grid(title: str) -> Grid:
    return Grid([Col("what", wrap=True), Col("value", wrap=True)], title)


def vllm_pools_table(plan: Plan) -> Grid:
    """vLLM's one shared block pool: blocks, what a request takes, the concurrency it logs."""
    p = plan.pools
    t = _pool_grid("KV cache pool (per rank)")
    t.add("Available KV cache memory", f"{p.budget_gib:,.2f} GiB")
    t.add("attention block size (tokens)", f"{p.block_size:,}" if p.block_size else "-")
    t.add("KV bytes per token (attention layers)", f"{p.kv_bytes_per_token:,}")
    t.add(
        "blocks in the pool (num_blocks)", f"{p.num_blocks:,}" if p.num_blocks is not None else "-"
    )
    if p.mamba_layers:
        t.add(
            "Mamba cache blocks (checked against max_num_seqs)",
            f"{p.mamba_blocks:,}" if p.mamba_blocks is not None else "-",
        )
        t.add(
            "state bytes per request",
            f"{p.mamba_state_bytes_per_request:,} ({p.mamba_layers} layers)",
        )
        t.add("Mamba blocks per request and group", str(p.mamba_slots_per_request))
        t.add("Mamba cache", p.mamba_sizing or "")
    t.add(
        f"Maximum concurrency for {p.context_len:,} tokens per request",
        f"{p.max_concurrency:.2f}x" if p.max_concurrency is not None else "-",
    )
    t.add("GPU KV cache size (as logged)", f"{p.max_total_num_tokens:,} tokens")
    t.add("max_num_seqs", Cell(str(p.effective_max_running_requests), "bold"))
    return t


def pools_table(plan: Plan) -> Grid:
    if _is_vllm(plan):
        return vllm_pools_table(plan)
    p = plan.pools
    t = _pool_grid("Pools (per rank)")
    if plan.per_rank.reserved_gib:
        # SGLang's budget arithmetic, not an allocation: the memory table's free row holds it
        t.add(
            "reserve (1 - mem_fraction_static)",
            f"{plan.per_rank.reserved_gib:,.2f} GiB",
        )
    t.add("budget for state + KV", f"{p.budget_gib:,.2f} GiB")
    t.add(
        "left for the KV pool after the state",
        Cell(f"{p.kv_budget_gib:,.2f} GiB", "red" if p.kv_budget_gib <= 0 else ""),
    )
    t.add("KV bytes per token", f"{p.kv_bytes_per_token:,}")
    t.add("KV tokens (max_total_num_tokens)", f"{p.max_total_num_tokens:,}")
    full = p.max_concurrency_at_context
    t.add(
        "full-context requests the KV holds",
        Cell(f"{requests(full)} x {p.context_len:,}", "yellow" if full < 1 else ""),
    )
    if p.mamba_layers:
        t.add(
            "state bytes per request",
            f"{p.mamba_state_bytes_per_request:,} ({p.mamba_layers} layers)",
        )
        t.add("state slots (max_mamba_cache_size)", f"{p.max_mamba_cache_size:,}")
        t.add("state slots per running request", str(p.mamba_slots_per_request))
        t.add("state pool sized by", p.mamba_sizing or "")
    t.add("effective max running requests", Cell(str(p.effective_max_running_requests), "bold"))
    t.add("capped by", p.cap_reason)
    return t


def args_table(plan: Plan) -> Grid:
    t = Grid(
        [Col("arg"), Col("value"), Col("changed by the engine", wrap=True, under=True)],
        "Resolved server args",
    )
    changes = {c.arg: c for c in plan.changes}
    for key in VLLM_KEY_ARGS if _is_vllm(plan) else KEY_ARGS:
        if key not in plan.resolved_args:
            continue
        ch = changes.get(key)
        note = f"{_was(ch.old)} -> {num(ch.new)}: {ch.reason}" if ch else ""
        t.add(key, num(plan.resolved_args[key]), note)
    return t


def engine_words(ref: EngineRef) -> str:
    """ "vllm 0.16.0 (sized as 0.15.0)": the release the plan is for, and the profile whose
    rules sized it when a group of releases shares one (engines/registry.py:RELEASES)."""
    shared = f" (sized as {ref.profile})" if ref.profile != ref.version else ""
    return f"{ref.name} {ref.version}{shared}"


def header(plan: Plan) -> str:
    hw = plan.hardware
    quant = plan.model.dtype if plan.model.quantization == "none" else plan.model.quantization
    par = f"TP {hw.tp_size}" + (f" PP {hw.pp_size}" if hw.pp_size > 1 else "")
    par += f" DP {hw.dp_size}" if hw.dp_size > 1 else ""
    node = hw.cpu_node
    memory = (
        f"NUMA node {node.node}: {node.total_bytes / 2**30:.2f} GiB"
        if node is not None
        else f"{hw.memory_mib:,} MiB"
    )
    return (
        f"{plan.model.name} ({plan.model.architecture}, {quant}) on {hw.num_gpus}x {hw.gpu} "
        f"({memory}), {par}, {engine_words(plan.engine)}"
        + (", calibrated from a log" if plan.calibrated else "")
    )


def marginal_line(plan: Plan) -> Para | None:
    """The first line of a plan whose verdict flips inside its band (_plan/band.py)."""
    b = plan.band
    if b is None or not b.marginal:
        return None
    if plan.verdict == "ok":
        why = first_sentence(b.error_low or "it fails")
        text = (
            f"starts as modelled, but fails with {b.kv_budget_gib:.2f} GiB less per GPU ({why}), "
            "within the uncertainty of what the engine measures at start-up"
        )
    else:
        text = (
            f"fails as modelled, but starts with {b.kv_budget_gib:.2f} GiB more per GPU, within "
            "the uncertainty of what the engine measures at start-up"
        )
    return Para(
        text + "; one start and `servefit doctor` on its log settle it",
        prefix="MARGINAL: ",
        prefix_style="bold yellow",
    )


def band_line(plan: Plan) -> Para | None:
    """The KV tokens at the band's edges; nothing for a failure that fails at both."""
    b = plan.band
    if b is None or (plan.verdict == "fail" and not b.marginal):
        return None
    low = f"{b.kv_tokens_low:,}" if b.verdict_low == "ok" else "none (it fails)"
    high = f"{b.kv_tokens_high:,}" if b.verdict_high == "ok" else "none (it fails)"
    return Para(
        f"KV tokens {low} to {high} (±{b.kv_budget_gib:.2f} GiB per "
        f"GPU: {'; '.join(b.terms)})",
        prefix="uncertain: ",
        prefix_style="dim",
        style="dim",
    )


def calibration_line(plan: Plan) -> Para | None:
    """Where the plan's measured terms came from, when a stored calibration gave them."""
    c = plan.calibration
    if c is None:
        return None
    text = f"{c.source}, {c.recorded[:10]} (entry {c.id}): {'; '.join(c.terms)}"
    if c.differs:
        text += f". Modelled, not measured: {'; '.join(c.differs)}"
    return Para(text, prefix="calibrated from ", prefix_style="cyan")


def engine_lines(plan: Plan) -> Group:
    return Group(
        Text("What the engine will log:", style="bold"),
        *(Para(line, prefix="  ", indent=4) for line in plan.log_lines),
    )


def render_plan(
    plan: Plan,
    console: Console | None = None,
    verdict: Verdict | None = None,
    fix: Fix | None = None,
    model: str | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """The verdict (with the fix) first, the tables, the engine's lines, and the verdict again
    with the fixed command: a FAILS always ends with what makes it start."""
    console = console or make_console()
    verdict = with_fix(verdict or of_plan(plan), fix, plan)
    marginal = marginal_line(plan)
    if marginal is not None:
        console.print(marginal)
    console.print(verdict.text())
    for line in (calibration_line(plan), band_line(plan)):
        if line is not None:
            console.print(line)
    console.print(Para(header(plan)))
    for w in plan.warnings:
        console.print(Para(w, prefix="warning: ", prefix_style="yellow"))
    floor = floor_for(plan.engine.name).gib
    for block in (memory_table(plan, floor), pools_table(plan), args_table(plan)):
        console.print()
        console.print(block)
    if plan.log_lines:
        console.print()
        console.print(engine_lines(plan))
    if fix is not None:
        console.print()
        for part in fix_block(fix, plan):
            console.print(part)
    console.print()
    console.print(verdict.text())
    if fix is not None:
        for part in command_block(fix, plan, model, env):
            console.print(part)


def compare_table(a: Plan, b: Plan) -> Grid:
    """Two plans of the same model and GPUs on different engines, side by side."""
    t = Grid(
        [
            Col("", wrap=True),
            *(Col(engine_words(p.engine), right=True, wrap=True) for p in (a, b)),
        ],
        "Side by side (per GPU rank)",
    )

    def row(label: str, fn) -> None:
        t.add(label, *(fn(p) for p in (a, b)))

    def full(p: Plan) -> float:
        mc = p.pools.max_concurrency
        return mc if mc is not None else p.pools.max_concurrency_at_context

    row("verdict", lambda p: WORDS[of_plan(p).status].lower())
    row("weights (GiB)", lambda p: gib(p.per_rank.weights_gib + p.per_rank.draft_weights_gib))
    row("KV + state budget (GiB)", lambda p: gib(p.pools.budget_gib))
    row("KV cache (GiB)", lambda p: gib(p.per_rank.kv_cache_gib))
    row(
        "Mamba / linear state (GiB)",
        lambda p: gib(p.per_rank.mamba_state_gib + p.per_rank.spec_state_gib),
    )
    row("context length", lambda p: f"{p.pools.context_len:,}")
    row("full-context requests that fit", lambda p: requests(full(p)))
    row("KV tokens (as the engine logs them)", lambda p: f"{p.pools.max_total_num_tokens:,}")
    row("running-request cap", lambda p: str(p.pools.effective_max_running_requests))
    return t


def render_compare(a: Plan, b: Plan, console: Console | None = None) -> None:
    console = console or make_console()
    render_plan(a, console)
    console.print()
    render_plan(b, console)
    console.print()
    console.print(compare_table(a, b))
    for p in (a, b):
        if p.error:
            console.print(Text(f"{engine_words(p.engine)} error: ", style="red") + Text(p.error))


def render_no_local_gpu(request, reason: str, fmt: str, console: Console | None = None) -> None:
    """`--gpu local` on a machine without a GPU: say so, and plan the launch on every catalog
    GPU instead, so the answer is where it would start."""
    import json
    from dataclasses import replace

    from servefit._plan.planner import plan
    from servefit.errors import ServefitError
    from servefit.hardware.catalog import entries

    note = (
        f"--gpu local: no GPU visible on this machine ({reason}); "
        "planned on each catalog GPU instead (name one with --gpu NAME)"
    )
    rows = []
    for e in entries():
        try:
            p = plan(replace(request, gpu=e.spec.key))
        except ServefitError as exc:
            rows.append({"gpu": e.spec.key, "name": e.spec.name, "error": str(exc)})
            continue
        v = of_plan(p)
        each = f", {p.pools.context_len:,} tokens each"
        rows.append(
            {
                "gpu": e.spec.key,
                "name": e.spec.name,
                "memory_mib": e.spec.memory_mib,
                "gpus": p.hardware.num_gpus,
                "context": p.pools.context_len,
                "verdict": v.status,
                "summary": v.headline.replace(each, "").replace(
                    "the engine stops at start-up: ", ""
                ),
            }
        )
    if fmt == "json":
        print(json.dumps({"note": note, "plans": rows}, indent=2))
        return
    console = console or make_console()
    console.print(Para(note, prefix="note: ", prefix_style="yellow"))
    ok = [r for r in rows if "context" in r]
    title = f"On {ok[0]['gpus']} GPU(s) of each kind, context {ok[0]['context']:,}" if ok else None
    t = Grid(
        [Col("--gpu"), Col("MiB", right=True), Col("verdict"), Col("", wrap=True, under=True)],
        title,
    )
    for r in rows:
        if "error" in r:
            t.add(r["gpu"], "-", "cannot plan", r["error"])
        else:
            t.add(
                r["gpu"],
                f"{r['memory_mib']:,}",
                Cell(WORDS[r["verdict"]].lower(), STYLE[r["verdict"]]),
                r["summary"],
            )
    console.print(t)
