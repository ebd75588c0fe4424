"""Golden snapshots of what people read: plan, explain, fit, doctor and the catalogs at 80, 120
and 200 columns and in a pipe (no terminal, no COLUMNS: natural width).

Regenerate after an intended change to the output with
    SERVEFIT_UPDATE_SNAPSHOTS=1 python -m pytest tests/report/test_snapshots.py
and review the diff of tests/report/snapshots/.

Besides the exact text, each snapshot is checked for what makes output usable at any width:
no line wider than the width unless it is one unbreakable word, every `--flag` and every
number of the wide rendering present whole at every width (nothing folded mid-token), and the
first line is the verdict.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from pathlib import Path

import pytest

from servefit._explain.analysis import explain_request
from servefit._fit.search import FitRequest, fit
from servefit._plan.planner import PlanRequest
from servefit.cli.main import main
from servefit.report.console import make_console
from servefit.report.explain_view import render_explanation
from servefit.report.fit_view import render_fit
from tests.seedcase import HAND_TUNED, MTP_ARGV, SEED, SEED_FIT

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = bool(os.environ.get("SERVEFIT_UPDATE_SNAPSHOTS"))
WIDTHS = ("80", "120", "200", "pipe")
LOGS = Path(__file__).resolve().parents[1] / "doctor" / "logs"
SEED_CMD = [
    "--gpu",
    "A6000",
    "--engine",
    "sglang==0.5.9",
    "--",
    "python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "Qwen/Qwen3.6-27B",
    "--tp-size",
    "2",
    "--context-length",
    "32768",
    *MTP_ARGV,
]
CLI_CASES = {
    "plan-seed-fails": ["plan", *SEED_CMD, "--mem-fraction-static", "0.85"],
    "plan-seed-fixed": [
        "plan",
        *SEED_CMD,
        "--mem-fraction-static",
        "0.88",
        "--max-running-requests",
        "16",
        "--mamba-full-memory-ratio",
        "0.5",
    ],
    "plan-degraded": [
        "plan",
        "-m",
        "Qwen/Qwen3.5-27B",
        "--gpu",
        "H100",
        "--engine",
        "sglang==0.5.23",
        "--tp-size",
        "1",
        "--max-running-requests",
        "32",
    ],
    "plan-vllm-fails": [
        "plan",
        "--gpu",
        "A6000",
        "--engine",
        "vllm==0.33.0",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3.6-27B",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "32768",
        "--max-num-seqs",
        "1024",
    ],
    "doctor-seed-fails": ["doctor", str(LOGS / "sglang_0_5_9_seed_085_fail.log"), "--gpu", "A6000"],
    "gpus": ["gpus"],
    "models": ["models"],
}
TIMING = re.compile(r"in \d+(\.\d+)? s\b")


def _normalise(text: str) -> str:
    text = TIMING.sub("in N s", text)
    return text.replace(str(LOGS), "tests/doctor/logs")


def _cli(capsys, monkeypatch, argv: list[str], width: str) -> str:
    # paths as the repository names them, whatever the checkout's location (the text is
    # wrapped before _normalise could shorten an absolute path)
    root = LOGS.parents[2]
    monkeypatch.chdir(root)
    argv = [str(Path(a).relative_to(root)) if a.startswith(str(LOGS)) else a for a in argv]
    if width == "pipe":
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", width)
    # each width's run records into an empty calibration store, as the first run does
    monkeypatch.setenv("SERVEFIT_CALIBRATION_DIR", tempfile.mkdtemp(prefix="calibration-"))
    with pytest.raises(SystemExit):
        main(list(argv))
    out, _ = capsys.readouterr()
    return _normalise(out)


def _rendered(render, width: str, monkeypatch) -> str:
    monkeypatch.delenv("COLUMNS", raising=False)
    buf = io.StringIO()
    render(make_console(file=buf, width=None if width == "pipe" else int(width)))
    return _normalise(buf.getvalue())


def _check(name: str, width: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.{width}.txt"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path.name}: run with SERVEFIT_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(), f"{path.name} changed (SERVEFIT_UPDATE_SNAPSHOTS=1 to accept)"
    if width != "pipe":
        for line in text.splitlines():
            assert len(line) <= int(width) or " " not in line.strip(), (width, line)
    assert not any(line != line.rstrip() for line in text.splitlines())


def _tokens(text: str) -> set[str]:
    """Flags and numbers: what must never be cut in two."""
    return set(re.findall(r"--[a-z][a-z0-9-]*[a-z0-9]|\d[\d,]*(?:\.\d+)?", text))


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_cli_snapshots(name, capsys, monkeypatch):
    texts = {w: _cli(capsys, monkeypatch, CLI_CASES[name], w) for w in WIDTHS}
    for w, text in texts.items():
        _check(name, w, text)
        assert _tokens(text) == _tokens(texts["pipe"]), w  # nothing folded mid-token
    # in a pipe every table row is one line: the longest line is as wide as it needs to be
    assert max(len(x) for x in texts["pipe"].splitlines()) >= max(
        len(x) for x in texts["200"].splitlines()
    )


@pytest.fixture(scope="module")
def seed_explanation():
    return explain_request(
        PlanRequest(
            model="Qwen/Qwen3.6-27B",
            gpu="A6000",
            engine="sglang==0.5.9",
            args={**SEED, "mem_fraction_static": 0.85},
        )
    )


@pytest.fixture(scope="module")
def seed_fit():
    return fit(
        FitRequest(
            model="Qwen/Qwen3.6-27B", **SEED_FIT, concurrency=16, baseline={**SEED, **HAND_TUNED}
        )
    )


def test_explain_snapshots(seed_explanation, monkeypatch):
    texts = {
        w: _rendered(
            lambda c: render_explanation(seed_explanation, c, model="Qwen/Qwen3.6-27B"),
            w,
            monkeypatch,
        )
        for w in WIDTHS
    }
    for w, text in texts.items():
        _check("explain-seed-fails", w, text)
        assert _tokens(text) == _tokens(texts["pipe"]), w


def test_fit_snapshots(seed_fit, monkeypatch):
    texts = {w: _rendered(lambda c: render_fit(seed_fit, c), w, monkeypatch) for w in WIDTHS}
    for w, text in texts.items():
        _check("fit-seed", w, text)
        assert _tokens(text) == _tokens(texts["pipe"]), w


def test_verdict_comes_first():
    """The first line answers the question, in words a user asks in."""
    first = {p.name: p.read_text().splitlines()[0] for p in SNAPSHOTS.glob("*.pipe.txt")}
    assert first["plan-seed-fails.pipe.txt"].startswith("FAILS: ")
    assert first["plan-seed-fixed.pipe.txt"] == (
        "STARTS: 10.29 full-context requests at once (of the 16 you asked for), 32,768 tokens each"
    )
    # 83,606 KV tokens / 262,144 = 0.32 of one request; 30 state slots // 5 per request = 6 < 32
    assert first["plan-degraded.pipe.txt"] == (
        "STARTS BUT DEGRADED: 0.32 full-context requests at once (of the 32 you asked for), "
        "262,144 tokens each"
    )
    assert first["plan-vllm-fails.pipe.txt"].startswith(
        "FAILS: the engine stops at start-up: ValueError: max_num_seqs (1024) exceeds available "
        "Mamba cache blocks"
    )
    assert first["doctor-seed-fails.pipe.txt"].startswith("FAILED: launch 1 of 1")


def test_models_name_the_releases_that_serve_them(capsys):
    """From the releases' declared architectures (archs_<release>.txt, extracted from the
    wheels): Kimi-K3 (KimiK3ForConditionalGeneration) is registered by SGLang 0.5.17 and vLLM
    0.27.0 on; MiniMax-M1 (MiniMaxM1ForCausalLM) by vLLM up to 0.23.0 (registry.py:
    _PREVIOUSLY_SUPPORTED_MODELS names 0.23.0); Qwen3.5/3.6 by vLLM 0.17.0 on."""
    import json

    from servefit.engines import registry

    vllm, sglang = registry.releases("vllm"), registry.releases("sglang")
    with pytest.raises(SystemExit):
        main(["models", "--format", "json"])
    rows = {r["id"]: r["served_by"] for r in json.loads(capsys.readouterr()[0])}
    assert rows["moonshotai/Kimi-K3"] == {
        "sglang": sglang[sglang.index("0.5.17") :],
        "vllm": vllm[vllm.index("0.27.0") :],
    }
    assert rows["MiniMaxAI/MiniMax-M1"] == {
        "sglang": [],
        "vllm": vllm[: vllm.index("0.23.0") + 1],
    }
    assert rows["Qwen/Qwen3.6-27B"] == {
        "sglang": sglang,
        "vllm": vllm[vllm.index("0.17.0") :],
    }
