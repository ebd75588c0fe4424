"""SGLang 0.5.23 profile (pip download --no-deps sglang==0.5.23); docs/engines/sglang-0.5.23.md."""

from __future__ import annotations

from servefit.engines.base import LogFeature
from servefit.engines.sglang.profile import declare
from servefit.engines.sglang.v0_5_23.args import resolve_args
from servefit.engines.sglang.v0_5_23.pools import size_pools

ENGINE = "sglang"
VERSION = "0.5.23"

PROFILE = declare(
    VERSION,
    resolve_args=resolve_args,
    size_pools=size_pools,
    # arg_groups/fields: the decode CUDA-graph cap and the mamba radix-cache strategy
    renames={
        "cuda_graph_max_bs": "cuda_graph_max_bs_decode",
        "mamba_scheduler_strategy": "mamba_radix_cache_strategy",
    },
    log_format=frozenset(
        {
            LogFeature.ARGS_MAMBA_RADIX_CACHE_STRATEGY,
            LogFeature.LOAD_END_QUANT,
            LogFeature.KV_ALLOCATED_DTYPE,
        }
    ),
)
FLAGS = PROFILE.flags

__all__ = ["ENGINE", "FLAGS", "PROFILE", "VERSION", "resolve_args", "size_pools"]
