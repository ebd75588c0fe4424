"""verify is bounded: against every kind of misbehaving server (tests/verify/misbehaving.py) it
ends within its deadline, with a clear FAIL that names what the server did, in bounded memory."""

from __future__ import annotations

import resource
import time

import pytest

from servefit.verify.checks import CHECKS
from servefit.verify.checks.base import VerifyOptions
from servefit.verify.client import MAX_BODY_BYTES
from servefit.verify.runner import verify
from tests.verify.misbehaving import MisbehavingServer

# Short requests and a short run: what the server does decides the outcome, not patience.
OPTIONS = dict(
    timeout_s=2.0,
    deadline_s=40.0,
    max_tokens=64,
    short_max_tokens=32,
    speed_max_tokens=32,
    concurrency=(1, 2),
)
# The runner's grace after a check's deadline, plus room for a loaded machine.
SLACK_S = 10.0


def run(mode: str, **options) -> tuple[object, float]:
    with MisbehavingServer(mode) as server:
        started = time.monotonic()
        report = verify(server.url, VerifyOptions(**{**OPTIONS, **options}))
        return report, time.monotonic() - started


def reasons(report) -> str:
    return " | ".join(f"{c.name}: {c.status}: {c.summary}" for c in report.checks)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "drip",
            {
                "determinism": "no complete response within 2 s",
                "degenerate": "no data event for 2 s",
            },
        ),
        (
            "keepalive",
            {
                "determinism": "no complete response within 2 s",
                "degenerate": "only keep-alive comments or dripped bytes",
            },
        ),
        (
            "no_newline",
            {
                "degenerate": "a stream line longer than 1,048,576 bytes",
                "determinism": "larger than",
            },
        ),
        ("gzip_bomb", {"liveness": f"larger than {MAX_BODY_BYTES:,} bytes (decompressed)"}),
        (
            "ignore_max",
            {
                "speed": "does not stop at max_tokens",
                "determinism": "does not stop at max_tokens",
            },
        ),
        ("looping", {"degenerate": "LOOP", "speed": "loops"}),
        ("malformed_json", {"determinism": "not JSON", "degenerate": "not JSON"}),
        (
            "wrong_type",
            {"determinism": "not JSON", "degenerate": "not a stream of server-sent events"},
        ),
        ("error_500", {"determinism": "HTTP 500", "degenerate": "HTTP 500"}),
        ("reset", {"determinism": "POST /v1/chat/completions"}),
        ("reset_all", {"liveness": "GET /v1/models"}),
    ],
)
def test_every_misbehaviour_ends_in_time_with_a_clear_fail(mode, expected):
    # the checks that meet the fault; the others would meet it again, for time only
    skip = tuple(c.name for c in CHECKS if c.name not in expected and c.name != "liveness")
    report, took = run(mode, skip=skip)
    assert took < OPTIONS["deadline_s"] + SLACK_S, reasons(report)
    assert not report.ok
    for failing, needle in expected.items():
        check = report.check(failing)
        assert check.status == "fail", reasons(report)
        assert needle in check.summary + " ".join(check.evidence), reasons(report)
        assert "\n" not in check.summary


def test_the_healthy_mode_is_served():
    """The harness itself: a well-behaved answer passes liveness and determinism."""
    report, _ = run("healthy")
    assert report.check("liveness").status == "pass", reasons(report)
    assert report.check("determinism").status == "pass", reasons(report)


@pytest.mark.parametrize("mode", ["keepalive", "drip"])
def test_the_deadline_holds_even_with_a_patient_timeout(mode):
    """--timeout 120 would let a keep-alive stream run for minutes per request: the run still
    ends at its deadline, the check busy at that moment failed, the rest not run."""
    report, took = run(mode, timeout_s=120.0, deadline_s=6.0)
    assert took < 6.0 + SLACK_S, reasons(report)
    assert not report.ok
    statuses = [c.status for c in report.checks]
    assert "fail" in statuses


def test_a_gzip_bomb_does_not_fill_memory():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    report, _ = run("gzip_bomb")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert report.check("liveness").status == "fail"
    assert grown_mib < 3 * MAX_BODY_BYTES / 2**20, f"grew {grown_mib:.0f} MiB"
