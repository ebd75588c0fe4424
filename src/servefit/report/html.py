"""One self-contained HTML page (plotly.js inlined, no network) for explain and fit.

The page opens with the verdict and the command to run (with its headline numbers), then the
charts: per-rank memory as stacked bars (each configuration a bar; a failing bar shows its
shortfall below zero in red with a FAIL label), and effective concurrency against each lever
that moves it. Flat charts are left out. Needs the `html` extra (plotly).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from servefit._explain.catalogue import catalogue_for
from servefit._explain.schema import Explanation, LeverEffect, Outcome
from servefit._fit.schema import FitCandidate, FitResult, Sweep
from servefit.errors import ServefitError
from servefit.report.fit_view import candidate_verdict, engine_words, fit_verdict, gpus_words
from servefit.report.fixes import fixed_command, outcome_words, with_fix
from servefit.report.verdict import Verdict, of_plan, requests

# (key in Outcome.memory_gib, label, colour), bottom to top
SEGMENTS = (
    ("cuda_context", "CUDA/NCCL before load", "#9e9e9e"),
    ("weights", "weights", "#5470c6"),
    ("draft_weights", "draft weights", "#91cc75"),
    ("kv_cache", "KV cache", "#fac858"),
    ("mamba_state", "mamba/linear state", "#9a60b4"),
    ("spec_state", "speculative state", "#fc8452"),
    ("draft_kv", "draft KV", "#73c0de"),
    ("req_to_token", "req_to_token", "#3ba272"),
    ("graphs", "CUDA graphs + non-torch", "#b0b0b0"),
    ("activation_peak", "activation peak", "#ea7ccc"),
)
FREE = ("free", "free after pools", "#d0f0c0")
SHORT = ("short", "short: the launch fails (below zero)", "#d62728")
FAIL_COLOUR = "#d62728"
_CONFIG = {"displaylogo": False, "responsive": True}


def _plotly():
    try:
        import plotly.graph_objects as go
        from plotly.offline import get_plotlyjs
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ServefitError(
            "--html needs the plotly package: pip install 'servefit[html]' (or pip install plotly)"
        ) from exc
    return go, get_plotlyjs


def free_drawn(m: dict[str, float], failing: bool) -> float:
    """The headroom drawn: nothing for a failing bar (the engine never got there); for vLLM what
    is left beyond the activation peak, which has its own segment."""
    if failing:
        return 0.0
    return max(0.0, m.get("free", 0.0) - m.get("activation_peak", 0.0))


def memory_figure(title: str, bars: list[tuple[str, Outcome]], total_gib: float):
    go, _ = _plotly()
    fig = go.Figure()
    names = [n for n, _ in bars]
    failing = [o.verdict != "ok" or o.memory_gib.get("short", 0.0) > 0 for _, o in bars]
    for key, label, colour in SEGMENTS:
        ys = [round(o.memory_gib.get(key, 0.0), 3) for _, o in bars]
        if not any(ys):
            continue  # a consumer no bar has (SGLang has no activation-peak segment)
        fig.add_trace(_bar(go, names, ys, label, colour))
    fig.add_trace(
        _bar(
            go,
            names,
            [
                round(free_drawn(o.memory_gib, f), 3)
                for (_, o), f in zip(bars, failing, strict=True)
            ],
            FREE[1],
            FREE[2],
        )
    )
    short = [-round(o.memory_gib.get("short", 0.0), 3) for _, o in bars]
    if any(short):
        fig.add_trace(_bar(go, names, short, SHORT[1], SHORT[2]))
    for (name, o), f in zip(bars, failing, strict=True):
        if f:
            lack = o.memory_gib.get("short", 0.0)
            text = f"FAIL: {lack:.2f} GiB short" if lack else "FAIL"
            fig.add_annotation(
                x=name,
                y=total_gib,
                text=text,
                showarrow=False,
                yshift=14,
                font={"color": FAIL_COLOUR, "size": 14},
                hovertext=o.error or "",
            )
    fig.update_layout(
        barmode="relative",
        title=title,
        yaxis_title="GiB per GPU rank",
        legend={"orientation": "h", "y": -0.2},
        height=480,
        margin={"t": 60, "b": 40},
    )
    fig.add_hline(y=total_gib, line_dash="dot", annotation_text=f"GPU {total_gib:.1f} GiB")
    return fig


def _bar(go, names: list[str], ys: list[float], label: str, colour: str):
    return go.Bar(
        name=label,
        x=names,
        y=ys,
        marker_color=colour,
        hovertemplate="%{x}<br>" + label + ": %{y:.2f} GiB<extra></extra>",
    )


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def lever_points(lv: LeverEffect, current: Outcome, current_x: Any) -> list[tuple]:
    """(x, effective concurrency, starts, label) of every value re-planned, and now."""
    rows = [(v.args.get(lv.dest, v.label), v) for v in lv.values if v.outcome is not None]
    xs = [x for x, _ in rows]
    if not _numeric(xs) or not _numeric([current_x]):
        xs, current_x = [v.label for _, v in rows], "now"
    pts = [
        (x, v.outcome.effective_concurrency, v.outcome.verdict == "ok", v.label)
        for x, (_, v) in zip(xs, rows, strict=True)
    ]
    pts.append((current_x, current.effective_concurrency, current.verdict == "ok", "now"))
    return sorted(pts, key=lambda p: (isinstance(p[0], str), p[0]))


def flat(points: list[tuple]) -> bool:
    """Nothing to see: every value gives the same concurrency."""
    return len({round(p[1], 3) for p in points}) <= 1


def lever_figure(lv: LeverEffect, current: Outcome, points: list[tuple]):
    go, _ = _plotly()
    fig = go.Figure(
        go.Scatter(
            x=[p[0] for p in points],
            y=[p[1] for p in points],
            mode="lines+markers",
            marker={
                "color": ["#5470c6" if p[2] else FAIL_COLOUR for p in points],
                "symbol": ["circle" if p[2] else "x" for p in points],
                "size": 9,
            },
            text=[f"{p[3]}: {'starts' if p[2] else 'fails'}" for p in points],
            hovertemplate="%{text}<br>full-context requests at once %{y}<extra></extra>",
            name="full-context requests at once",
        )
    )
    now = next(p for p in points if p[3] == "now")
    fig.add_trace(
        go.Scatter(
            x=[now[0]],
            y=[now[1]],
            mode="markers+text",
            marker={"size": 14, "symbol": "star", "color": "#222"},
            text=["now"],
            textposition="top center",
            name="now",
        )
    )
    fig.update_layout(
        title=f"{lv.flag}: {lv.reason}"[:110],
        xaxis_title=lv.flag,
        yaxis_title=f"full-context requests @ {current.target_context:,}",
        height=320,
        showlegend=False,
        margin={"t": 50, "b": 40},
    )
    return fig


def sweep_figure(
    s: Sweep,
    context: int,
    best_x: Any,
    concurrency: int | None,
    floor: float,
    running_lever: bool = False,
):
    """The best's family as one lever moves. Points that do not start with the headroom or
    fall below --concurrency running requests are grey: the ranking never picks them, and the
    best marker sits at the highest of the others."""
    go, _ = _plotly()
    meets = s.meets_concurrency or [True] * len(s.x)
    ok = [a and b for a, b in zip(s.starts, meets, strict=True)]
    why = [
        "ok" if k else ("under the headroom" if not st else f"under --concurrency {concurrency}")
        for k, st in zip(ok, s.starts, strict=True)
    ]
    fig = go.Figure(
        go.Scatter(
            x=s.x,
            y=s.effective_concurrency,
            mode="lines+markers",
            line={"color": "#c8c8c8"},
            marker={"color": ["#5470c6" if k else "#b0b0b0" for k in ok], "size": 8},
            text=[f"{w}; {kv:,} KV tokens" for w, kv in zip(why, s.kv_tokens, strict=True)],
            hovertemplate="%{x}: %{y} full-context requests<br>%{text}<extra></extra>",
            name="full-context requests at once",
        )
    )
    if best_x in s.x:
        i = s.x.index(best_x)
        fig.add_trace(
            go.Scatter(
                x=[best_x],
                y=[s.effective_concurrency[i]],
                mode="markers+text",
                marker={"size": 16, "symbol": "star", "color": "#2e7d32"},
                text=["best"],
                textposition="top center",
                name="best",
            )
        )
    if concurrency and running_lever:
        # sweeping the running-request cap itself: the floor is a value of x
        fig.add_vrect(
            x0=min(s.x),
            x1=concurrency,
            fillcolor="#b0b0b0",
            opacity=0.15,
            line_width=0,
            annotation_text=f"below your --concurrency {concurrency}",
            annotation_position="top left",
        )
    fig.update_layout(
        title=f"full-context requests at once vs {s.flag} (other flags of the best kept; "
        f"grey: under {floor:g} GiB headroom or --concurrency)",
        xaxis_title=s.flag,
        yaxis_title=f"full-context requests @ {context:,}",
        height=340,
        showlegend=False,
    )
    return fig


# ------------------------------------------------------------------------------------ page


def _esc(x: object) -> str:
    return html.escape(str(x))


def verdict_html(v: Verdict) -> str:
    items = "".join(f"<li>{_esc(r)}</li>" for r in v.reasons)
    word = v.line().split(":", 1)[0]
    return (
        f'<div class="verdict {v.status}"><b class="word">{_esc(word)}</b>: '
        f"{_esc(v.headline)}{f'<ul>{items}</ul>' if items else ''}</div>"
    )


def command_html(headline: str, shell: str, label: str = "") -> str:
    lab = f'<span class="node">{_esc(label)}</span> ' if label else ""
    return (
        f'<div class="command"><p class="headline">{lab}{_esc(headline)}</p>'
        f'<pre class="cmd">{_esc(shell)}</pre></div>'
    )


CSS = (
    "body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px}"
    ".chart{margin:1em 0}pre{background:#f6f6f6;padding:.8em;white-space:pre-wrap}"
    ".verdict{padding:.6em .9em;border-left:6px solid;margin:1em 0;font-size:1.1em}"
    ".verdict.fails{border-color:#d62728;background:#fdecea}"
    ".verdict.degraded{border-color:#f0a500;background:#fff6e0}"
    ".verdict.starts{border-color:#2e7d32;background:#e8f5e9}"
    ".headline{margin:.8em 0 .2em;font-weight:600}.node{color:#555}"
    "table.best{border-collapse:collapse}table.best td,table.best th{padding:.2em .7em;"
    "border-bottom:1px solid #ddd;text-align:right}table.best td.l,table.best th.l{text-align:left}"
)


def _page(title: str, intro: str, figures: list[Any], outro: str = "") -> str:
    _, get_plotlyjs = _plotly()
    divs = [
        fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{i}", config=_CONFIG)
        for i, fig in enumerate(figures)
    ]
    cells = "\n".join(f'<div class="chart">{d}</div>' for d in divs)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(title)}</title><style>{CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        f"<h1>{_esc(title)}</h1>{intro}{cells}{outro}</body></html>\n"
    )


def explanation_html(e: Explanation, model: str | None = None, env: dict | None = None) -> str:
    p = e.plan
    bars = [("now", e.outcome)]
    intro = verdict_html(with_fix(of_plan(p), e.fix, p))
    fx = e.fix
    if fx is not None:
        if fx.best is not None:
            bars.append((f"fix: {fx.best.command_flags}", fx.best.outcome))
        m = fx.minimal
        if m is not None and fx.best is not None and m.command_flags != fx.best.command_flags:
            bars.append((f"closest: {m.command_flags}", m.outcome))
        if fx.best is None and fx.gpus is not None and fx.gpus.outcome is not None:
            bars.append((f"{fx.gpus.num_gpus} GPUs", fx.gpus.outcome))
        shell = fixed_command(fx, p, model, env) if model else None
        if fx.best is not None:
            head = f"The best fix: {fx.best.command_flags}: {outcome_words(fx.best.outcome)}"
        elif fx.gpus is not None and fx.gpus.outcome is not None:
            head = f"More GPUs: {outcome_words(fx.gpus.outcome)}"
        else:
            head = f"No fix: {fx.note or ''}"
        intro += command_html(head, shell) if shell else f"<p><b>{_esc(head)}</b></p>"
        intro += f"<p class='ranking'>{_esc(fx.ranking)}</p>"
    intro += f"<pre>{_esc(chr(10).join(e.why))}</pre>"
    figs = [memory_figure("Memory per GPU rank", bars, p.per_rank.total_gib)]
    for lv in e.levers:
        if lv.effect != "changes" or not any(v.outcome for v in lv.values):
            continue
        pts = lever_points(lv, e.outcome, lv.current)
        if not flat(pts):
            figs.append(lever_figure(lv, e.outcome, pts))
    no_effect = [lv for lv in e.levers if lv.effect == "no effect"]
    outro = ""
    if no_effect:
        items = "".join(
            f"<li><code>{_esc(lv.flag)}</code>: {_esc(lv.reason)}</li>" for lv in no_effect
        )
        outro = f"<h2>Flags with no effect here</h2><ul>{items}</ul>"
    title = f"servefit explain: {p.model.name} on {p.hardware.num_gpus}x {p.hardware.gpu}"
    return _page(title, intro, figs, outro)


def _best_rows(r: FitResult) -> str:
    head = (
        '<tr><th>#</th><th class="l">layout</th><th class="l">flags</th><th>full-context '
        f"requests @ {r.context:,}</th><th>KV tokens</th><th>running</th><th>headroom GiB</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{c.rank}</td><td class='l'>TP {c.tp_size} x PP {c.pp_size}</td>"
        f"<td class='l'><code>{_esc(' '.join(c.changed_flags) or '(engine defaults)')}</code></td>"
        f"<td>{requests(c.outcome.effective_concurrency)}</td><td>{c.outcome.kv_tokens:,}</td>"
        f"<td>{c.outcome.max_running_requests}</td><td>{c.outcome.free_gib:.2f}</td></tr>"
        for c in r.best
    )
    return f'<table class="best">{head}{rows}</table>'


def _node_label(c: FitCandidate, rank: int) -> str:
    if c.nodes <= 1:
        return ""
    return f"node {rank} (head: API server)" if rank == 0 else f"node {rank}"


def fit_html(r: FitResult) -> str:
    intro = verdict_html(fit_verdict(r))
    intro += (
        f"<p>{_esc(r.model)} on {_esc(gpus_words(r))}, {_esc(engine_words(r))}, context "
        f"{r.context:,}; {r.candidates_evaluated:,} launches tried in {r.elapsed_s:.2f} s, "
        f"{r.candidates_starting:,} start.</p>"
    )
    if r.best:
        intro += _best_rows(r)
    for c in r.best:
        v = candidate_verdict(r, c)
        for n in c.commands:
            intro += command_html(
                f"#{c.rank}: {v.line().split(':', 1)[0].lower()}, {v.headline}",
                n.shell,
                _node_label(c, n.node_rank),
            )
    bars: list[tuple[str, Outcome]] = []
    if r.baseline is not None:
        bars.append(("yours", r.baseline.outcome))
    bars += [(f"#{c.rank} TP{c.tp_size}xPP{c.pp_size}", c.outcome) for c in r.best]
    figs = [memory_figure("Memory per GPU rank", bars, _total_gib(r))] if bars else []
    best = r.best[0] if r.best else None
    running = catalogue_for(r.engine.partition("==")[0]).running_dest
    for s in r.sweeps:
        bx = best.args.get(s.lever) if best else None
        figs.append(
            sweep_figure(s, r.context, bx, r.concurrency, r.min_free_gib, s.lever == running)
        )
    title = f"servefit fit: {r.model} on {gpus_words(r)}"
    return _page(title, intro, figs)


def _total_gib(r: FitResult) -> float:
    c = r.best[0] if r.best else r.baseline
    if c is None:
        return 0.0
    m = c.outcome.memory_gib
    # the drawn segments add up to the GPU's total for a launch that starts
    return sum(m.get(k, 0.0) for k, _, _ in SEGMENTS) + free_drawn(m, False)


def write_html(
    obj: Explanation | FitResult,
    path: str | Path,
    model: str | None = None,
    env: dict[str, str] | None = None,
) -> Path:
    text = explanation_html(obj, model, env) if isinstance(obj, Explanation) else fit_html(obj)
    out = Path(path)
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ServefitError(f"cannot write {out}: {exc.strerror or exc}") from exc
    return out
