"""One self-contained HTML page (plotly.js inlined, no network) for explain and fit.

Charts: per-rank memory as stacked bars (each configuration a bar), and effective concurrency
against each lever. Needs the optional `html` extra (plotly): pip install 'servefit[html]'.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from servefit.errors import ServefitError
from servefit.explain.outcome import memory_gib
from servefit.explain.schema import Explanation, LeverEffect, Outcome
from servefit.fit.schema import FitResult

SEGMENTS = (  # (key in Outcome.memory_gib, label, colour)
    ("cuda_context", "CUDA/NCCL before load", "#9e9e9e"),
    ("weights", "weights", "#5470c6"),
    ("draft_weights", "draft weights", "#91cc75"),
    ("kv_cache", "KV cache", "#fac858"),
    ("mamba_state", "mamba/linear state", "#ee6666"),
    ("spec_state", "speculative state", "#fc8452"),
    ("draft_kv", "draft KV", "#73c0de"),
    ("req_to_token", "req_to_token", "#3ba272"),
    ("free", "free after pools (negative = short)", "#d0f0c0"),
)
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


def memory_figure(title: str, bars: list[tuple[str, dict[str, float]]], total_gib: float):
    go, _ = _plotly()
    fig = go.Figure()
    names = [n for n, _ in bars]
    for key, label, colour in SEGMENTS:
        fig.add_trace(
            go.Bar(
                name=label,
                x=names,
                y=[round(m.get(key, 0.0), 3) for _, m in bars],
                marker_color=colour,
                hovertemplate="%{x}<br>" + label + ": %{y:.2f} GiB<extra></extra>",
            )
        )
    # Weights and pools must fit under total - P x (1 - mem_fraction_static).
    fig.add_trace(
        go.Scatter(
            name="static fraction limit",
            x=names,
            y=[
                round(sum(m.get(k, 0.0) for k, _, _ in SEGMENTS) - m.get("reserved", 0.0), 3)
                for _, m in bars
            ],
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 60, "color": "#222", "line": {"width": 3}},
            hovertemplate="%{x}<br>static fraction limit: %{y:.2f} GiB<extra></extra>",
        )
    )
    fig.update_layout(
        barmode="relative",
        title=title,
        yaxis_title="GiB per GPU rank",
        legend={"orientation": "h", "y": -0.2},
        height=460,
        margin={"t": 50, "b": 40},
    )
    fig.add_hline(y=total_gib, line_dash="dot", annotation_text=f"GPU {total_gib:.1f} GiB")
    return fig


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def lever_figure(lv: LeverEffect, current: Outcome, current_x: Any):
    go, _ = _plotly()
    rows = [(v.args.get(lv.dest, v.label), v) for v in lv.values if v.outcome is not None]
    xs = [x for x, _ in rows]
    if not _numeric(xs) or not _numeric([current_x]):
        xs, current_x = [v.label for _, v in rows], "now"
    points = sorted(
        [
            (x, v.outcome.effective_concurrency, v.outcome.kv_tokens, v.label)
            for x, (_, v) in zip(xs, rows, strict=True)
        ]
        + [(current_x, current.effective_concurrency, current.kv_tokens, "now")],
        key=lambda p: (isinstance(p[0], str), p[0]),
    )
    fig = go.Figure(
        go.Scatter(
            x=[p[0] for p in points],
            y=[p[1] for p in points],
            mode="lines+markers",
            text=[f"{p[3]}: {p[2]:,} KV tokens" for p in points],
            hovertemplate="%{text}<br>effective concurrency %{y}<extra></extra>",
            name="effective concurrency",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[current_x],
            y=[current.effective_concurrency],
            mode="markers",
            marker={"size": 14, "symbol": "star", "color": "#d62728"},
            name="now",
        )
    )
    fig.update_layout(
        title=f"{lv.flag}: {lv.effect}",
        xaxis_title=lv.flag,
        yaxis_title=f"effective concurrency @ {current.target_context:,}",
        height=320,
        showlegend=False,
        margin={"t": 50, "b": 40},
    )
    return fig


def sweep_figure(x: list[Any], y: list[float], flag: str, context: int, best_x: Any):
    go, _ = _plotly()
    fig = go.Figure(go.Scatter(x=x, y=y, mode="lines+markers", name="effective concurrency"))
    fig.add_vline(x=best_x, line_dash="dot", annotation_text="best")
    fig.update_layout(
        title=f"effective concurrency vs {flag} (other flags of the best kept)",
        xaxis_title=flag,
        yaxis_title=f"effective concurrency @ {context:,}",
        height=320,
        showlegend=False,
    )
    return fig


def _page(title: str, intro: str, figures: list[Any]) -> str:
    _, get_plotlyjs = _plotly()
    divs = [
        fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{i}", config=_CONFIG)
        for i, fig in enumerate(figures)
    ]
    cells = "\n".join(f'<div class="chart">{d}</div>' for d in divs)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px}"
        ".chart{margin:1em 0}pre{background:#f6f6f6;padding:.8em;white-space:pre-wrap}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        f"<h1>{html.escape(title)}</h1>{intro}{cells}</body></html>\n"
    )


def explanation_html(e: Explanation) -> str:
    p = e.plan
    bars = [("now", memory_gib(p))]
    if e.fix and e.fix.best:
        bars.append((f"fix: {e.fix.best.command_flags}", e.fix.best.outcome.memory_gib))
    figs = [memory_figure("Memory per GPU rank", bars, p.per_rank.total_gib)]
    for lv in e.levers:
        if lv.effect == "changes" and any(v.outcome for v in lv.values):
            figs.append(lever_figure(lv, e.outcome, lv.current))
    intro = f"<pre>{html.escape(chr(10).join(e.why))}</pre>"
    if e.fix and e.fix.best:
        intro += f"<p><b>Minimal fix:</b> <code>{html.escape(e.fix.best.command_flags)}</code></p>"
    no_effect = [lv for lv in e.levers if lv.effect == "no effect"]
    if no_effect:
        items = "".join(
            f"<li><code>{html.escape(lv.flag)}</code>: {html.escape(lv.reason)}</li>"
            for lv in no_effect
        )
        intro += f"<p>Flags with no effect here:</p><ul>{items}</ul>"
    title = f"servefit explain: {p.model.name} on {p.hardware.num_gpus}x {p.hardware.gpu}"
    return _page(title, intro, figs)


def fit_html(r: FitResult) -> str:
    bars = []
    if r.baseline is not None:
        bars.append(("yours", r.baseline.outcome.memory_gib))
    bars += [(f"#{c.rank} TP{c.tp_size}xPP{c.pp_size}", c.outcome.memory_gib) for c in r.best]
    total = _total_gib(r)
    figs = [memory_figure("Memory per GPU rank", bars, total)] if bars else []
    best = r.best[0] if r.best else None
    for s in r.sweeps:
        bx = best.args.get(s.lever) if best else None
        figs.append(sweep_figure(s.x, s.effective_concurrency, s.flag, r.context, bx))
    cmds = "".join(
        f"<h3>#{c.rank}</h3>" + "".join(f"<pre>{html.escape(n.shell)}</pre>" for n in c.commands)
        for c in r.best
    )
    intro = (
        f"<p>{r.candidates_evaluated:,} candidates in {r.elapsed_s:.2f} s; "
        f"{r.candidates_starting:,} start.</p>{cmds}"
    )
    return _page(f"servefit fit: {r.model} on {r.nodes} x {r.gpus_per_node} {r.gpu}", intro, figs)


def _total_gib(r: FitResult) -> float:
    c = r.best[0] if r.best else r.baseline
    if c is None:
        return 0.0
    # the segments add up to the GPU's total (free is what the others leave)
    return sum(c.outcome.memory_gib.get(k, 0.0) for k, _, _ in SEGMENTS)


def write_html(obj: Explanation | FitResult, path: str | Path) -> Path:
    text = explanation_html(obj) if isinstance(obj, Explanation) else fit_html(obj)
    out = Path(path)
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ServefitError(f"cannot write {out}: {exc.strerror or exc}") from exc
    return out
