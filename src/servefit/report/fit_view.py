"""Terminal rendering of a FitResult: the verdict of the best launch first, the ranking, your
launch beside the best, then the commands as plain text (no borders: a mouse copy pastes)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from servefit._explain.catalogue import catalogue_for
from servefit._fit.schema import FitCandidate, FitResult
from servefit.report.console import make_console, plain
from servefit.report.grid import Col, Grid, Para
from servefit.report.verdict import Floor, Verdict, counted, of_outcome, requests


def _layout(c: FitCandidate) -> str:
    s = f"TP {c.tp_size} x PP {c.pp_size}"
    return s + (f" ({c.nodes} nodes)" if c.nodes > 1 else "")


def _flags(c: FitCandidate) -> str:
    return " ".join(c.changed_flags) or "(engine defaults)"


def candidate_verdict(r: FitResult, c: FitCandidate) -> Verdict:
    floor = Floor(r.min_free_gib, catalogue_for(r.engine.split("==")[0]).headroom_means)
    return of_outcome(c.outcome, r.concurrency, floor)


def fit_verdict(r: FitResult) -> Verdict:
    if not r.best:
        return Verdict(
            "fails",
            f"nothing of the {r.candidates_evaluated:,} launches tried starts with "
            f"{r.min_free_gib:g} GiB of headroom",
            (r.note,) if r.note else (),
        )
    b = r.best[0]
    v = candidate_verdict(r, b)
    return Verdict(v.status, f"#1 ({_layout(b)}; {_flags(b)}) runs {v.headline}", v.reasons)


def best_table(r: FitResult) -> Grid:
    t = Grid(
        [
            Col("#", right=True),
            Col("layout", wrap=True),
            Col("KV tokens", right=True),
            Col("running", right=True),
            Col(f"full ctx @ {r.context:,}", right=True, wrap=True),
            Col("free GiB", right=True, wrap=True),
            Col("stranded", wrap=True),
            Col("flags", wrap=True, under=True),
        ],
        f"Best {len(r.best)} (one per family of layout x flags)",
    )
    for c in r.best:
        o = c.outcome
        stranded = []
        if c.stranded_state_slots:
            stranded.append(f"{c.stranded_state_slots} state slots")
        if c.stranded_kv_tokens:
            stranded.append(f"{c.stranded_kv_tokens:,} KV tokens")
        t.add(
            str(c.rank),
            _layout(c),
            f"{o.kv_tokens:,}",
            str(o.max_running_requests),
            requests(o.effective_concurrency),
            f"{o.free_gib:.2f}",
            ", ".join(stranded) or "none",
            _flags(c),
        )
    return t


def side_by_side(r: FitResult) -> Grid:
    b, f = r.baseline, r.best[0]
    t = Grid(
        [Col("", wrap=True), Col("yours", wrap=True), Col("best", wrap=True)],
        "Your launch vs servefit's best",
    )
    bo, fo = b.outcome, f.outcome

    def both(key: str) -> tuple[str, str]:
        return tuple(f"{o.memory_gib.get(key, 0):.2f}" for o in (bo, fo))  # type: ignore[return-value]

    state = tuple(
        f"{o.memory_gib.get('mamba_state', 0) + o.memory_gib.get('spec_state', 0):.2f}"
        for o in (bo, fo)
    )
    rows = (
        ("verdict", *(candidate_verdict(r, c).status for c in (b, f))),
        ("layout", _layout(b), _layout(f)),
        ("flags", " ".join(b.changed_flags) or "-", " ".join(f.changed_flags) or "-"),
        (
            "flags with no effect",
            " ".join(b.ineffective_flags) or "none",
            " ".join(f.ineffective_flags) or "none",
        ),
        ("KV tokens", f"{bo.kv_tokens:,}", f"{fo.kv_tokens:,}"),
        ("max running requests", str(bo.max_running_requests), str(fo.max_running_requests)),
        (
            f"full-context requests at once @ {r.context:,}",
            requests(bo.effective_concurrency),
            requests(fo.effective_concurrency),
        ),
        ("headroom after pools (GiB)", f"{bo.free_gib:.2f}", f"{fo.free_gib:.2f}"),
        ("state pool slots", str(bo.state_slots or "-"), str(fo.state_slots or "-")),
        ("KV cache GiB", *both("kv_cache")),
        ("state + spec state GiB", *state),
    )
    for name, x, y in rows:
        t.add(name, x, y)
    return t


def headline(r: FitResult, c: FitCandidate) -> str:
    o = c.outcome
    return (
        f"#{c.rank}: {counted(o.effective_concurrency, 'full-context request')} at once, "
        f"{o.kv_tokens:,} KV tokens, {o.free_gib:.2f} GiB headroom"
    )


def engine_words(r: FitResult) -> str:
    name, _, version = r.engine.partition("==")
    if not version or version == r.profile:
        return f"{name} {version or r.profile}"
    return f"{name} {version} (sized as {r.profile})"


def gpus_words(r: FitResult) -> str:
    if r.nodes == 1:
        return f"{r.gpus_per_node}x {r.gpu}"
    return f"{r.nodes} nodes x {r.gpus_per_node}x {r.gpu}"


def render_fit(r: FitResult, console: Console | None = None) -> None:
    console = console or make_console()
    verdict = fit_verdict(r)
    console.print(verdict.text())
    target = f", {r.concurrency} concurrent" if r.concurrency else ""
    console.print(
        Para(
            f"{r.model} on {gpus_words(r)}, {engine_words(r)}, context {r.context:,}{target}, "
            f"speculation {r.spec}; searched "
            f"{r.candidates_evaluated:,} launches in {r.elapsed_s:.2f} s, "
            f"{r.candidates_starting:,} start with at least {r.min_free_gib:g} GiB headroom"
        )
    )
    if r.gpus_note:
        console.print(Para(r.gpus_note, prefix="note: ", prefix_style="yellow"))
    for n in r.layouts:
        if n.calibrated_from:
            console.print(
                Para(
                    n.calibrated_from,
                    prefix=f"TP {n.tp_size} x PP {n.pp_size} calibrated from ",
                    prefix_style="cyan",
                )
            )
        if n.rejected:
            console.print(
                Para(n.rejected, prefix=f"TP {n.tp_size} x PP {n.pp_size}: ", style="dim")
            )
    if not r.best:
        return
    console.print()
    console.print(best_table(r))
    if r.ranking:
        console.print(Para(r.ranking[:1].upper() + r.ranking[1:] + ".", style="dim"))
    if r.baseline is not None:
        console.print()
        console.print(side_by_side(r))
        verdict_word = (
            "at least as good as" if r.beats_baseline else "not better in every respect than"
        )
        console.print(
            Para(f"servefit's best is {verdict_word} yours (full-context requests and KV tokens).")
        )
    console.print()
    console.print(Text("Commands", style="bold"))
    for c in r.best:
        for cmd in c.commands:
            node = f" (node {cmd.node_rank})" if c.nodes > 1 else ""
            console.print()
            plain(console, f"# {headline(r, c)}{node}")
            plain(console, cmd.shell)
    console.print()
    console.print(verdict.text())


def render_fit_shell(r: FitResult, console: Console | None = None) -> None:
    """`--format shell`: the best launch's commands only (one per node), nothing else."""
    console = console or make_console()
    if not r.best:
        return
    cmds = r.best[0].commands
    for cmd in cmds:
        if len(cmds) > 1:
            plain(console, f"# node {cmd.node_rank}")
        plain(console, cmd.shell)
