"""`servefit doctor` on the log of each real start of the suite: one launch per start, the
engine release read from the log, the outcome, and for a failed start the engine's own error as
the root cause (its first exception line, or argparse's `error:` line)."""

from __future__ import annotations

import pytest

from tests.engine.live import CRASHING, FAILING, LAUNCHED, READY
from tests.engine.pool import EnginePool
from tests.engine.real import engine_error, servefit
from tools.engine_cases import CASES

pytestmark = pytest.mark.engine


def doctor(pool: EnginePool, name: str) -> dict:
    server = pool.serve(name)
    config = pool.model(name) / "config.json"
    return servefit("doctor", str(server.log_path), "-m", str(config), "--format", "json").json()


@pytest.mark.parametrize("name", READY)
def test_doctor_reads_one_ready_launch(engine_pool: EnginePool, name: str) -> None:
    report = doctor(engine_pool, name)
    assert report["launches_total"] == 1, report["launches"]
    launch = report["launch"]
    assert launch["engine"]["version"] == CASES[name].release
    assert launch["ready"] and launch["errors"] == []
    if name == LAUNCHED:  # started with an API key: vLLM prints it masked, doctor keeps that
        assert launch["args"]["api_key"] == "***"


@pytest.mark.parametrize("name", [*FAILING, CRASHING])
def test_doctor_names_the_engines_error(engine_pool: EnginePool, name: str) -> None:
    report = doctor(engine_pool, name)
    assert report["launches_total"] == 1, report["launches"]
    assert report["status"] == "failed"
    error = engine_error(engine_pool.serve(name).log_text())
    assert report["root_cause"]["error"]["message"] == error
    if "unknown-flag" in name:
        assert report["root_cause"]["kind"] == "arg_error"
    else:
        assert report["launch"]["engine"]["version"] == CASES[name].release
        assert report["root_cause"]["kind"] == "startup_memory"
