"""The seed case (README.md): Qwen3.6-27B, 2x RTX A6000, SGLang 0.5.9, MTP.

Fixtures in tests/doctor/logs/ (how they were assembled: build_seed_logs.py): the 0.85 launch that
dies with "Not enough memory", and the 0.88 / 16 / 0.5 launch that starts, accepts every draft
token while looping, and whose log ends after the first request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log

LOGS = Path(__file__).parent / "logs"
FAIL = LOGS / "sglang_0_5_9_seed_085_fail.log"
SERVE = LOGS / "sglang_0_5_9_seed_088_serve.log"
CMD_088 = (
    "nohup /root/ml-env/bin/python3 -m sglang.launch_server --model-path /root/models/Qwen3.6-27B --port 30000 "
    "--host 0.0.0.0 --tp-size 2 --mem-fraction-static 0.88 --context-length 32768 --max-running-requests 16 "
    "--mamba-full-memory-ratio 0.5 --reasoning-parser qwen3 --tool-call-parser qwen3_coder "
    "--speculative-algo NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
    "--speculative-num-draft-tokens 4 > /root/sglang-serve.log 2>&1 &"
)
CMD_085 = CMD_088.replace("--mem-fraction-static 0.88", "--mem-fraction-static 0.85").replace(
    " --max-running-requests 16 --mamba-full-memory-ratio 0.5", ""
)


@pytest.fixture(scope="module")
def fail_report():
    return diagnose(read_log(FAIL), gpu="A6000", command=CMD_085)


def test_085_root_cause_names_memory_consumer_and_flags(fail_report):
    r = fail_report
    assert r.status == "failed" and r.root_cause.kind == "startup_memory"
    assert r.root_cause.error.message == (
        "RuntimeError: Not enough memory. Please try to increase "
        "--mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.85"
    )
    # the engine sizes with the min over ranks: TP0's 46.93 GiB free, 46.93 - 21.44 = 25.49 GiB weights
    assert r.replay.measured_free_before_gib == 46.93
    assert r.replay.measured_weights_gib == pytest.approx(25.49)
    # budget = (46.93 - 25.49) - 46.93 x (1 - 0.85) = 21.44 - 7.0395 = 14.40 GiB (hand arithmetic)
    assert "14.40 GiB was left" in r.root_cause.summary
    # 48 requests (reset by speculative decoding) x 4 draft tokens x 76,972,032 B = 13.76 GiB
    assert r.root_cause.consumer == "speculative mamba state"
    assert "13.76 GiB" in r.root_cause.detail
    assert r.root_cause.flags[0] == "--max-running-requests"


def test_085_fix_is_replanned_on_measured_memory_and_rewrites_the_command(fail_report):
    fix = fail_report.fix
    assert fix.source == "replay"
    best = fix.best.changes[0]
    assert (best.arg, best.old) == ("max_running_requests", 48)
    assert 0 < best.new < 48
    assert fix.best.kv_tokens >= 32768  # one full-length request fits
    assert fix.best.free_after_pools_gib >= 1.0
    assert f"--max-running-requests {best.new}" in fix.command
    assert "--mem-fraction-static 0.85" in fix.command and fix.command.startswith(
        "python -m sglang.launch_server"
    )


def test_085_findings_reset_and_radix(fail_report):
    codes = {f.code for f in fail_report.findings}
    assert {"max_running_requests_reset", "radix_cache_disabled"} <= codes
    assert "command_mismatch" not in codes  # the log is the 0.85 launch of --command


def test_stale_log_against_the_088_command():
    r = diagnose(read_log(FAIL), gpu="A6000", command=CMD_088, since="2026-04-20 10:40")
    by = {f.code: f for f in r.findings}
    assert (
        "started at 2026-04-20 10:02:05, before --since 2026-04-20 10:40:00"
        in by["stale_log"].detail
    )
    assert (
        "mem_fraction_static: 0.85 in the log, 0.88 in --command" in by["command_mismatch"].detail
    )
    # the 0.88 command, re-planned with this log's measured memory, starts
    assert by["command_replay"].title.endswith(": starts")
    assert (
        r.fix is not None and r.fix.command is None
    )  # never rewrite a command the log is not from


@pytest.fixture(scope="module")
def serve_report():
    return diagnose(read_log(SERVE), gpu="A6000", command=CMD_088)


def test_088_starts_and_replay_matches_the_logged_pools(serve_report):
    r = serve_report
    ln = r.launch
    assert ln.outcome == "ready" and r.root_cause is None
    assert ln.pools.max_mamba_cache_size == 16 and ln.pools.max_running_requests == 16
    assert [x.draft_weights_gib for x in ln.ranks] == [
        0.44,
        0.44,
    ]  # the NEXTN draft's own load, not a new launch
    assert r.launches_total == 1
    assert not any(c.flagged for c in r.replay.checks)
    assert "reset" not in " ".join(
        f.code for f in r.findings
    )  # --max-running-requests was explicit


def test_088_findings_loop_and_stop_after_first_request(serve_report):
    by = {f.code: f for f in serve_report.findings}
    acc = by["mtp_suspicious_acceptance"]
    assert acc.numbers["accept_len_mean"] == 4.0 and acc.numbers["samples"] == 12
    assert "stopped_after_first_request" in by
    assert by["flag_without_effect"].title.startswith("--mamba-full-memory-ratio 0.5")
    assert (
        serve_report.launch.traffic.http_requests == 1
    )  # the warm-up /generate before "fired up" is not counted


def test_two_launches_in_one_file_diagnoses_the_latest(tmp_path):
    mixed = tmp_path / "sglang-serve.log"
    mixed.write_text(FAIL.read_text() + SERVE.read_text())
    r = diagnose(read_log(mixed), gpu="A6000")
    assert r.launches_total == 2 and r.diagnosed == 2
    assert [x.outcome for x in r.launches] == ["failed", "ready"]
    assert "the file holds 2 launches" in r.notes


def test_cut_log_diagnoses_the_latest_complete_launch(tmp_path):
    lines = SERVE.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.log"
    cut.write_text(FAIL.read_text() + "".join(lines[:12]) + lines[12][:40])
    r = diagnose(read_log(cut), gpu="A6000")
    assert r.diagnosed == 1 and r.status == "failed"
    assert any("has no outcome" in n for n in r.notes)
    assert any("ends in the middle of a line" in n for n in r.notes)
