"""What no plan may say, whatever an engine profile computed: the planner's last checks.

Engine profiles mirror each release's arithmetic, and that arithmetic can leave numbers that no
GPU can hold. Three rules turn them into what actually happens on the GPU, for every engine and
release at once:

1. Weights larger than the memory free before loading: the engine dies loading them, with the
   allocator's out-of-memory error, before it profiles anything: nothing else is allocated (the
   pools keep the arithmetic the release would apply, for explain's levers).
2. A plan that starts but whose allocations (weights, KV and state pools, req_to_token, draft
   weights and KV) exceed what was free before loading: the allocation that crosses the line
   fails with the same out-of-memory error. SGLang 0.5.9's SWAKVPool, for one, allocates every
   layer on every pipeline stage (mem_cache/swa_memory_pool.py:SWAKVPool.__init__ takes the
   model's full layer id lists) from a token count profiled for one stage's layers.
3. Counts are never negative: slots, tokens, blocks and running requests of a pool the engine
   never allocated are 0, and so are the GiB of an allocation that did not happen. Budgets may
   stay negative: "short by" is their meaning.

Throughout, one rank's rows partition its GPU: the allocations, the memory outside torch and
the CUDA graphs, what was in use before loading (total - pre_load_free) and free_gib add up
to total_gib. An allocation set to 0 here gives its memory back to free_gib.
"""

from __future__ import annotations

from dataclasses import replace
from operator import attrgetter

from servefit._plan.schema import PerRank, Pools
from servefit.engines.base import MemoryInputs, Sizing
from servefit.hardware.spec import GPUSpec

# Allocation order on one rank (model_runner.py: load_model, then init_memory_pool, then the
# draft worker's own load and pool): the first that crosses the free memory is the one that
# fails. (PerRank field, consumer name)
_ALLOCATIONS = (
    ("weights_gib", "weights"),
    ("kv_cache_gib", "kv cache"),
    ("mamba_state_gib", "mamba state pool"),
    ("spec_state_gib", "speculative mamba state"),
    ("req_to_token_gib", "req_to_token"),
    ("draft_weights_gib", "draft weights"),
    ("draft_kv_gib", "draft kv cache"),
)
_COUNTS = (
    "max_total_num_tokens",
    "max_mamba_cache_size",
    "mamba_slots_per_request",
    "spec_state_slots",
    "effective_max_running_requests",
    "max_concurrency_at_context",
    "num_blocks",
    "mamba_blocks",
    "max_concurrency",
    "kv_bytes_per_token",
    "mamba_state_bytes_per_request",
    "conv_state_bytes_per_request",
    "ssm_state_bytes_per_request",
)
# Rounding in the profiles' GiB arithmetic, not a real shortfall.
_SLACK_GIB = 1e-6


def out_of_memory_text(gpu: GPUSpec, what: str) -> str:
    """The caching allocator's error (torch/cuda/memory.py; "HIP" on ROCm builds)."""
    backend = "HIP" if gpu.vendor.lower() == "amd" else "CUDA"
    return f"torch.OutOfMemoryError: {backend} out of memory {what}"


def weights_do_not_fit(memory: MemoryInputs, gpu: GPUSpec) -> tuple[str, str, str] | None:
    """Rule 1: (error, consumer, detail) when the weights alone exceed the free memory."""
    if memory.weights_gib <= memory.pre_load_free_gib + _SLACK_GIB:
        return None
    detail = (
        f"weights take {memory.weights_gib:.2f} GiB per GPU but only "
        f"{memory.pre_load_free_gib:.2f} GiB is free before they load"
    )
    return out_of_memory_text(gpu, "while loading the weights"), "weights", detail


def allocations_exceed(per_rank: PerRank, gpu: GPUSpec) -> tuple[str, str, str] | None:
    """Rule 2: (error, consumer, detail) when a plan's allocations exceed the free memory."""
    free = per_rank.pre_load_free_gib
    used = 0.0
    for field, consumer in _ALLOCATIONS:
        gib = max(getattr(per_rank, field), 0.0)
        used += gib
        if used > free + _SLACK_GIB and gib > 0:
            detail = (
                f"{consumer} takes {gib:.2f} GiB after {used - gib:.2f} GiB already allocated; "
                f"{free:.2f} GiB was free before the weights loaded (short by {used - free:.2f} GiB)"
            )
            return out_of_memory_text(gpu, f"allocating the {consumer}"), consumer, detail
    return None


_allocations = attrgetter(*(f for f, _ in _ALLOCATIONS))
_counts = attrgetter(*_COUNTS)

# What vLLM keeps besides its pools (PerRank): nothing of it exists when the weights fail to load.
_OUTSIDE_POOLS = ("non_torch_gib", "graphs_gib", "activation_gib")


def clamp(per_rank: PerRank, pools: Pools) -> tuple[PerRank, Pools]:
    """Rule 3: negative counts and negative allocations become 0; a negative allocation was
    counted in free_gib (pre-load free less the allocations), so free_gib loses it too."""
    if min(_allocations(per_rank)) >= 0 and not any(
        v is not None and v < 0 for v in _counts(pools)
    ):  # the plans that need nothing clamped: every one but a few, read in two C calls
        return per_rank, pools
    rank_fix: dict[str, float] = {f: 0.0 for f, _ in _ALLOCATIONS if getattr(per_rank, f) < 0}
    if rank_fix:
        given_back = sum(getattr(per_rank, f) for f in rank_fix)
        rank_fix["free_gib"] = per_rank.free_gib + given_back
    pool_fix = {
        f: 0 if isinstance(getattr(pools, f), int) else 0.0
        for f in _COUNTS
        if getattr(pools, f) is not None and getattr(pools, f) < 0
    }
    return (
        per_rank.model_copy(update=rank_fix) if rank_fix else per_rank,
        pools.model_copy(update=pool_fix) if pool_fix else pools,
    )


def possible(sizing: Sizing, memory: MemoryInputs, gpu: GPUSpec) -> Sizing:
    """Rules 1 and 2 applied to a profile's Sizing: the first allocation that cannot happen
    is the plan's failure, whatever the profile's own verdict (loading comes first)."""
    no_room = weights_do_not_fit(memory, gpu)
    if no_room is not None:
        error, consumer, detail = no_room
        loaded = {f: 0.0 for f, _ in _ALLOCATIONS[1:]} | dict.fromkeys(_OUTSIDE_POOLS, 0.0)
        per_rank = sizing.per_rank.model_copy(
            update={**loaded, "free_gib": memory.pre_load_free_gib - memory.weights_gib}
        )
        return replace(
            sizing, per_rank=per_rank, error=error, error_consumer=consumer, error_detail=detail
        )
    if sizing.error is None:
        crossed = allocations_exceed(sizing.per_rank, gpu)
        if crossed is not None:
            error, consumer, detail = crossed
            return replace(sizing, error=error, error_consumer=consumer, error_detail=detail)
    return sizing
