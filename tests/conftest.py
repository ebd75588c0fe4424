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
