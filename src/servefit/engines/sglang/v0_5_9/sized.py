"""What one SGLang 0.5.9 start-up computes while sizing its pools (pools.py fills it, logs.py
prints it)."""

from __future__ import annotations

from dataclasses import dataclass

from servefit.engines.sglang import common


@dataclass
class Sized:
    """Everything one 0.5.9 start-up computes, in the engine's order (GiB unless named _bytes)."""

    pre: float  # min free memory before weights (total_gpu_memory in profile_max_num_token)
    avail: float  # free after weights
    reserved: float  # pre x (1 - mem_fraction_static)
    budget: float  # rest_memory before handle_max_mamba_cache
    cell: int  # KV bytes per token
    kv_dtype: str
    cost: common.StateCost | None = None
    spec_reserved: float = 0.0
    mamba_reserved: float = 0.0
    K: int | None = None
    sizing: str | None = None
    rest: float = 0.0  # KV budget after the state reservations
    tokens: int = 0
    ratio: int | None = None
    max_num_reqs: int = 0  # req_to_token pool size (R)
    eff: int = 0  # effective max_running_requests
    cap_reason: str = ""
    error: str | None = None
    consumer: str | None = None
    detail: str | None = None
    D: int = 0
    kv_bytes: int = 0
    mamba_bytes: int = 0
    spec_bytes: int = 0
    req_to_token_bytes: int = 0
    draft_kv_bytes: int = 0
    swa_tokens: int | None = None  # sliding-window layers' pool (hybrid SWA models)
    pool_end: float = 0.0  # "Memory pool end. avail mem"
    free_after: float = 0.0  # after the draft model too

    @property
    def slots(self) -> int:
        """K (max_mamba_cache_size), read once pools.py has sized the state pool."""
        if self.K is None:
            raise ValueError("the mamba state pool is not sized yet")
        return self.K

    @property
    def per_req(self) -> int:
        return self.cost.per_req if self.cost else 0
