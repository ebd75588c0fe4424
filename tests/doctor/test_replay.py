"""Replay on a real log (tests/data/ground-truth H100 case) and the >1 % gap flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log
from tests.groundtruth import GT
from tests.qwen38_fp8 import qwen38_fp8_spec

H100 = GT / "sgl_qwen38_27b_fp8_1xh100_v0518.txt"


@pytest.fixture(scope="module")
def model():
    return qwen38_fp8_spec("Qwen3.8-27B-FP8")


CMD = "python -m sglang.launch_server --model-path Qwen/Qwen3.8-27B-FP8 --mem-fraction-static 0.85 --max-running-requests 32"


def test_h100_log_replays_within_one_percent(model):
    r = diagnose(read_log(H100), model=model, gpu="H100", command=CMD)
    checks = {c.name: c for c in r.replay.checks}
    # logged 330,323 KV tokens and 124 state slots (observed lines); free before weights = 50.01 + 28.47
    assert r.replay.measured_free_before_gib == pytest.approx(78.48)
    assert checks["KV tokens"].logged == 330323 and abs(checks["KV tokens"].gap_pct) < 1.0
    assert checks["state slots (max_mamba_cache_size)"].logged == 124
    assert r.replay.engine == "sglang==0.5.23"  # format family of the log; 0.5.18 is not printed
    assert any(
        f.code == "silent_cap" and f.numbers["max_running_requests"] == 24 for f in r.findings
    )


def test_a_gap_above_one_percent_is_flagged():
    # the 0.88 seed fixture with its KV line changed by +5 % (330089 -> 346593 tokens)
    text = (Path(__file__).parent / "logs" / "sglang_0_5_9_seed_088_serve.log").read_text()
    text = text.replace("#tokens: 330089, K size: 5.04 GB", "#tokens: 346593, K size: 5.04 GB")
    r = diagnose(read_log(text.splitlines()), gpu="A6000")
    kv = next(c for c in r.replay.checks if c.name == "KV tokens")
    assert kv.flagged and kv.gap_pct == pytest.approx((330089 - 346593) / 346593 * 100, abs=1e-3)
    assert any(f.code == "planner_gap" for f in r.findings)


def test_the_fixed_command_keeps_the_config_file_and_adds_the_fix_after_it(tmp_path, monkeypatch):
    # SGLang's ConfigArgumentMerger puts the file's options before the command line's
    # (server_args_config_parser.py:merge_config_with_args): a fix appended to the words as
    # typed wins over the file's value, and the file is named, not inlined.
    from servefit.doctor.replay import fixed_command
    from servefit.doctor.schema import Fix, FixChange, FixOption

    monkeypatch.chdir(tmp_path)
    (tmp_path / "serve.yaml").write_text("mem-fraction-static: 0.85\ntp-size: 2\n")
    change = FixChange(arg="mem_fraction_static", flag="--mem-fraction-static", old=0.85, new=0.8)
    fix = Fix(best=FixOption(changes=[change], why="hand-made"), source="log")
    typed = "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --config serve.yaml"
    assert fixed_command(typed, fix, "sglang", None) == typed + " --mem-fraction-static 0.8"
