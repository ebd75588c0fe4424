"""The --html page opens in headless Chromium without console errors and draws its charts.

Needs Debian's `chromium` package (CI installs it). Chromium prints page console messages to
stderr as `...:CONSOLE(...)] "message"` with --enable-logging=stderr; --dump-dom prints the
DOM after scripts ran, where plotly has replaced each chart div by its `plot-container`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from servefit._explain.analysis import explain_request
from servefit._fit.rank import FRACTION_MARGIN
from servefit._fit.search import FitRequest, fit
from servefit._plan.planner import PlanRequest
from servefit.report.html import write_html
from tests.seedcase import SEED, SEED_FIT

CHROMIUM = next(
    (
        p
        for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
        if p and Path(p).exists()
    ),
    None,
)
if CHROMIUM is None and os.environ.get("SERVEFIT_REQUIRE_CHROMIUM"):  # set by .ci/run
    raise RuntimeError("SERVEFIT_REQUIRE_CHROMIUM is set but Chromium is not installed")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install chromium)"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


def load(page: Path, tmp: Path, budget_ms: int = 5000) -> tuple[str, list[str]]:
    """(DOM after scripts ran, console messages) of `page`."""
    profile = tmp / f"profile-{page.stem}"
    proc = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


def errors(console: list[str]) -> list[str]:
    return [c for c in console if re.search(r"Uncaught|error", c, re.IGNORECASE)]


def test_console_errors_are_seen(tmp_path):
    """The harness itself: a page that throws is caught (so a clean run means something)."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    _, console = load(bad, tmp_path, 500)
    assert any("Uncaught Error: boom" in c for c in errors(console))


def _seed_085():
    return explain_request(
        PlanRequest(
            model="Qwen/Qwen3.6-27B",
            gpu="A6000",
            engine="sglang==0.5.9",
            args={**SEED, "mem_fraction_static": 0.85},
        )
    )


