"""The memory SGLang profiles and the recurrent-state pool it carves out before the KV pool.

Mirrors (0.5.23) sglang/srt/mem_cache/kv_cache_configurator.py:KVCacheConfigurator:
_profile_available_bytes, mm_runtime_reservation_gb, _calculate_mamba_ratio and
_handle_max_mamba_cache. See docs/engines/sglang-0.5.23.md §5.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from servefit.engines.base import MemoryInputs
from servefit.engines.sglang.flow.heuristics import is_multimodal
from servefit.engines.sglang.flow.records import Budget, Layout
from servefit.engines.sglang.flow.rules import Rules
from servefit.model.spec import ModelSpec
from servefit.units import GiB

# kv_cache_configurator.py module constants (0.5.23)
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3
MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP = 1
MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER = 1


def _truthy(env: dict[str, str], name: str) -> bool:
    return env.get(name, "").lower() in ("1", "true", "yes")


def mamba_ratio(v: dict[str, Any], env: dict[str, str]) -> int:
    """KVCacheConfigurator._calculate_mamba_ratio: 1 radix off; 3 no_buffer; extra_buffer
    +2 with the overlap schedule, +1 without it or when lazy (allocation_sizing.py:
    get_mamba_tracking_slots)."""
    if v["disable_radix_cache"]:
        return 1
    skip = _truthy(env, "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK")
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
    if not is_multimodal(model, v, rules):
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
    # Scheduler.init_model_worker loads the draft before init_memory_pools: draft weights are resident.
    avail = P - memory.weights_gib - memory.draft_weights_gib
    slack = P * (1 - v["mem_fraction_static"])
    mm = mm_reservation_mib(model, v, env, rules) / 1024
    b = Budget(P=P, avail=avail, slack=slack, mm_gib=mm, budget=avail - slack - mm)
    b = replace(b, rest=b.budget)
    if lay.cost is not None:
        b = state_pool(b, v, lay, env)
        if b.error:
            return b
    if b.rest <= 0:
        minimum = 1 - avail / P
        suggested = math.ceil(minimum * 1000) / 1000
        b = replace(
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


def state_pool(b: Budget, v: dict[str, Any], lay: Layout, env: dict[str, str]) -> Budget:
    """_handle_max_mamba_cache: the state slots (K) and what they and the speculative
    intermediate state take out of the budget."""
    assert lay.cost is not None
    per_req = int(lay.cost.per_req * lay.stage_scale)  # stage_per_req: largest per-PP-stage share
    ratio = mamba_ratio(v, env)
    dp = v["attn_dp_size"]
    mrr = v["max_running_requests"]
    D = lay.D
    reserves_spec = v["speculative_algorithm"] is not None and v["disaggregation_mode"] != "prefill"
    spec = 0.0
    if v["max_mamba_cache_size"] is not None:  # (A)
        K = v["max_mamba_cache_size"] // dp
        sizing = "explicit --max-mamba-cache-size"
        if reserves_spec:
            capped = min(max(1, mrr // dp), K // ratio)
            spec = per_req * (capped + 1) * D / GiB
    elif v["disable_radix_cache"] and mrr is not None:  # (B)
        K = max(1, mrr // dp)
        sizing = "max_running_requests (radix cache disabled)"
        if reserves_spec:
            spec = per_req * (K + 1) * D / GiB
    else:  # (C) ratio auto-fit, +1 padding slot on both buffers
        r = v["mamba_full_memory_ratio"]
        budget_bytes = b.budget * r / (1 + r) * GiB
        sizing = f"mamba_full_memory_ratio {r}: rest x {r}/(1+{r})"
        if reserves_spec:
            K = int((budget_bytes - per_req * (1 + D)) // (per_req * (1 + D / ratio)))
            capped = min(max(1, mrr // dp), K // ratio)
            spec = per_req * (capped + 1) * D / GiB
        else:
            K = int((budget_bytes - per_req) // per_req)
    rest = b.budget - spec
    b = replace(b, per_req=per_req, ratio=ratio, K=K, sizing=sizing, spec_reserved=spec, rest=rest)
    if K <= 0:
        return replace(
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
    reserved = (K + 1) * per_req / GiB
    return replace(b, mamba_reserved=reserved, rest=rest - reserved)
