"""The numbers of one SGLang sizing pass, in the engine's order (pools.py fills them, logs.py
prints them). All per rank; GiB unless named *_bytes or counted in tokens / slots."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.engines.base import MemoryInputs
from servefit.engines.sglang import common
from servefit.engines.sglang.common import gib
from servefit.frozen import frozen
from servefit.model.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.sglang.flow.swa import Geometry, Split


@frozen
class Layout:
    """What one rank holds of the model, as the pool configurator sees it
    (pool_configurator.py:DefaultPoolConfigurator.__init__)."""

    attn_tp: int
    page: int
    ctx: int
    kv_dtype: str  # servefit's name of the KV cache dtype (common.KV_DTYPES)
    num_layers: int  # full-attention layers of the PP stage with the most of them
    stage_mamba: int  # recurrent layers of the PP stage with the most of them
    stage_scale: float  # that stage's share of the recurrent layers
    target_cell: int  # KV bytes per token of the target's layers
    cell: int  # bytes per token the budget is divided by (draft KV layers included)
    eagle: bool  # EAGLE / EAGLE3 / STANDALONE
    draft_layers: int | None  # draft KV layers counted inside the budget (None: not counted)
    D: int  # speculative_num_draft_tokens (0 without speculative decoding)
    cost: common.StateCost | None  # recurrent state per request (None: no recurrent layers)


@frozen
class Budget:
    """_profile_available_bytes and _handle_max_mamba_cache: the memory split before the KV pool."""

    P: float  # free memory before the weights (pre_model_load_memory)
    avail: float  # free after the weights (and the draft weights)
    slack: float  # P x (1 - mem_fraction_static)
    mm_gib: float  # multimodal reservation
    budget: float  # rest_memory before the state pool
    per_req: int = 0  # recurrent state bytes per request on this stage
    K: int | None = None  # max_mamba_cache_size
    ratio: int | None = None  # state slots per running request
    sizing: str | None = None  # how K was chosen, in words
    spec_reserved: float = 0.0  # intermediate state reserved inside the budget
    mamba_reserved: float = 0.0
    rest: float = 0.0  # KV budget after the state pool
    error: str | None = None
    error_kind: str | None = None  # "budget" | "mamba"


@frozen
class Tokens:
    """The KV pool's token count (calculate_pool_sizes, _apply_token_constraints)."""

    tokens: int
    cell: int  # bytes per token the budget was divided by
    split: Split | None = None  # the full / SWA split of a hybrid SWA model
    geo: Geometry | None = None
    error: str | None = None
    error_kind: str | None = None
    logs: tuple[str, ...] = ()


@frozen
class Requests:
    """KVCacheConfigurator.resolve_max_num_reqs."""

    R: int = 0
    cap_reason: str = ""
    error: str | None = None
    error_kind: str | None = None
    logs: tuple[str, ...] = ()


@frozen
class Allocations:
    """Bytes each pool allocates (mem_cache/memory_pool.py)."""

    kv: int = 0
    k: int = 0
    v: int = 0
    conv: int = 0
    ssm: int = 0
    iss: int = 0  # intermediate_ssm_state_cache
    icw: int = 0  # intermediate_conv_window_cache
    req_to_token: int = 0
    draft_kv: int = 0
    # a hybrid SWA model's SWAKVPool lines: (target, draft)
    kv_lines: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    kv_formula: str | None = None

    @property
    def mamba(self) -> int:
        return self.conv + self.ssm

    @property
    def target(self) -> int:
        """What the target's pools allocate (the draft's KV pool comes after)."""
        return self.kv + self.mamba + self.iss + self.icw + self.req_to_token


@frozen
class Pass:
    """One sizing pass from the resolved args to what the pools allocate."""

    model: ModelSpec
    v: dict[str, Any]
    memory: MemoryInputs
    lay: Layout
    b: Budget
    tok: Tokens
    reqs: Requests
    alloc: Allocations
    error: str | None
    error_kind: str | None
    notes: tuple[str, ...]  # the engine's warnings while sizing, in order

    @property
    def tokens(self) -> int:
        return self.tok.tokens

    @property
    def R(self) -> int:
        return self.reqs.R

    @property
    def pool_end(self) -> float:
        """ "Memory pool end. avail mem" after the target's pools."""
        return self.b.avail - gib(self.alloc.target)

    @property
    def free_after(self) -> float:
        """Free memory after the draft model's KV pool too."""
        return self.pool_end - gib(self.alloc.draft_kv)
