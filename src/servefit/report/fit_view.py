"""Terminal rendering of a FitResult with rich."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from servefit.fit.schema import FitCandidate, FitResult


def _layout(c: FitCandidate) -> str:
    s = f"TP {c.tp_size} x PP {c.pp_size}"
    return s + (f" ({c.nodes} nodes)" if c.nodes > 1 else "")


def best_table(r: FitResult) -> Table:
    t = Table(
        title=f"Best {len(r.best)} (per family of layout x flags)",
        title_justify="left",
        show_edge=False,
    )
    for col, just in (
        ("#", "right"),
        ("layout", "left"),
        ("flags", "left"),
        ("KV tokens", "right"),
        ("running", "right"),
        (f"eff. conc. @ {r.context:,}", "right"),
        ("free GiB", "right"),
        ("stranded", "left"),
    ):
        t.add_column(col, justify=just, overflow="fold")
    for c in r.best:
        o = c.outcome
        stranded = []
        if c.stranded_state_slots:
            stranded.append(f"{c.stranded_state_slots} state slots")
        if c.stranded_kv_tokens:
            stranded.append(f"{c.stranded_kv_tokens:,} KV tokens")
        t.add_row(
            str(c.rank),
            _layout(c),
            " ".join(c.changed_flags) or "(engine defaults)",
            f"{o.kv_tokens:,}",
            str(o.max_running_requests),
            f"{o.effective_concurrency:g}",
            f"{o.free_gib:.2f}",
            ", ".join(stranded) or "none",
        )
    return t


def side_by_side(r: FitResult) -> Table:
    b, f = r.baseline, r.best[0]
    t = Table(title="Your launch vs servefit's best", title_justify="left", show_edge=False)
    t.add_column("")
    t.add_column("yours", justify="right")
    t.add_column("best", justify="right")
    bo, fo = b.outcome, f.outcome
    rows = (
        ("verdict", bo.verdict, fo.verdict),
        ("layout", _layout(b), _layout(f)),
        ("flags", " ".join(b.changed_flags), " ".join(f.changed_flags)),
        (
            "flags with no effect",
            " ".join(b.ineffective_flags) or "none",
            " ".join(f.ineffective_flags) or "none",
        ),
        ("KV tokens", f"{bo.kv_tokens:,}", f"{fo.kv_tokens:,}"),
        ("max running requests", str(bo.max_running_requests), str(fo.max_running_requests)),
        (
            f"effective concurrency @ {r.context:,}",
            f"{bo.effective_concurrency:g}",
            f"{fo.effective_concurrency:g}",
        ),
        ("headroom after pools (GiB)", f"{bo.free_gib:.2f}", f"{fo.free_gib:.2f}"),
        ("state pool slots", str(bo.state_slots or "-"), str(fo.state_slots or "-")),
        (
            "KV cache GiB",
            f"{bo.memory_gib.get('kv_cache', 0):.2f}",
            f"{fo.memory_gib.get('kv_cache', 0):.2f}",
        ),
        (
            "state + spec state GiB",
            f"{bo.memory_gib.get('mamba_state', 0) + bo.memory_gib.get('spec_state', 0):.2f}",
            f"{fo.memory_gib.get('mamba_state', 0) + fo.memory_gib.get('spec_state', 0):.2f}",
        ),
    )
    for name, x, y in rows:
        t.add_row(name, x, y)
    return t


def render_fit(r: FitResult, console: Console | None = None) -> None:
    console = console or Console()
    target = f", {r.concurrency} concurrent" if r.concurrency else ""
    console.print(
        f"[bold]{r.model}[/] on {r.nodes} x {r.gpus_per_node} {r.gpu} - {r.engine} "
        f"(profile {r.profile}), context {r.context:,}{target}, spec {r.spec}"
    )
    console.print(
        f"searched {r.candidates_evaluated:,} candidates in {r.elapsed_s:.2f} s "
        f"({r.candidates_per_s:,.0f}/s); {r.candidates_starting:,} start with >= "
        f"{r.min_free_gib:g} GiB headroom"
    )
    for n in r.layouts:
        if n.rejected:
            console.print(f"[dim]TP {n.tp_size} x PP {n.pp_size}: {n.rejected}[/]")
    if not r.best:
        console.print(Panel(Text(r.note or "nothing starts", style="bold red"), border_style="red"))
        return
    console.print(best_table(r))
    if r.baseline is not None:
        console.print(side_by_side(r))
        verdict = "at least as good as" if r.beats_baseline else "not better in every respect than"
        console.print(f"servefit's best is {verdict} yours (effective concurrency and KV tokens).")
    for c in r.best:
        for cmd in c.commands:
            title = f"#{c.rank} launch" + (f", node {cmd.node_rank}" if c.nodes > 1 else "")
            console.print(
                Panel(
                    Text(cmd.shell),
                    title=title,
                    title_align="left",
                    border_style="green" if c.rank == 1 else "dim",
                )
            )
