"""vLLM 0.30.0 profile (pip download --no-deps vllm==0.30.0); docs/engines/vllm-0.30.0.md.

The shared flow (profile.py: resolve.py, planning.py) with this release's rules (rules.py, a
diff against the previous profile's). PROFILE is built on first use: later profiles' rules
import this package for its rules class, and need not load its flag table."""

from __future__ import annotations

from functools import cache
from typing import Any

from servefit.engines.base import Profile


@cache
def _profile() -> Profile:
    from servefit.engines.vllm.profile import declare
    from servefit.engines.vllm.v0_30_0 import rules

    return declare(rules.RULES)


def __getattr__(name: str) -> Any:
    if name == "PROFILE":
        return _profile()
    raise AttributeError(name)
