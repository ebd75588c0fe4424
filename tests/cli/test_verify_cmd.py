"""`servefit verify` as a user runs it, against the stand-in server (tests/standin/openai_server.py,
not an engine): the table and JSON, exit codes, one-line errors, no traceback on HTTP faults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clihelp import run
from tests.standin.openai_server import running

ROOT = Path(__file__).resolve().parents[2]


def test_healthy_json_exit_0(capsys):
    with running() as server:
        code, out, _ = run(capsys, "verify", server.url + "/v1", "--format", "json")
    report = json.loads(out)
    assert code == 0
    assert report["url"] == server.url and report["model"] == "stand-in"
    assert report["engine"] == "sglang"
    status = {c["name"]: c["status"] for c in report["checks"]}
    # speed may warn: the stand-in answers instantly, so its concurrency timing is noise.
    assert status.pop("speed") in ("pass", "warn")
    assert status.pop("reference") == "skip"  # no --reference
    assert set(status.values()) == {"pass"}


def test_seed_loop_table_exit_1(capsys):
    with running(behaviour="looping") as server:
        code, out, err = run(capsys, "verify", server.url)
    assert code == 1
    assert "NOT FIT" in out and "degenerate output" in out
    assert "FAIL degenerate output" in err  # progress lines go to stderr


def test_seed_bound_uses_the_measured_accept_length(capsys):
    with running(behaviour="looping") as server:
        code, out, _ = run(
            capsys,
            "verify",
            server.url,
            "--gpu",
            "A6000",
            "--tp",
            "2",
            "--config",
            "Qwen/Qwen3.6-27B",
            "--format",
            "json",
        )
    speed = next(c for c in json.loads(out)["checks"] if c["name"] == "speed")
    assert code == 1
    # Seed deployment: 23.87 GiB of weights read per rank per step at TP 2 (+ KV and GDN state,
    # ~0.15 GiB), 768 GB/s, x 4.00 accepted tokens per step (the loop's 100 %): ~119 tok/s.
    assert speed["data"]["bound_tok_s"] == pytest.approx(4 * 768e9 / (24.0 * 2**30), rel=0.01)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["verify", "localhost:30000"],
            "servefit: error: 'localhost:30000' is not an http:// or https:// URL",
        ),
        (
            ["verify", "http://127.0.0.1:9", "--gpu", "Z9000"],
            "servefit: error: unknown GPU 'Z9000'",
        ),
        (
            ["verify", "http://127.0.0.1:9", "--tp", "2"],
            "servefit: error: --config, --tp and --num-gpus describe the bound: give --gpu too",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(message)
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_http_fault_in_a_real_process_has_no_traceback():
    # Both sides as processes: the stand-in as `python -m`, servefit through its entry point.
    standin = subprocess.Popen(
        [sys.executable, "-m", "tests.standin.openai_server", "--behaviour", "drop_stream"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = ""
        for line in standin.stdout:  # the ready line, then the URL line
            if line.startswith("STANDIN_URL "):
                url = line.split()[1]
                break
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "from servefit.cli.main import main; main()",
                "verify",
                url,
                "--timeout",
                "2",
                "--format",
                "json",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        standin.terminate()
        standin.wait(timeout=10)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    report = json.loads(done.stdout)
    determinism = next(c for c in report["checks"] if c["name"] == "determinism")
    assert determinism["status"] == "fail"
    assert "closed the connection mid-response" in determinism["summary"]


def test_check_names_match_the_checks():
    # --help lists the names without importing the checks; the two lists must not drift.
    from servefit.cli.verify_cmd import CHECK_NAMES
    from servefit.verify.checks import CHECKS

    assert tuple(c.name for c in CHECKS) == CHECK_NAMES


def test_skip_a_check(capsys):
    with running(behaviour="xml_tools") as server:
        code, out, _ = run(capsys, "verify", server.url, "--skip", "tools", "--format", "json")
    tools = next(c for c in json.loads(out)["checks"] if c["name"] == "tools")
    assert (tools["status"], tools["summary"]) == ("skip", "skipped with --skip")
    assert code == 0  # the XML tool call would have failed it
