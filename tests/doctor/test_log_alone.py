"""doctor without the model's config: the fix worked back from the numbers the log printed; a
start-up failure attributed to the launch that produced it; a stale log said before the
diagnosis.

The logs are excerpts in SGLang 0.5.23's own line formats: `Load weight begin/end`
(model_runner.py:load_model), the `server_args=ServerArgs(...)` dump (server_args.py) and the
error of mem_cache/kv_cache_configurator.py:_handle_max_mamba_cache:
    f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
    f"Computed max_mamba_cache_size={...} (total_rest_memory={total_rest_memory:.2f} GB, "
    f"mamba_cache_per_req={stage_per_req / (1 << 20):.2f} MB). Try: ..."
The model path is private (no config here), so nothing can be re-planned.
"""

from __future__ import annotations

import math
from pathlib import Path

from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log
from tests.clihelp import run

ERROR = (
    "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
    "Computed max_mamba_cache_size={k} (total_rest_memory={rest} GB, mamba_cache_per_req=73.41 "
    "MB). Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, (3) reduce "
    "--speculative-num-draft-tokens, or (4) use GPUs with more memory."
)


def _log(tmp_path: Path, args: str, free: float, weights: float, rest: float) -> Path:
    lines = [
        f"[2026-05-02 09:14:03] server_args=ServerArgs(model_path='/data/private-27b', "
        f"tokenizer_path='/data/private-27b', context_length=32768, {args}, host='127.0.0.1', "
        "port=30000)",
        "[2026-05-02 09:14:05 TP0] Init torch distributed begin.",
        "[2026-05-02 09:14:06 TP0] Init torch distributed ends. elapsed=1.02 s, mem usage=0.61 GB",
        f"[2026-05-02 09:14:06 TP0] Load weight begin. avail mem={free:.2f} GB",
        "[2026-05-02 09:14:40 TP0] Load weight end. elapsed=34.10 s, "
        "type=Qwen3_5ForConditionalGeneration, dtype=torch.bfloat16, "
        f"avail mem={free - weights:.2f} GB, mem usage={weights:.2f} GB.",
        "[2026-05-02 09:14:41 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        ERROR.format(k=-28, rest=f"{rest:.2f}"),
    ]
    path = tmp_path / "sglang.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fraction_from_the_logs_figures(tmp_path, capsys):
    """total_rest_memory -7.96 GB under --mem-fraction-static 0.5 with 23.17 GiB free before the
    weights: the fraction must rise by (7.96 + 2 x 73.41 MB) / 23.17 = 0.3497 -> 0.85."""
    log = _log(tmp_path, "mem_fraction_static=0.5, tp_size=2", 23.17, 19.55, -7.96)
    report = diagnose(read_log(log))
    assert report.status == "failed" and report.replay is None
    fix = report.fix
    assert fix is not None and fix.source == "log"
    (change,) = fix.best.changes
    expected = math.ceil((0.5 + (7.96 + 2 * 73.41 / 1024) / 23.17) * 100) / 100
    assert change.flag == "--mem-fraction-static" and change.old == 0.5
    assert change.new == expected == 0.85
    assert "does not even cover them" in fix.best.why
    code, out, _ = run(
        capsys, "doctor", str(log), "--command",
        "python -m sglang.launch_server --model-path /data/private-27b --tp-size 2 "
        "--mem-fraction-static 0.5",
    )  # fmt: skip
    assert code == 1 and out.splitlines()[1] == "  - fix: --mem-fraction-static 0.85"
    assert "    --mem-fraction-static 0.85" in out.splitlines()  # the fixed command


def test_speculative_state_from_the_logs_figures(tmp_path):
    """The weights fit (47.05 x 0.85 - 25.49 = 14.50 GiB left) and the speculative state took it
    to -2.00 GiB: each request fewer gives back 4 draft tokens x 73.41 MB; 8 fewer clear it
    with room for one request's state and the padding slot."""
    args = "mem_fraction_static=0.85, tp_size=2, max_running_requests=48, speculative_num_draft_tokens=4"
    log = _log(tmp_path, args, 47.05, 25.49, -2.0)
    fix = diagnose(read_log(log)).fix
    (change,) = fix.best.changes
    per_req = 73.41 / 1024
    fewer = math.ceil((2.0 + 2 * per_req) / (per_req * 4))
    assert (change.flag, change.old, change.new) == ("--max-running-requests", 48, 48 - fewer)
    assert change.new == 40


def test_weights_past_the_fraction_need_more_gpus(tmp_path):
    """Covering -20 GiB with 23.17 GiB free would need a fraction above 0.95: more GPUs."""
    log = _log(tmp_path, "mem_fraction_static=0.5, tp_size=2", 23.17, 22.0, -20.0)
    (change,) = diagnose(read_log(log)).fix.best.changes
    assert (change.flag, change.old, change.new) == ("--tp-size", 2, 4)


LOGS = Path(__file__).parent / "logs"


def test_failure_after_a_ready_launch_is_a_new_launch(tmp_path):
    """A launch that reached its ready line, then the start-up error of the next launch whose
    first lines are not in the file (from its scheduler's traceback on): the error belongs to
    the next launch, not to the one that was serving."""
    ready = (LOGS / "sglang_0_5_9_seed_088_serve.log").read_text()
    failed = (LOGS / "sglang_0_5_9_seed_085_fail.log").read_text().splitlines()
    start = next(i for i, x in enumerate(failed) if "Scheduler hit an exception" in x)
    log = tmp_path / "both.log"
    log.write_text(ready + "\n".join(failed[start:]) + "\n")
    facts = read_log(log)
    assert facts.launches_total == 2
    first, second = facts.launches
    assert first.outcome == "ready" and not first.errors
    assert second.outcome == "failed" and second.errors[0].kind == "startup_memory"
    assert diagnose(facts).diagnosed == 2


def test_stale_log_is_said_first(capsys):
    code, out, _ = run(
        capsys, "doctor", str(LOGS / "sglang_0_5_9_seed_085_fail.log"), "--gpu", "A6000",
        "--since", "2026-04-20 10:40",
    )  # fmt: skip
    first = out.splitlines()[0]
    assert first.startswith("STALE LOG: this launch started at 2026-04-20 10:02:05, before")
    assert out.count("stale log") == 0  # said once, up front, not again among the findings
