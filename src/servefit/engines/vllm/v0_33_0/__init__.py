"""vLLM 0.33.0 profile (pip download --no-deps vllm==0.33.0); docs/engines/vllm-0.33.0.md.

The shared flow (profile.py: resolve.py, planning.py) with this release's rules (rules.py)."""

from __future__ import annotations

from servefit.engines.vllm.flags import load_flags
from servefit.engines.vllm.profile import ENGINE as ENGINE
from servefit.engines.vllm.profile import bind
from servefit.engines.vllm.profile import check_heads_divisible as check_heads_divisible
from servefit.engines.vllm.profile import memory_inputs as memory_inputs
from servefit.engines.vllm.profile import parallel_sizes as parallel_sizes
from servefit.engines.vllm.v0_33_0 import rules

VERSION = rules.VERSION
FLAGS = load_flags(VERSION)
resolve_args, size_pools = bind(rules)
