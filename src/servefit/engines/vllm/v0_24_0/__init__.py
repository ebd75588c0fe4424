"""vLLM 0.24.0 profile (pip download --no-deps vllm==0.24.0); docs/engines/vllm-0.24.0.md.

The shared flow (profile.py: resolve.py, planning.py) with this release's rules (rules.py)."""

from __future__ import annotations

from servefit.engines.vllm.profile import ENGINE as ENGINE
from servefit.engines.vllm.profile import declare
from servefit.engines.vllm.v0_24_0 import rules

PROFILE = declare(rules)
VERSION = PROFILE.version
FLAGS = PROFILE.flags
resolve_args, size_pools = PROFILE.resolve_args, PROFILE.size_pools
