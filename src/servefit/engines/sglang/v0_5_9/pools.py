"""SGLang 0.5.9 memory profiling and pool sizing.

Mirrors sglang/srt/model_executor/model_runner_kv_cache_mixin.py (0.5.9):
profile_max_num_token -> handle_max_mamba_cache -> init_memory_pool, then
model_runner.py:ModelRunner.initialize (max_running_requests) and
mem_cache/memory_pool.py (what MambaPool / MHATokenToKVPool actually allocate).
"""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import PerRank, Pools
from servefit.engines.base import MemoryInputs, ResolvedArgs, Sizing
from servefit.engines.sglang import common
from servefit.engines.sglang.common import gib
from servefit.engines.sglang.v0_5_9 import logs
from servefit.engines.sglang.v0_5_9.sized import Sized
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.units import GiB

# model_runner_kv_cache_mixin.py module constants (0.5.9)
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3
MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP = 2
MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP = 1

NOT_ENOUGH = (
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: self.server_args.mem_fraction_static={f}"
)


def mamba_ratio(v: dict[str, Any]) -> int:
    """init_memory_pool: state slots per running request (0.5.9).

    extra_buffer adds 1 with speculative decoding, else 2 (independent of the overlap flag).
    """
    if v["disable_radix_cache"]:
        return 1
    extra = 0
    if v["mamba_scheduler_strategy"] == "extra_buffer":
        extra = (
            MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP
            if v["speculative_algorithm"] is not None
            else MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP
        )
    return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + extra


def _cell(model: ModelSpec, v: dict[str, Any], attn_tp: int, kv_dtype: str) -> int:
    """profile_max_num_token: the layers of this PP stage (hybrids: its full-attention layers).
    The stage with the most has the fewest tokens, and the engine all-reduces MIN over PP."""
    pp = v["pp_size"]
    if model.is_hybrid:
        layers = common.most_per_stage(model, "attention", pp)
    else:
        stages = [common.pp_indices(model.num_layers, r, pp) for r in range(pp)]
        layers = max(e - s for s, e in stages)
    return common.kv_cell_size(model, attn_tp, layers, kv_dtype)


