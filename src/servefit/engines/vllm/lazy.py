"""The PROFILE of a vLLM profile package (v0_10_0/ ... v0_33_0/), declared on first use.

Later profiles' rules subclass earlier ones, so importing a profile package must stay cheap:
its flag table and architecture lists load only when the registry asks for its PROFILE. Each
package's __init__ is its docstring and `__getattr__ = profile_getattr(__name__)` (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

from servefit.engines.base import Profile


@cache
def declared(package: str) -> Profile:
    """The shared flow (profile.py: resolve.py, planning.py) with `package`'s rules.py."""
    from servefit.engines.vllm.profile import declare

    return declare(importlib.import_module(f"{package}.rules").RULES)


def profile_getattr(package: str) -> Callable[[str], Any]:
    """A module __getattr__ that answers PROFILE for `package`."""

    def __getattr__(name: str) -> Any:
        if name == "PROFILE":
            return declared(package)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
