"""Suite-wide fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_installed_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans without a release use the engine installed in the running Python environment
    (engines/registry.py:select): the suite pins "none installed" so that it does not depend
    on the environment it runs in. Tests of that default monkeypatch it back."""
    from servefit.engines import registry

    monkeypatch.setattr(registry, "installed_version", lambda engine: None)


@pytest.fixture(autouse=True)
def _terminal_width_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's width is the user's terminal, else COLUMNS, else wide (report/console.py:
    make_console). pytest-xdist's workers run with COLUMNS=80: unset it, as in a plain run,
    so that `pytest -n N` prints what `pytest` does. Tests of a width set their own."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _calibration_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """`servefit doctor` records what a log measured and plans use it (servefit/calibration):
    every test gets an empty store of its own, so no test plans with another's recording and
    none writes to the user's. Tests of the store read SERVEFIT_CALIBRATION_DIR."""
    monkeypatch.setenv("SERVEFIT_CALIBRATION_DIR", str(tmp_path_factory.mktemp("calibration")))
