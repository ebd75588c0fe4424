"""The memory SGLang profiles and the recurrent-state pool it carves out before the KV pool.

Mirrors (0.5.23) sglang/srt/mem_cache/kv_cache_configurator.py:KVCacheConfigurator:
_profile_available_bytes, mm_runtime_reservation_gb, _calculate_mamba_ratio and
_handle_max_mamba_cache. See docs/engines/sglang-0.5.23.md §5.
"""

from __future__ import annotations

import math
from typing import Any

from servefit.engines.base import MemoryInputs
from servefit.engines.sglang.flow.heuristics import is_multimodal
from servefit.engines.sglang.flow.records import Budget, Layout
from servefit.engines.sglang.flow.rules import Rules
from servefit.evolve import evolve
from servefit.model.spec import ModelSpec
from servefit.units import GiB

# kv_cache_configurator.py module constants (0.5.23)
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3
MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP = 1
MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER = 1


def _truthy(env: dict[str, str], name: str) -> bool:
    return env.get(name, "").lower() in ("1", "true", "yes")


def mamba_ratio(v: dict[str, Any], env: dict[str, str], rules: Rules) -> int:
    """KVCacheConfigurator._calculate_mamba_ratio: 1 radix off; 3 no_buffer; extra_buffer
    +2 with the overlap schedule, +1 without it or when lazy (allocation_sizing.py:
    get_mamba_tracking_slots). The skip-decode-lock variant only where the release reads it."""
    if v["disable_radix_cache"]:
        return 1
    skip = rules.skip_decode_lock_ratio and _truthy(env, "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK")
    base = MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO - (
        MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP if skip else 0
    )
    strategy = v["mamba_radix_cache_strategy"]
    if strategy in ("extra_buffer", "extra_buffer_lazy"):
        return base + (
            1 if strategy == "extra_buffer_lazy" else 2 if not v["disable_overlap_schedule"] else 1
        )
    return base + (MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER if skip else 0)


def mm_reservation_mib(
    model: ModelSpec, v: dict[str, Any], env: dict[str, str], rules: Rules
) -> int:
    """kv_cache_configurator.py:mm_runtime_reservation_gb (in MiB): SGLANG_VLM_CACHE_SIZE_MB (100)
    + SGLANG_MM_FEATURE_CACHE_MB (1024) for the cuda_ipc / cuda_vmm feature transports."""
    if not rules.mm_reservation or not is_multimodal(model, v, rules):
        return 0
    mb = int(env.get("SGLANG_VLM_CACHE_SIZE_MB", 100))
    if v["mm_feature_transport"] in ("cuda_ipc", "cuda_vmm"):
        mb += int(env.get("SGLANG_MM_FEATURE_CACHE_MB", 1024))
    return mb


def profile_available(
    model: ModelSpec,
    v: dict[str, Any],
    memory: MemoryInputs,
    lay: Layout,
    env: dict[str, str],
    rules: Rules,
) -> Budget:
    """_profile_available_bytes + _handle_max_mamba_cache (GiB in, GiB out)."""
    P = memory.pre_load_free_gib
    # Scheduler.init_model_worker loads the draft before init_memory_pools (draft weights are
    # resident) where rules.draft_before_pools; before, the draft loads after the pools.
    draft = memory.draft_weights_gib if rules.draft_before_pools else 0.0
    avail = P - memory.weights_gib - draft
    slack = P * (1 - v["mem_fraction_static"])
    mm = mm_reservation_mib(model, v, env, rules) / 1024 if rules.mm_reservation else 0.0
    budget = avail - slack - mm
    b = Budget(P=P, avail=avail, slack=slack, mm_gib=mm, budget=budget, rest=budget)
    if lay.cost is not None:
        b = state_pool(b, v, lay, env, rules)
        if b.error:
            return b
    if rules.budget_error and b.rest <= 0:
        minimum = 1 - avail / P
        suggested = math.ceil(minimum * 1000) / 1000
        b = evolve(
            b,
            error=(
                f"ValueError: Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={v['mem_fraction_static']}. Raise --mem-fraction-static "
                f"above {suggested:.3f} (minimum viable = 1 - available/pre = {minimum:.4f}). If "
                f"using speculative decoding, draft weights are now counted."
            ),
            error_kind="budget",
        )
    return b


def requested_per_worker(v: dict[str, Any], rules: Rules) -> int:
    """max_running_requests // attn_dp_size, floored at 1 where the release does (Rules.mrr_floor_one)."""
    share = v["max_running_requests"] // v["attn_dp_size"]
    return max(1, share) if rules.mrr_floor_one else share


