"""SGLang 0.5.23 memory profiling and pool sizing.

Mirrors sglang/srt/mem_cache/kv_cache_configurator.py:KVCacheConfigurator (0.5.23):
_profile_available_bytes -> _handle_max_mamba_cache -> config_from_budget
(model_executor/pool_configurator.py:DefaultPoolConfigurator) -> resolve_max_num_reqs, then
what mem_cache/memory_pool.py allocates. See docs/engines/sglang-0.5.23.md §5.
"""

from __future__ import annotations

import math
from typing import Any

from servefit._plan.schema import PerRank, Pools
from servefit.engines.base import MemoryInputs, ResolvedArgs, Sizing
from servefit.engines.sglang import common
from servefit.engines.sglang.common import gib
from servefit.engines.sglang.v0_5_23 import logs, swa
from servefit.engines.sglang.v0_5_23.budget import Budget
from servefit.engines.sglang.v0_5_23.heuristics import is_multimodal
from servefit.errors import ArgumentError
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.units import DTYPE_BYTES, GiB

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


def mm_reservation_mib(model: ModelSpec, v: dict[str, Any], env: dict[str, str]) -> int:
    """kv_cache_configurator.py:mm_runtime_reservation_gb (in MiB): SGLANG_VLM_CACHE_SIZE_MB (100)
    + SGLANG_MM_FEATURE_CACHE_MB (1024) for the cuda_ipc / cuda_vmm feature transports."""
    if not is_multimodal(model, v):
        return 0
    mb = int(env.get("SGLANG_VLM_CACHE_SIZE_MB", 100))
    if v["mm_feature_transport"] in ("cuda_ipc", "cuda_vmm"):
        mb += int(env.get("SGLANG_MM_FEATURE_CACHE_MB", 1024))
    return mb


def eagle_draft_layers(model: ModelSpec, v: dict[str, Any]) -> int | None:
    """spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state -> eagle_draft_num_layers.

    Path-less: the TARGET config's num_nextn_predict_layers (Qwen3-Next/3.5 carry
    mtp_num_hidden_layers only -> None, no draft term). With a draft path: the draft's
    num_nextn_predict_layers, else max(num_hidden_layers, num_attention_layers).
    """
    if v["speculative_draft_model_path"] is None:
        return (
            model.mtp_layers
            if model.mtp_source == "num_nextn_predict_layers" and model.mtp_layers
            else None
        )
    return max(1, model.mtp_layers) if model.mtp_source == "num_nextn_predict_layers" else 1


