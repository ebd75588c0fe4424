"""SGLang 0.5.12 profile (pip download --no-deps sglang==0.5.12); docs/engines/sglang-0.5.12.md.

The shared flow (engines/sglang/flow/) with this release's rules (rules.py)."""

from __future__ import annotations

from servefit.engines.sglang.flow.declare import declare
from servefit.engines.sglang.profile import ENGINE as ENGINE
from servefit.engines.sglang.v0_5_12.rules import RULES, VERSION

PROFILE = declare(RULES)
FLAGS = PROFILE.flags
resolve_args, size_pools = PROFILE.resolve_args, PROFILE.size_pools

__all__ = ["ENGINE", "FLAGS", "PROFILE", "RULES", "VERSION", "resolve_args", "size_pools"]
