"""SGLang 0.5.9 profile (pip download --no-deps sglang==0.5.9)."""

from __future__ import annotations

from servefit.engines.sglang.v0_5_9.args import resolve_args
from servefit.engines.sglang.v0_5_9.pools import size_pools

ENGINE = "sglang"
VERSION = "0.5.9"

__all__ = ["ENGINE", "VERSION", "resolve_args", "size_pools"]