def _handle_max_mamba_cache(s: Sized, v: dict[str, Any], dp_div: int) -> None:
    """model_runner_kv_cache_mixin.py:handle_max_mamba_cache (0.5.9)."""
    per_req = s.per_req
    rest = s.budget
    if v["speculative_algorithm"] is not None:  # reserve the verify intermediate state first
        s.spec_reserved = per_req * (v["max_running_requests"] // dp_div) * s.D / GiB
        rest -= s.spec_reserved
    if v["max_mamba_cache_size"] is not None:
        s.K, s.sizing = v["max_mamba_cache_size"] // dp_div, "explicit --max-mamba-cache-size"
    elif v["disable_radix_cache"] and v["max_running_requests"] is not None:
        s.K = v["max_running_requests"] // dp_div
        s.sizing = "max_running_requests (radix cache disabled)"
    else:
        r = v["mamba_full_memory_ratio"]
        s.K = int((rest * r / (1 + r) * GiB) // per_req)
        s.sizing = f"mamba_full_memory_ratio {r}: rest x {r}/(1+{r})"
    s.mamba_reserved = s.K * per_req / GiB
    s.rest = rest - s.mamba_reserved


def _requests(s: Sized, v: dict[str, Any], ctx: int, dp: int) -> None:
    """init_memory_pool's max_num_reqs, then ModelRunner.initialize's max_running_requests."""
    mrr = v["max_running_requests"]
    R = mrr if mrr is not None else min(max(int(s.tokens / ctx * 512), 2048), 4096)
    s.cap_reason = "max_running_requests" if mrr is not None else "default estimate"
    if s.cost is not None:
        s.ratio = ratio = mamba_ratio(v)
        if s.slots // ratio < R:
            s.cap_reason = f"mamba state cache: {s.K} slots // {ratio} per request"
        R = min(R, s.slots // ratio)
        if v["speculative_algorithm"] is not None and v["enable_dp_attention"]:
            R = min(R, mrr // dp)
    s.max_num_reqs = R
    if mrr is None:
        s.eff = min(s.tokens // 2, R)
        if s.tokens // 2 < R:
            s.cap_reason = "KV tokens // 2"
    else:
        s.eff = min(mrr // dp, R)


def _culprit(s: Sized) -> tuple[str, str]:
    """Name what left the KV pool no memory, with the numbers. The engine takes the speculative
    intermediate state and then the state pool out of the budget before sizing KV; the larger
    of the two reservations is the consumer to cut."""
    if s.budget <= 0:
        return "weights", (
            f"after the weights load only {s.budget:.2f} GiB is left under "
            "--mem-fraction-static for the state and KV pools"
        )
    parts = {"speculative mamba state": s.spec_reserved, "mamba state pool": s.mamba_reserved}
    name = max(parts, key=lambda k: parts[k])
    return name, (
        f"{name} takes {parts[name]:.2f} GiB: speculative state {s.spec_reserved:.2f} + state pool "
        f"{s.mamba_reserved:.2f} GiB exceed the {s.budget:.2f} GiB budget, leaving nothing for the KV cache"
    )


# configs/model_config.py:is_hybrid_swa_model (0.5.9); GptOss with trtllm_mha (Blackwell) turns it
# off (server_args.py:_handle_model_specific_adjustments), as does --disable-hybrid-swa-memory.
HYBRID_SWA_ARCHS = frozenset(
    {
        "Llama4ForConditionalGeneration",
        "GptOssForCausalLM",
        "MiMoV2FlashForCausalLM",
        "Step3p5ForCausalLM",
    }
)


def _hybrid_swa(model: ModelSpec, v: dict[str, Any]) -> bool:
    return (
        model.architecture in HYBRID_SWA_ARCHS
        and not v.get("disable_hybrid_swa_memory")
        and bool(model.layer_ids("sliding_window"))
    )


def _split_swa(model: ModelSpec, v: dict[str, Any], attn_tp: int, s: Sized) -> tuple[int, int]:
    """model_runner_kv_cache_mixin.py:set_num_tokens_hybrid_swa (0.5.9): the profiled memory
    tokens x (F*n_full + S*n_swa) is re-split so swa_tokens = full_tokens x swa_full_tokens_ratio."""
    size = common.element_size(s.kv_dtype)
    full_ids, swa_ids = model.layer_ids("full_attention"), model.layer_ids("sliding_window")
    F = model.attention_mixer(full_ids[0]).kv_elems_per_token(attn_tp) * size if full_ids else 0
    S = model.attention_mixer(swa_ids[0]).kv_elems_per_token(attn_tp) * size
    page, r = v["page_size"], v.get("swa_full_tokens_ratio", 0.8)
    if not full_ids:
        return s.tokens // page * page, s.tokens // page * page
    total = s.tokens * (F * len(full_ids) + S * len(swa_ids))
    full = int(total / (F * len(full_ids) + r * S * len(swa_ids)))
    return full // page * page, int(full * r) // page * page


def _draft_cell(model: ModelSpec, attn_tp: int, kv_dtype: str) -> int:
    """KV bytes per token of the EAGLE/NEXTN draft pool (init_memory_pool). Hybrid targets:
    HybridLinearKVPool with full_attention_layer_ids=[0] ("if draft worker, we only need 1
    attention layer's kv pool"). Others: the draft's num_nextn_predict_layers
    (profile_max_num_token, is_draft_worker branch), 1 when unknown."""
    layers = 1 if model.is_hybrid else max(1, model.mtp_layers or 1)
    return common.kv_cell_size(model, attn_tp, layers, kv_dtype)


def _allocate(
    s: Sized, model: ModelSpec, v: dict[str, Any], memory: MemoryInputs, attn_tp: int
) -> None:
    """What mem_cache/memory_pool.py allocates: K/V buffers of (size + page) slots, MambaPool
    conv/ssm of (K + 1) slots and intermediate state of (R + 1) x D slots, req_to_token
    (R, context_len + 4 + D) int32. On failure nothing is allocated: the breakdown then holds
    what the engine had reserved against the budget."""
    page, R, per_req = v["page_size"], s.max_num_reqs, s.per_req
    spec = v["speculative_algorithm"] is not None
    s.kv_bytes = (s.tokens + page) * s.cell if s.tokens > 0 else 0
    if s.swa_tokens is not None and s.tokens > 0:  # SWAKVPool: full and SWA layers sized apart
        size = common.element_size(s.kv_dtype)
        full_ids, swa_ids = model.layer_ids("full_attention"), model.layer_ids("sliding_window")
        s.kv_bytes = sum(
            (n + page) * model.attention_mixer(ids[0]).kv_elems_per_token(attn_tp) * size * len(ids)
            for n, ids in ((s.tokens, full_ids), (s.swa_tokens, swa_ids))
            if ids
        )
    if s.error is None:
        s.mamba_bytes = (s.slots + 1) * per_req if s.cost is not None else 0
        s.spec_bytes = (R + 1) * s.D * per_req if s.cost is not None and spec else 0
        s.req_to_token_bytes = R * (v["context_len"] + 4 + s.D) * 4
    else:
        s.mamba_bytes, s.spec_bytes = int(s.mamba_reserved * GiB), int(s.spec_reserved * GiB)
    if spec and v["speculative_algorithm"] != "NGRAM" and s.tokens > 0:
        s.draft_kv_bytes = (s.tokens + page) * _draft_cell(model, attn_tp, s.kv_dtype)
    s.pool_end = s.avail - gib(s.kv_bytes + s.mamba_bytes + s.spec_bytes + s.req_to_token_bytes)
    s.free_after = s.pool_end - memory.draft_weights_gib - gib(s.draft_kv_bytes)


def size_pools(
    model: ModelSpec,
    gpus: GPUSet,
    resolved: ResolvedArgs,
    memory: MemoryInputs,
    *,
    text: bool = True,
) -> Sizing:
    v = resolved.values
    dp = v["dp_size"]
    dp_div = dp if v["enable_dp_attention"] else 1
    attn_tp = v["tp_size"] // dp_div
    f, page, ctx = v["mem_fraction_static"], v["page_size"], v["context_len"]
    kv_dtype = common.kv_cache_dtype(model, v["kv_cache_dtype"])
    P = memory.pre_load_free_gib
    avail = P - memory.weights_gib  # get_available_gpu_memory after weights (min over ranks)
    s = Sized(
        pre=P,
        avail=avail,
        reserved=P * (1 - f),
        budget=avail - P * (1 - f),
        cell=_cell(model, v, attn_tp, kv_dtype),
        kv_dtype=kv_dtype,
        cost=common.state_cost(model, attn_tp, None, resolved.env),
        D=v["speculative_num_draft_tokens"] or 0,
    )
    s.rest = s.budget
    if s.cost is not None:
        _handle_max_mamba_cache(s, v, dp_div)
    tokens = int(s.rest * GiB) // s.cell if s.cell else 0
    if v["max_total_tokens"] is not None:
        tokens = min(tokens, v["max_total_tokens"])
    s.tokens = tokens // page * page
    _requests(s, v, ctx, dp)  # max_num_reqs is estimated from the tokens before the SWA split
    if _hybrid_swa(model, v):
        s.tokens, s.swa_tokens = _split_swa(model, v, attn_tp, s)
        if v["max_running_requests"] is None:  # ModelRunner.initialize reads the full-layer tokens
            s.eff = min(s.tokens // 2, s.max_num_reqs)
    if s.tokens <= 0:
        s.error = NOT_ENOUGH.format(f=f)
        s.consumer, s.detail = _culprit(s)
    elif s.eff <= 0:  # tp_worker.py: assert self.max_running_requests > 0
        s.error = "AssertionError: max_running_request is zero"
        s.consumer = "mamba state pool" if s.cost is not None else "kv cache"
    elif min(ctx - 1, s.tokens - 1) - 5 <= 0:  # tp_worker.py: max_req_len / max_req_input_len
        s.error, s.consumer = "AssertionError: Memory pool size is too small", "kv cache"
    _allocate(s, model, v, memory, attn_tp)

    warnings = []
    if s.error is None and s.free_after < 0:
        warnings.append(
            f"draft weights and draft KV ({memory.draft_weights_gib + gib(s.draft_kv_bytes):.2f} GiB) exceed "
            f"the {s.pool_end:.2f} GiB left after the target pools: expect a CUDA out-of-memory while the "
            "draft loads"
        )
    return Sizing(
        pools=_pools(s, v),
        per_rank=_per_rank(s, memory),
        error=s.error,
        error_consumer=s.consumer,
        error_detail=s.detail,
        consumers=tuple(logs.consumers(s, v, memory)) if text else (),
        log_lines=tuple(logs.log_lines(s, model, v, memory)) if text else (),
        warnings=tuple(warnings),
    )


def _per_rank(s: Sized, memory: MemoryInputs) -> PerRank:
    return PerRank(
        total_gib=memory.total_gib,
        pre_load_free_gib=s.pre,
        weights_gib=memory.weights_gib,
        draft_weights_gib=memory.draft_weights_gib,
        kv_cache_gib=gib(s.kv_bytes),
        mamba_state_gib=gib(s.mamba_bytes),
        spec_state_gib=gib(s.spec_bytes),
        draft_kv_gib=gib(s.draft_kv_bytes),
        req_to_token_gib=gib(s.req_to_token_bytes),
        reserved_gib=s.reserved,
        free_gib=s.free_after,
    )


def _pools(s: Sized, v: dict[str, Any]) -> Pools:
    cost, page, ctx = s.cost, v["page_size"], v["context_len"]
    return Pools(
        budget_gib=s.budget,
        kv_budget_gib=s.rest,
        kv_bytes_per_token=s.cell,
        max_total_num_tokens=max(s.tokens, 0),
        page_size=page,
        context_len=ctx,
        mamba_state_bytes_per_request=s.per_req,
        conv_state_bytes_per_request=cost.conv_bytes if cost else 0,
        ssm_state_bytes_per_request=cost.ssm_bytes if cost else 0,
        mamba_layers=cost.layers if cost else 0,
        max_mamba_cache_size=s.K,
        mamba_slots_per_request=s.ratio,
        mamba_sizing=s.sizing,
        spec_state_slots=(s.max_num_reqs + 1) if cost and v["speculative_algorithm"] else None,
        effective_max_running_requests=max(s.eff, 0) if s.error is None else 0,
        cap_reason=s.cap_reason,
        max_concurrency_at_context=round(max(s.tokens, 0) / ctx, 2),
    )
