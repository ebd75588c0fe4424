"""`servefit doctor` as a user runs it: exit codes, JSON, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clihelp import run

LOGS = Path(__file__).resolve().parents[1] / "doctor" / "logs"


def test_failed_launch_json(capsys):
    code, out, _ = run(
        capsys,
        "doctor",
        str(LOGS / "sglang_0_5_9_seed_085_fail.log"),
        "--gpu",
        "A6000",
        "--format",
        "json",
    )
    report = json.loads(out)
    assert code == 1 and report["status"] == "failed"
    assert report["root_cause"]["consumer"] == "speculative mamba state"
    assert report["fix"]["best"]["changes"][0]["arg"] == "max_running_requests"


def test_table_output_names_the_root_cause(capsys):
    code, out, _ = run(
        capsys, "doctor", str(LOGS / "sglang_0_5_9_seed_085_fail.log"), "--gpu", "A6000"
    )
    assert (
        code == 1
        and "Root cause: not enough memory at start-up" in out
        and "speculative mamba state" in out
    )


@pytest.mark.parametrize(
    "argv,message",
    [
        (["doctor", "/nonexistent/x.log"], "servefit: error: no such log file: /nonexistent/x.log"),
        (["doctor", str(LOGS), "--gpu", "A6000"], "is a directory, not a log file"),
        (
            ["doctor", str(LOGS / "sglang_0_5_9_seed_085_fail.log"), "--since", "yesterday-ish"],
            "--since 'yesterday-ish'",
        ),
        (
            ["doctor", str(LOGS / "sglang_0_5_9_seed_085_fail.log"), "--command", "ls -la"],
            "not an SGLang or vLLM launch",
        ),
    ],
)
def test_bad_input_is_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_file_with_no_engine_lines(capsys, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello\nworld\n")
    code, out, _ = run(capsys, "doctor", str(f), "--format", "json")
    assert code == 1 and json.loads(out)["status"] == "no-launch"