def _traces(page_text: str) -> list[dict]:
    """The plotly traces embedded in the page (name -> x, y), read back from its JSON."""
    out = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"chart-(\d+)",\s*(\[.*?\]),\s*\{', page_text, re.S):
        for t in json.loads(m.group(2)):
            out.append({"chart": int(m.group(1)), **t})
    return out


def test_explain_page_tells_the_truth(tmp_path):
    e = _seed_085()
    page = write_html(e, tmp_path / "explain.html", model="Qwen/Qwen3.6-27B")
    text = page.read_text()
    assert 'src="http' not in text and "<script" in text  # nothing fetched: plotly.js is inline
    dom, console = load(page, tmp_path)
    assert errors(console) == []
    # the verdict and the fixed command come before any chart
    assert (
        dom.index('class="verdict fails"')
        < dom.index('class="command"')
        < dom.index('class="chart"')
    )
    cmd = re.search(r'<pre class="cmd">(.*?)</pre>', dom, re.S).group(1)
    assert cmd.startswith("python -m sglang.launch_server") and "--max-running-requests 12" in cmd
    assert "10.31 full-context requests at once" in dom  # the headline number beside it
    # the failing bar: its shortfall below zero in red with a FAIL label, no positive free memory
    # (state 3.44 + speculative state 13.76 GiB against a 14.61 GiB budget: 2.59 GiB short)
    assert "FAIL: 2.59 GiB short" in dom
    traces = {t["name"]: t for t in _traces(text) if t["chart"] == 0}
    short = traces["short: the launch fails (below zero)"]
    assert short["x"][0] == "now" and short["y"][0] == pytest.approx(-2.59, abs=0.01)
    assert short["marker"]["color"] == "#d62728"
    assert traces["free after pools"]["y"][0] == 0  # the engine never got past the pools
    # flat charts are left out: --context-length fails at every value (0 requests throughout)
    titles = re.findall(r'"title":\{"text":"([^"]*)"', text)
    assert not any(t.startswith("--context-length") for t in titles)
    drawn = [t for t in _traces(text) if t["chart"] > 0 and t["name"] != "now"]
    assert drawn and all(len({round(y, 3) for y in t["y"]}) > 1 for t in drawn)
    assert dom.count('class="plot-container plotly"') == 1 + len(drawn)


def test_vllm_page_draws_every_consumer_the_text_ranks(tmp_path):
    e = explain_request(
        PlanRequest(
            model="Qwen/Qwen3.6-27B",
            gpu="A6000",
            engine="vllm==0.33.0",
            args={"tensor_parallel_size": 2, "max_model_len": 32768, "max_num_seqs": 1024},
        )
    )
    page = write_html(e, tmp_path / "vllm.html", model="Qwen/Qwen3.6-27B")
    dom, console = load(page, tmp_path)
    assert errors(console) == []
    ranked = {c.name.split(" (")[0] for c in e.consumers}
    assert {"activation peak", "CUDA-graph estimate"} <= ranked
    traces = {t["name"]: t for t in _traces(page.read_text()) if t["chart"] == 0}
    # the sampler's profiling peak with 1024 sequences: 11.20 GiB (the text's first consumer
    # after the weights), and the graphs + non-torch estimate
    peak = next(c.gib for c in e.consumers if c.name.startswith("activation peak"))
    assert traces["activation peak"]["y"][0] == pytest.approx(peak, abs=0.001)
    assert traces["CUDA graphs + non-torch"]["y"][0] > 0
    assert "activation peak" in dom and "CUDA graphs + non-torch" in dom  # in the legend


def test_fit_page_opens_with_the_answer(tmp_path):
    r = fit(
        FitRequest(
            model="Qwen/Qwen3.6-27B",
            **SEED_FIT,
            concurrency=16,
            top=2,
            baseline={**SEED, "mem_fraction_static": 0.85},
        )
    )
    page = write_html(r, tmp_path / "fit.html")
    dom, console = load(page, tmp_path)
    assert errors(console) == []
    assert dom.count('class="plot-container plotly"') == 1 + len(r.sweeps) == 3
    assert (
        dom.index('class="verdict starts"')
        < dom.index('class="best"')
        < dom.index('class="command"')
        < dom.index('class="chart"')
    )
    heads = re.findall(r'<p class="headline">(.*?)</p>', dom)
    assert heads[0].startswith("#1: starts, 11.24 full-context requests at once")
    cmds = re.findall(r'<pre class="cmd">(.*?)</pre>', dom, re.S)
    assert cmds[0].startswith("python -m sglang.launch_server")
    assert not any("--host" in c for c in cmds)  # the engine's default bind address
    # the baseline (--mem-fraction-static 0.85) fails: its bar shows the shortfall, labelled
    assert "FAIL: 2.59 GiB short" in dom
    # the --concurrency floor is drawn on the running-request sweep, and the best marker sits
    # at the most whole requests among the points that start with the headroom and meet the floor
    assert "below your --concurrency 16" in dom
    for s in r.sweeps:
        starting = [x for x, st in zip(s.x, s.starts, strict=True) if st]
        # fit keeps the fraction FRACTION_MARGIN below the highest that starts
        edge = max(starting) - FRACTION_MARGIN if s.lever == "mem_fraction_static" else None
        ok = [
            y
            for x, y, st, m in zip(
                s.x, s.effective_concurrency, s.starts, s.meets_concurrency, strict=True
            )
            if st and m and (edge is None or x <= edge + 1e-9)
        ]
        best_x = r.best[0].args[s.lever]
        # ranked in whole requests, then headroom: the best holds as many whole requests
        assert int(s.effective_concurrency[s.x.index(best_x)]) == int(max(ok))


def test_fit_page_keeps_node_labels(tmp_path):
    r = fit(FitRequest(model="Qwen/Qwen3.6-27B", **{**SEED_FIT, "num_gpus": 2}, nodes=2, top=1))
    page = write_html(r, tmp_path / "nodes.html")
    dom, _ = load(page, tmp_path)
    heads = re.findall(r'<p class="headline">(.*?)</p>', dom)
    assert len(heads) == 2
    assert heads[0].startswith('<span class="node">node 0 (head: API server)</span> #1')
    assert heads[1].startswith('<span class="node">node 1</span> #1')
    assert "--node-rank 1" in dom