def req_to_token_extra(v: dict[str, Any]) -> int:
    """allocation_sizing.py:get_req_to_token_extra_context_len."""
    D = v["speculative_num_draft_tokens"] or 0
    extra = 4 + D
    page = v["page_size"]
    if v["speculative_algorithm"] is not None and page > 1:
        steps, topk = v["speculative_num_steps"] or 1, v["speculative_eagle_topk"] or 1
        if topk == 1:
            per_decode = max(steps * topk, D)
        else:  # get_alloc_len_per_decode, spec v2 page>1 topk>1 tree
            per_decode = max((page - 1 + steps + page - 1) // page * page * topk, D)
        extra = max(extra, 2 * per_decode + page - 1)
    return extra


def profile_available(
    model: ModelSpec,
    v: dict[str, Any],
    memory: MemoryInputs,
    cost: common.StateCost | None,
    env: dict[str, str],
    stage_scale: float,
) -> Budget:
    """_profile_available_bytes + _handle_max_mamba_cache (GiB in, GiB out)."""
    P = memory.pre_load_free_gib
    # Scheduler.init_model_worker loads the draft before init_memory_pools: draft weights are resident.
    avail = P - memory.weights_gib - memory.draft_weights_gib
    slack = P * (1 - v["mem_fraction_static"])
    mm = mm_reservation_mib(model, v, env) / 1024
    b = Budget(P=P, avail=avail, slack=slack, mm_gib=mm, budget=avail - slack - mm)
    rest = b.budget
    if cost is not None:
        rest = _handle_max_mamba_cache(b, v, cost, env, stage_scale)
        if b.error:
            return b
    b.rest = rest
    if rest <= 0:
        minimum = 1 - avail / P
        suggested = math.ceil(minimum * 1000) / 1000
        b.error = (
            f"ValueError: Loaded weights leave no GPU memory for the KV cache under "
            f"--mem-fraction-static={v['mem_fraction_static']}. Raise --mem-fraction-static above "
            f"{suggested:.3f} (minimum viable = 1 - available/pre = {minimum:.4f}). If using "
            f"speculative decoding, draft weights are now counted."
        )
        b.error_kind = "budget"
    return b


def _handle_max_mamba_cache(
    b: Budget, v: dict[str, Any], cost: common.StateCost, env: dict[str, str], stage_scale: float
) -> float:
    per_req = int(cost.per_req * stage_scale)  # stage_per_req: largest per-PP-stage share
    b.per_req = per_req
    b.ratio = mamba_ratio(v, env)
    dp = v["attn_dp_size"]
    mrr = v["max_running_requests"]
    D = v["speculative_num_draft_tokens"] or 0
    reserves_spec = v["speculative_algorithm"] is not None and v["disaggregation_mode"] != "prefill"
    rest = b.budget
    if v["max_mamba_cache_size"] is not None:  # (A)
        K = v["max_mamba_cache_size"] // dp
        b.sizing = "explicit --max-mamba-cache-size"
        if reserves_spec:
            capped = min(max(1, mrr // dp), K // b.ratio)
            b.spec_reserved = per_req * (capped + 1) * D / GiB
    elif v["disable_radix_cache"] and mrr is not None:  # (B)
        K = max(1, mrr // dp)
        b.sizing = "max_running_requests (radix cache disabled)"
        if reserves_spec:
            b.spec_reserved = per_req * (K + 1) * D / GiB
    else:  # (C) ratio auto-fit, +1 padding slot on both buffers
        r = v["mamba_full_memory_ratio"]
        budget_bytes = rest * r / (1 + r) * GiB
        b.sizing = f"mamba_full_memory_ratio {r}: rest x {r}/(1+{r})"
        if reserves_spec:
            K = int((budget_bytes - per_req * (1 + D)) // (per_req * (1 + D / b.ratio)))
            capped = min(max(1, mrr // dp), K // b.ratio)
            b.spec_reserved = per_req * (capped + 1) * D / GiB
        else:
            K = int((budget_bytes - per_req) // per_req)
    rest -= b.spec_reserved
    b.K = K
    if K <= 0:
        b.error = (
            f"RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
            f"Computed max_mamba_cache_size={K} (total_rest_memory={rest:.2f} GB, "
            f"mamba_cache_per_req={per_req / (1 << 20):.2f} MB). Try: (1) reduce --max-running-requests, "
            f"(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or "
            f"(4) use GPUs with more memory."
        )
        b.error_kind = "mamba"
        b.rest = rest
        return rest
    b.mamba_reserved = (K + 1) * per_req / GiB
    return rest - b.mamba_reserved


def size_pools(
    model: ModelSpec, gpus: GPUSet, resolved: ResolvedArgs, memory: MemoryInputs
) -> Sizing:
    v, env = resolved.values, resolved.env
    tp, pp, dp = v["tp_size"], v["pp_size"], v["attn_dp_size"]
    attn_tp = tp // dp
    algo = v["speculative_algorithm"]
    page, ctx = v["page_size"], v["context_len"]
    if v["kv_cache_dtype"] in ("nvfp4", "fp4_mx_block16", "mxfp8"):
        raise ArgumentError(
            f"servefit does not size --kv-cache-dtype {v['kv_cache_dtype']} for SGLang 0.5.23"
        )
    kv_dtype = common.kv_cache_dtype(model, v["kv_cache_dtype"])

    # DefaultPoolConfigurator.__init__: full-attention layers of this PP stage; the engine takes
    # the MIN token count over PP ranks, i.e. the stage with the most attention layers.
    stages = [common.pp_indices(model.num_layers, r, pp) for r in range(pp)]
    attn_ids, rec_ids = model.attention_layer_ids, model.recurrent_layer_ids
    num_layers = max(sum(1 for i in attn_ids if s <= i < e) for s, e in stages)
    stage_mamba = max(sum(1 for i in rec_ids if s <= i < e) for s, e in stages) if rec_ids else 0
    stage_scale = stage_mamba / max(len(rec_ids), 1)
    target_cell = common.kv_cell_size(model, attn_tp, num_layers, kv_dtype)
    cell = target_cell
    eagle = algo in ("EAGLE", "EAGLE3", "STANDALONE")
    draft_layers = eagle_draft_layers(model, v) if eagle else None
    if draft_layers and num_layers > 0:  # draft KV counted inside the target budget
        cell += int(target_cell * draft_layers / num_layers)

    cost = common.state_cost(model, attn_tp, None, env)
    b = profile_available(model, v, memory, cost, env, stage_scale)
    warnings: list[str] = []
    if eagle and v["speculative_draft_model_path"] is not None:
        warnings.append(
            "the draft checkpoint's config is not read: its KV layer count is taken as "
            f"{draft_layers} (num_nextn_predict_layers, else 1)"
        )
    # pool_configurator.py:create_memory_pool_configurator: hybrid SWA models split the budget.
    geo = swa.geometry(model, attn_tp, kv_dtype) if swa.is_hybrid_swa(model, v) else None
    if geo is None and swa.is_hybrid_swa(model, v):
        warnings.append(
            f"SGLang 0.5.23 gives {model.architecture} a hybrid sliding-window KV pool; servefit "
            "does not mirror its geometry and plans every layer as full attention"
        )

    tokens = R = 0
    pre_logs: list[str] = []
    error, kind = b.error, b.error_kind
    split = None
    if error is None and geo is not None:
        draft = swa.draft_layers(model, v, geo, draft_layers if eagle else None)
        split = swa.split(model, v, env, geo, int(b.rest * GiB), draft)
        tokens, cell = split.full or split.swa, int(split.cell)
        pre_logs.extend(split.logs)
        if split.error:  # raised inside calculate_pool_sizes: nothing is allocated
            tokens, error, kind = 0, split.error, "tokens"
    elif error is None:
        tokens = int(b.rest * GiB) // cell // page * page if cell else 0  # calculate_pool_sizes
        if tokens <= 0:
            error, kind = (
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
                "tokens",
            )
    # _apply_token_constraints (the SWA split applies it itself)
    if error is None and split is None and v["max_total_tokens"] is not None:
        if v["max_total_tokens"] > tokens:
            pre_logs.append(
                f"max_total_tokens={v['max_total_tokens']} is larger than the profiled value "
                f"{tokens}. Use the profiled value instead."
            )
        tokens = min(tokens, v["max_total_tokens"]) // page * page
        if tokens <= 0:
            error, kind = (
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
                "tokens",
            )
    cap_reason = ""
    if error is None:
        R, cap_reason, error, kind = _resolve_max_num_reqs(v, b, cost, tokens, ctx, pre_logs)
    if error is None and min(ctx - 1, tokens - 1) <= 0:
        error, kind = "AssertionError: Memory pool size is too small", "tokens"

    # What the pools allocate (mem_cache/memory_pool.py).
    ok = error is None
    D = v["speculative_num_draft_tokens"] or 0
    spec_state = (
        ok and cost is not None and algo is not None and v["disaggregation_mode"] != "prefill"
    )
    alloc = _allocations(
        model,
        v,
        cost,
        b,
        tokens,
        R,
        target_cell,
        num_layers,
        attn_tp,
        kv_dtype,
        D,
        spec_state,
        stage_scale,
    )
    kv_lines: tuple[list[str], list[str]] | None = None
    kv_formula = None
    if split is not None and geo is not None and tokens > 0:
        sw = swa.allocations(geo, split, page)
        alloc.update(kv=sw["kv"], k=sw["k"], v=sw["v"])
        kv_lines = (swa.kv_lines(common.KV_DTYPES[kv_dtype][0], split, sw), [])
        kv_formula = swa.kv_formula(geo, split, page)
    draft_cell = 0
    if ok and eagle:  # draft runner: HybridLinearKVPool([0]) for hybrid targets
        n = 1 if model.is_hybrid else max(1, draft_layers or model.mtp_layers or 1)
        draft_cell = common.kv_cell_size(model, attn_tp, n, kv_dtype)
    draft_kv = (tokens + page) * draft_cell if draft_cell else 0
    if ok and split is not None and geo is not None and split.draft_swa:
        # Path-less MTP draft of a hybrid SWA target (MiMoV2MTP / Step3p5MTP): get_hybrid_layer_ids
        # gives it swa [0], full [] -> an SWAKVPool whose one SWA layer holds swa tokens.
        draft_kv = (split.swa + page) * (geo.swa_k + geo.swa_v)
        draft_split = swa.Split(full=split.full, swa=split.swa, n_full=0, n_swa=1)
        draft_alloc = swa.allocations(geo, draft_split, page)
        if kv_lines is not None:
            kv_lines[1].extend(
                swa.kv_lines(common.KV_DTYPES[kv_dtype][0], draft_split, draft_alloc)
            )
    pool_end = b.avail - gib(
        alloc["kv"] + alloc["mamba"] + alloc["iss"] + alloc["icw"] + alloc["req_to_token"]
    )
    free_after = pool_end - gib(draft_kv)
    if ok and free_after < 0:
        warnings.append(
            f"the draft KV pool ({gib(draft_kv):.2f} GiB) exceeds the {pool_end:.2f} GiB left after "
            "the target pools: expect a CUDA out-of-memory while the draft pool is allocated"
        )
    if ok and tokens < ctx:
        pre_logs.append(
            f"KV pool holds {tokens} tokens, fewer than --context-length {ctx}. One full-length "
            "request cannot fit, so long requests will be refused or truncated at serving time. "
            "Lower --context-length, raise --mem-fraction-static, or free memory taken before the "
            "pool is sized."
        )

    consumer, detail = logs.culprit(b, kind) if error else (None, None)
    if split is not None and split.error:
        consumer, detail = (
            "kv cache",
            (
                f"{b.rest:.2f} GiB budget at {split.cell:,.1f} B per full token "
                f"({split.mode} split) leaves the SWA pool {split.swa} / full pool {split.full} tokens"
            ),
        )
    log_lines = logs.log_lines(
        model,
        v,
        memory,
        b,
        cost,
        alloc,
        tokens,
        R,
        D,
        kv_dtype,
        pool_end,
        draft_kv,
        free_after,
        pre_logs,
        error,
        kv_lines,
    )
    per_rank = PerRank(
        total_gib=memory.total_gib,
        pre_load_free_gib=b.P,
        weights_gib=memory.weights_gib,
        draft_weights_gib=memory.draft_weights_gib,
        kv_cache_gib=gib(alloc["kv"]),
        mamba_state_gib=gib(alloc["mamba"]),
        spec_state_gib=gib(alloc["iss"] + alloc["icw"]),
        draft_kv_gib=gib(draft_kv),
        req_to_token_gib=gib(alloc["req_to_token"]),
        reserved_gib=b.slack,
        free_gib=free_after,
    )
    pools = Pools(
        budget_gib=b.budget,
        kv_budget_gib=b.budget - b.spec_reserved - b.mamba_reserved,
        kv_bytes_per_token=cell,
        max_total_num_tokens=max(tokens, 0),
        page_size=page,
        context_len=ctx,
        mamba_state_bytes_per_request=b.per_req,
        conv_state_bytes_per_request=int(cost.conv_bytes * stage_scale) if cost else 0,
        ssm_state_bytes_per_request=int(cost.ssm_bytes * stage_scale) if cost else 0,
        mamba_layers=stage_mamba,
        max_mamba_cache_size=b.K,
        mamba_slots_per_request=b.ratio,
        mamba_sizing=b.sizing,
        spec_state_slots=(R + 1) if spec_state else None,
        effective_max_running_requests=R if ok else 0,
        cap_reason=cap_reason,
        max_concurrency_at_context=round(max(tokens, 0) / ctx, 2),
    )
    consumers = logs.consumers(
        memory,
        v,
        b,
        cost,
        alloc,
        tokens,
        R,
        D,
        cell,
        target_cell,
        draft_kv,
        ctx,
        kv_formula,
        bool(split.draft_full or split.draft_swa) if split is not None else None,
    )
    extra = {
        "mm_reservation_gib": b.mm_gib,
        "spec_state_reserved_gib": b.spec_reserved,
        "draft_kv_in_budget": bool(draft_layers),
        "decode_cuda_graph_bs": v.get("_decode_graph_bs"),
        "prefill_cuda_graph_bs": v.get("_prefill_graph_bs"),
    }
    if split is not None:
        extra.update(
            full_max_total_num_tokens=split.full,
            swa_max_total_num_tokens=split.swa,
            swa_full_tokens_ratio=split.ratio,
            swa_sizing=split.mode,
            sliding_window_size=geo.window if geo else None,
        )
    return Sizing(
        pools=pools,
        per_rank=per_rank,
        error=error,
        error_consumer=consumer,
        error_detail=detail,
        consumers=tuple(consumers),
        log_lines=tuple(log_lines),
        warnings=tuple(warnings),
        extra=extra,
    )


def _resolve_max_num_reqs(
    v: dict[str, Any], b: Budget, cost: Any, tokens: int, ctx: int, out: list[str]
) -> tuple[int, str, str | None, str | None]:
    """KVCacheConfigurator.resolve_max_num_reqs (per attention-DP worker)."""
    estimated = max(min(int(tokens / ctx * 512), 4096), 2048)
    mrr = v["max_running_requests"]
    if mrr is not None:
        requested = max(1, mrr // v["attn_dp_size"])
        reqs = min(requested, tokens // 2)
        reason = "max_running_requests" if reqs == requested else "KV tokens // 2"
    else:
        requested = None
        reqs = min(estimated, tokens // 2)
        reason = (
            f"default estimate clamp(tokens/{ctx}*512, 2048, 4096) = {estimated}"
            if reqs == estimated
            else "KV tokens // 2"
        )
    capped = False
    if cost is not None:
        cap = b.K // b.ratio
        if cap < reqs:
            capped = True
            reason = f"mamba state cache: {b.K} slots // {b.ratio} per request"
            out.append(
                f"max_running_requests is capped to {cap} by the mamba state cache (max_mamba_cache_size="
                f"{b.K}, {b.ratio} state slots per request). To raise it: increase --mamba-full-memory-ratio "
                "or --max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16."
            )
        reqs = min(reqs, cap)
        if reqs <= 0:
            return (
                reqs,
                reason,
                (
                    f"RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
                    f"max_mamba_cache_size={b.K}, mamba_ratio={b.ratio}, resulting max_num_reqs={reqs}. Try: (1) reduce "
                    "--max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory."
                ),
                "mamba",
            )
    if requested is not None and reqs < requested and not capped:
        out.append(
            f"max_running_requests was reduced from the requested {requested} to {reqs} (per dp worker) due "
            "to the available KV cache capacity."
        )
    if reqs <= 0:  # managers/tp_worker.py
        return reqs, reason, "AssertionError: max_running_request is zero", "tokens"
    return reqs, reason, None, None


def _allocations(
    model: ModelSpec,
    v: dict[str, Any],
    cost: Any,
    b: Budget,
    tokens: int,
    R: int,
    target_cell: int,
    num_layers: int,
    attn_tp: int,
    kv_dtype: str,
    D: int,
    spec_state: bool,
    stage_scale: float,
) -> dict[str, int]:
    """Bytes each pool allocates: MambaPool (K+1 slots, intermediate over R+1), the KV pool
    ((tokens + page) rows), HybridReqToTokenPool ((R+1) x (ctx + extra) int32)."""
    out = {
        "kv": 0,
        "k": 0,
        "v": 0,
        "mamba": 0,
        "conv": 0,
        "ssm": 0,
        "iss": 0,
        "icw": 0,
        "req_to_token": 0,
    }
    if tokens <= 0:
        return out
    page = v["page_size"]
    rows = tokens + page
    out["kv"] = rows * target_cell
    attn = model.first_attention()
    if attn is not None and attn.kind != "mla":
        heads = attn.kv_heads_per_rank(attn_tp)
        size = common.element_size(kv_dtype)
        out["k"] = rows * heads * attn.head_dim * size * num_layers
        out["v"] = rows * heads * attn.v_head_dim * size * num_layers
    if R <= 0:
        return out
    if cost is not None and b.K is not None and b.K > 0:
        out["conv"] = int((b.K + 1) * cost.conv_bytes * stage_scale)
        out["ssm"] = int((b.K + 1) * cost.ssm_bytes * stage_scale)
        out["mamba"] = out["conv"] + out["ssm"]
        if spec_state:
            layers = round(cost.layers * stage_scale)
            conv_b = DTYPE_BYTES[cost.conv_dtype]
            # intermediate_ssm_state_cache (L_m, R+1, D) + temporal shape, ssm dtype
            out["iss"] = int((R + 1) * D * cost.ssm_bytes * stage_scale)
            kda = bool(model.layer_ids("kda"))
            topk = v["speculative_eagle_topk"]
            # memory_pool.py:conv_window_dedup_enabled: not NPU/CPU, not KDA, topk <= 1
            dedup = not kda and (topk is None or topk <= 1)
            icw = 0
            for shape in cost.conv_shapes:
                win = shape[-1]
                icw += (math.prod(shape) // win * (D + win - 1)) if dedup else D * math.prod(shape)
            out["icw"] = layers * (R + 1) * icw * conv_b
    ctx = v["context_len"]
    out["req_to_token"] = (R + 1) * (ctx + req_to_token_extra(v)) * 4
    return out
