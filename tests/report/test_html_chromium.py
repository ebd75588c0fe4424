"""The --html page opens in headless Chromium without console errors and draws its charts.

Needs Debian's `chromium` package (CI installs it). Chromium prints page console messages to
stderr as `...:CONSOLE(...)] "message"` with --enable-logging=stderr; --dump-dom prints the
DOM after scripts ran, where plotly has replaced each chart div by its `plot-container`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from servefit.explain.analysis import explain_request
from servefit.fit.search import FitRequest, fit
from servefit.plan.planner import PlanRequest
from servefit.report.html import write_html
from tests.seedcase import HAND_TUNED, SEED, SEED_FIT

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


def test_explain_page_draws_its_charts(tmp_path):
    e = explain_request(
        PlanRequest(
            model="Qwen/Qwen3.6-27B",
            gpu="A6000",
            engine="sglang==0.5.9",
            args={**SEED, "mem_fraction_static": 0.85},
        )
    )
    page = write_html(e, tmp_path / "explain.html")
    text = page.read_text()
    assert 'src="http' not in text and "<script" in text  # nothing fetched: plotly.js is inline
    charts = text.count('class="chart"')
    changing = sum(lv.effect == "changes" for lv in e.levers)
    assert charts == 1 + changing  # stacked memory bars + one chart per lever that moves anything
    dom, console = load(page, tmp_path)
    assert errors(console) == []
    assert dom.count('class="plot-container plotly"') == charts
    assert "main-svg" in dom and 'class="barlayer' in dom and 'class="scatterlayer' in dom
    assert "--max-running-requests 11" in dom  # the minimal fix is on the page


def test_fit_page_draws_its_charts(tmp_path):
    r = fit(
        FitRequest(
            model="Qwen/Qwen3.6-27B",
            **SEED_FIT,
            concurrency=16,
            top=2,
            baseline={**SEED, **HAND_TUNED},
        )
    )
    page = write_html(r, tmp_path / "fit.html")
    dom, console = load(page, tmp_path)
    assert errors(console) == []
    assert dom.count('class="plot-container plotly"') == 1 + len(r.sweeps) == 3
    assert "python -m sglang.launch_server" in dom