def state_pool(
    b: Budget, v: dict[str, Any], lay: Layout, env: dict[str, str], rules: Rules
) -> Budget:
    """_handle_max_mamba_cache: the state slots (K) and what they and the speculative
    intermediate state take out of the budget (Rules.spec_reserve: with or without the pools'
    +1 padding slot)."""
    assert lay.cost is not None
    # stage_per_req: the largest per-PP-stage share (Rules.stage_state_share)
    per_req = int(lay.cost.per_req * (lay.stage_scale if rules.stage_state_share else 1.0))
    ratio = mamba_ratio(v, env, rules)
    if rules.spec_reserve == "upfront":
        return upfront_state_pool(b, v, lay, per_req, ratio)
    pad = 1 if rules.spec_reserve == "joint_padded" else 0
    dp = v["attn_dp_size"]
    D = lay.D
    reserves_spec = v["speculative_algorithm"] is not None and not (
        rules.pd_prefill_skips_spec_state and v["disaggregation_mode"] == "prefill"
    )
    spec = 0.0
    if v["max_mamba_cache_size"] is not None:  # (A)
        K = v["max_mamba_cache_size"] // dp
        sizing = "explicit --max-mamba-cache-size"
        if reserves_spec:
            capped = min(requested_per_worker(v, rules), K // ratio)
            spec = per_req * (capped + pad) * D / GiB
    elif v["disable_radix_cache"] and v["max_running_requests"] is not None:  # (B)
        K = requested_per_worker(v, rules)
        sizing = "max_running_requests (radix cache disabled)"
        if reserves_spec:
            spec = per_req * (K + pad) * D / GiB
    else:  # (C) ratio auto-fit
        r = v["mamba_full_memory_ratio"]
        budget_bytes = b.budget * r / (1 + r) * GiB
        sizing = f"mamba_full_memory_ratio {r}: rest x {r}/(1+{r})"
        if reserves_spec:
            K = int((budget_bytes - pad * per_req * (1 + D)) // (per_req * (1 + D / ratio)))
            capped = min(requested_per_worker(v, rules), K // ratio)
            spec = per_req * (capped + pad) * D / GiB
        else:
            K = int((budget_bytes - pad * per_req) // per_req)
    rest = b.budget - spec
    b = evolve(b, per_req=per_req, ratio=ratio, K=K, sizing=sizing, spec_reserved=spec, rest=rest)
    if K <= 0:
        return _state_pool_error(b, K, rest, per_req)
    reserved = (K + pad) * per_req / GiB
    return evolve(b, mamba_reserved=reserved, rest=rest - reserved)


def _state_pool_error(b: Budget, K: int, rest: float, per_req: int) -> Budget:
    return evolve(
        b,
        error=(
            f"RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
            f"Computed max_mamba_cache_size={K} (total_rest_memory={rest:.2f} GB, "
            f"mamba_cache_per_req={per_req / (1 << 20):.2f} MB). Try: (1) reduce --max-running-requests, "
            f"(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or "
            f"(4) use GPUs with more memory."
        ),
        error_kind="mamba",
    )


def upfront_state_pool(
    b: Budget, v: dict[str, Any], lay: Layout, per_req: int, ratio: int
) -> Budget:
    """model_runner_kv_cache_mixin.py:handle_max_mamba_cache before the joint solve (Rules.
    spec_reserve "upfront"): with speculative decoding (any algorithm) per_req x mrr x D is taken
    from the budget first; K is then explicit, max_running_requests with the radix cache off,
    or the ratio split of what is left; K x per_req is reserved. K is not checked: a budget
    the reserve overdraws ends in the KV pool's "Not enough memory"."""
    dp, mrr, D = v["attn_dp_size"], v["max_running_requests"], lay.D
    spec = per_req * (mrr // dp) * D / GiB if v["speculative_algorithm"] is not None else 0.0
    rest = b.budget - spec
    if v["max_mamba_cache_size"] is not None:
        K, sizing = v["max_mamba_cache_size"] // dp, "explicit --max-mamba-cache-size"
    elif v["disable_radix_cache"] and mrr is not None:
        K, sizing = mrr // dp, "max_running_requests (radix cache disabled)"
    else:
        r = v["mamba_full_memory_ratio"]
        K = int(rest * r / (1 + r) * GiB // per_req)
        sizing = f"mamba_full_memory_ratio {r}: rest x {r}/(1+{r})"
    reserved = K * per_req / GiB
    return evolve(
        b,
        per_req=per_req,
        ratio=ratio,
        K=K,
        sizing=sizing,
        spec_reserved=spec,
        mamba_reserved=reserved,
        rest=rest - reserved,
    )
