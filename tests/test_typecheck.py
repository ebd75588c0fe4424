"""mypy is clean on the core (the files and strictness in pyproject.toml [tool.mypy]).

CI runs `mypy` too (.ci/run); this test makes the default suite catch a type error before a
change lands. mypy is in the `test` extra, so a missing mypy fails here rather than skipping.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_core_is_in_the_mypy_scope() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    files = set(config["files"])
    for core in ("model", "engines", "_plan", "_explain", "_fit"):
        assert f"src/servefit/{core}" in files, core
    assert config["check_untyped_defs"] and config["disallow_incomplete_defs"]
    assert "ignore_errors" not in config
    for override in config.get("overrides", []):
        assert "ignore_errors" not in override, override


def test_mypy_is_clean_on_the_core() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
