"""SGLang 0.5.23 profile (pip download --no-deps sglang==0.5.23); docs/engines/sglang-0.5.23.md."""

from __future__ import annotations

from servefit.engines.sglang.flags import load_flags
from servefit.engines.sglang.v0_5_23.args import resolve_args
from servefit.engines.sglang.v0_5_23.pools import size_pools

ENGINE = "sglang"
VERSION = "0.5.23"
FLAGS = load_flags(VERSION)

__all__ = ["ENGINE", "FLAGS", "VERSION", "resolve_args", "size_pools"]
