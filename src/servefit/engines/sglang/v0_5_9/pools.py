"""SGLang 0.5.9 memory profiling and pool sizing.

Mirrors sglang/srt/model_executor/model_runner_kv_cache_mixin.py (0.5.9):
profile_max_num_token -> handle_max_mamba_cache -> init_memory_pool, then
model_runner.py:ModelRunner.initialize (max_running_requests) and
mem_cache/memory_pool.py (what MambaPool / MHATokenToKVPool actually allocate).
"""

from __future__ import annotations

from typing import Any

from servefit.engines.base import GiB, MemoryInputs, ResolvedArgs, Sizing
from servefit.engines.sglang import common
from servefit.engines.sglang.common import f2, gib
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.plan.schema import Consumer, PerRank, Pools

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


def size_pools(
    model: ModelSpec, gpus: GPUSet, resolved: ResolvedArgs, memory: MemoryInputs
) -> Sizing:
    v = resolved.values
    tp, pp, dp = v["tp_size"], v["pp_size"], v["dp_size"]
    dp_div = dp if v["enable_dp_attention"] else 1
    attn_tp = tp // dp_div
    spec = v["speculative_algorithm"] is not None
    D = v["speculative_num_draft_tokens"] or 0
    f = v["mem_fraction_static"]
    page = v["page_size"]
    ctx = v["context_len"]
    kv_dtype = common.kv_cache_dtype(model, v["kv_cache_dtype"])

    # profile_max_num_token: layers in this PP stage (the stage with the most attention layers
    # has the fewest tokens, and the engine all-reduces MIN over PP ranks).
    stages = [common.pp_indices(model.num_layers, r, pp) for r in range(pp)]
    attn_ids = model.attention_layer_ids
    if model.is_hybrid:
        num_layers = max(sum(1 for i in attn_ids if s <= i < e) for s, e in stages)
    else:
        num_layers = max(e - s for s, e in stages)
    cell = common.kv_cell_size(model, attn_tp, num_layers, kv_dtype)

    P, W = memory.pre_load_free_gib, memory.weights_gib
    avail = P - W  # get_available_gpu_memory after weights (min over ranks)
    reserved = P * (1 - f)
    rest = avail - reserved
    budget = rest
    cost = common.state_cost(model, attn_tp, None, resolved.env)
    per_req = cost.per_req if cost else 0
    spec_reserved_gib = 0.0
    mamba_gib_reserved = 0.0
    mamba_sizing = None
    K = None
    if cost is not None:
        # handle_max_mamba_cache (0.5.9)
        if spec:
            mrr = v["max_running_requests"] // dp_div
            spec_reserved_gib = per_req * mrr * D / GiB
            rest -= spec_reserved_gib
        if v["max_mamba_cache_size"] is not None:
            K = v["max_mamba_cache_size"] // dp_div
            mamba_sizing = "explicit --max-mamba-cache-size"
        elif v["disable_radix_cache"] and v["max_running_requests"] is not None:
            K = v["max_running_requests"] // dp_div
            mamba_sizing = "max_running_requests (radix cache disabled)"
        else:
            r = v["mamba_full_memory_ratio"]
            raw = rest * r / (1 + r)
            K = int((raw * (1 << 30)) // per_req)
            mamba_sizing = f"mamba_full_memory_ratio {r}: rest x {r}/(1+{r})"
        mamba_gib_reserved = K * per_req / GiB
        rest -= mamba_gib_reserved
    tokens = int(rest * (1 << 30)) // cell if cell else 0

    # init_memory_pool
    max_num_reqs = v["max_running_requests"]
    if max_num_reqs is None:
        max_num_reqs = min(max(int(tokens / ctx * 512), 2048), 4096)
    ratio = None
    cap_reason = (
        "max_running_requests" if v["max_running_requests"] is not None else "default estimate"
    )
    if cost is not None:
        ratio = mamba_ratio(v)
        if K // ratio < max_num_reqs:
            cap_reason = f"mamba state cache: {K} slots // {ratio} per request"
        max_num_reqs = min(max_num_reqs, K // ratio)
        if spec and v["enable_dp_attention"]:
            max_num_reqs = min(max_num_reqs, v["max_running_requests"] // dp)
    if v["max_total_tokens"] is not None:
        tokens = min(tokens, v["max_total_tokens"])
    tokens = tokens // page * page
    warnings: list[str] = []
    logs: list[str] = []

    error = consumer = detail = None
    if tokens <= 0:
        error = NOT_ENOUGH.format(f=f)
        consumer, detail = _culprit(budget, spec_reserved_gib, mamba_gib_reserved)

    # model_runner.py:ModelRunner.initialize
    if v["max_running_requests"] is None:
        eff = min(tokens // 2, max_num_reqs)
    else:
        eff = min(v["max_running_requests"] // dp, max_num_reqs)
        if eff < v["max_running_requests"] // dp and cap_reason == "max_running_requests":
            cap_reason = "req_to_token pool"
    if eff == tokens // 2 and v["max_running_requests"] is None and tokens // 2 < max_num_reqs:
        cap_reason = "KV tokens // 2"
    if error is None and eff <= 0:
        error = "AssertionError: max_running_request is zero"
        consumer = "mamba state pool" if cost is not None else "kv cache"
    if error is None and min(ctx - 1, tokens - 1) - 5 <= 0:
        error = "AssertionError: Memory pool size is too small"
        consumer = "kv cache"

    # What is actually allocated (mem_cache/memory_pool.py, 0.5.9)
    # On failure nothing is allocated; the breakdown then shows what the engine reserved
    # against the budget, so the shortfall is visible as negative free memory.
    kv_alloc = (tokens + page) * cell if tokens > 0 else 0
    R = max_num_reqs
    if error is None:
        mamba_alloc = (K + 1) * per_req if cost is not None else 0
        spec_alloc = (R + 1) * D * per_req if cost is not None and spec else 0
    else:
        mamba_alloc = int(mamba_gib_reserved * GiB)
        spec_alloc = int(spec_reserved_gib * GiB)
    extra_ctx = 4 + (v["speculative_num_draft_tokens"] or 0)
    req_to_token = R * (ctx + extra_ctx) * 4 if error is None else 0
    draft_cell = (
        _draft_cell(model, attn_tp, kv_dtype, v)
        if spec and v["speculative_algorithm"] != "NGRAM"
        else 0
    )
    draft_kv = (tokens + page) * draft_cell if tokens > 0 else 0
    pool_end = avail - gib(kv_alloc + mamba_alloc + spec_alloc + req_to_token)
    free_after = pool_end - memory.draft_weights_gib - gib(draft_kv)
    if error is None and free_after < 0:
        warnings.append(
            f"draft weights and draft KV ({memory.draft_weights_gib + gib(draft_kv):.2f} GiB) exceed the "
            f"{pool_end:.2f} GiB left after the target pools: expect a CUDA out-of-memory while the draft loads"
        )

    logs += _log_lines(
        model,
        v,
        memory,
        avail,
        cost,
        K,
        spec_alloc,
        per_req,
        kv_dtype,
        tokens,
        cell,
        page,
        kv_alloc,
        pool_end,
        draft_kv,
        eff,
        ctx,
        error,
        free_after,
        D,
        R,
    )

    per_rank = PerRank(
        total_gib=memory.total_gib,
        pre_load_free_gib=P,
        weights_gib=W,
        draft_weights_gib=memory.draft_weights_gib,
        kv_cache_gib=gib(kv_alloc),
        mamba_state_gib=gib(mamba_alloc),
        spec_state_gib=gib(spec_alloc),
        draft_kv_gib=gib(draft_kv),
        req_to_token_gib=gib(req_to_token),
        reserved_gib=reserved,
        free_gib=free_after,
    )
    pools = Pools(
        budget_gib=budget,
        kv_budget_gib=rest,
        kv_bytes_per_token=cell,
        max_total_num_tokens=max(tokens, 0),
        page_size=page,
        context_len=ctx,
        mamba_state_bytes_per_request=per_req,
        conv_state_bytes_per_request=cost.conv_bytes if cost else 0,
        ssm_state_bytes_per_request=cost.ssm_bytes if cost else 0,
        mamba_layers=cost.layers if cost else 0,
        max_mamba_cache_size=K,
        mamba_slots_per_request=ratio,
        mamba_sizing=mamba_sizing,
        spec_state_slots=(R + 1) if spec and cost else None,
        effective_max_running_requests=max(eff, 0) if error is None else 0,
        cap_reason=cap_reason,
        max_concurrency_at_context=round(max(tokens, 0) / ctx, 2),
    )
    consumers = _consumers(
        memory,
        reserved,
        cost,
        K,
        per_req,
        spec_reserved_gib,
        R,
        D,
        v,
        tokens,
        cell,
        kv_alloc,
        draft_kv,
        req_to_token,
        ctx,
        extra_ctx,
    )
    return Sizing(
        pools=pools,
        per_rank=per_rank,
        error=error,
        error_consumer=consumer,
        error_detail=detail,
        consumers=tuple(consumers),
        log_lines=tuple(logs),
        warnings=tuple(warnings),
    )


def _culprit(budget: float, spec_gib: float, mamba_gib: float) -> tuple[str, str]:
    """Name what left the KV pool no memory, with the numbers.

    The engine takes the speculative intermediate state and then the state pool out of the
    budget before sizing KV; the larger of the two reservations is the consumer to cut.
    """
    if budget <= 0:
        return "weights", (
            f"after the weights load only {budget:.2f} GiB is left under "
            "--mem-fraction-static for the state and KV pools"
        )
    parts = {"speculative mamba state": spec_gib, "mamba state pool": mamba_gib}
    name = max(parts, key=parts.get)
    return name, (
        f"{name} takes {parts[name]:.2f} GiB: speculative state {spec_gib:.2f} + state pool "
        f"{mamba_gib:.2f} GiB exceed the {budget:.2f} GiB budget, leaving nothing for the KV cache"
    )


def _draft_cell(model: ModelSpec, attn_tp: int, kv_dtype: str, v: dict[str, Any]) -> int:
    """KV bytes per token of the EAGLE/NEXTN draft pool (model_runner_kv_cache_mixin.py:
    init_memory_pool). Hybrid targets: HybridLinearKVPool with full_attention_layer_ids=[0]
    ("if draft worker, we only need 1 attention layer's kv pool"). Others: the draft's
    num_nextn_predict_layers (profile_max_num_token, is_draft_worker branch), 1 when unknown."""
    layers = 1 if model.is_hybrid else max(1, model.mtp_layers or 1)
    return common.kv_cell_size(model, attn_tp, layers, kv_dtype)


def _log_lines(
    model,
    v,
    memory,
    avail,
    cost,
    K,
    spec_alloc,
    per_req,
    kv_dtype,
    tokens,
    cell,
    page,
    kv_alloc,
    pool_end,
    draft_kv,
    eff,
    ctx,
    error,
    free_after,
    D,
    R,
) -> list[str]:
    P = memory.pre_load_free_gib
    out = [
        f"Load weight begin. avail mem={f2(P)} GB",
        f"Load weight end. elapsed=… s, type={model.architecture}, dtype=torch.{model.dtype}, "
        f"avail mem={f2(avail)} GB, mem usage={f2(memory.weights_gib)} GB.",
        f"Using KV cache dtype: {common.KV_DTYPES[kv_dtype][0]}",
    ]
    if error and tokens <= 0:
        return out + [error]
    if cost is not None:
        conv = (K + 1) * cost.conv_bytes
        ssm = (K + 1) * cost.ssm_bytes
        line = (
            f"Mamba Cache is allocated. max_mamba_cache_size: {K}, conv_state size: {f2(gib(conv))}GB, "
            f"ssm_state size: {f2(gib(ssm))}GB "
        )
        if spec_alloc:
            iss = (R + 1) * D * cost.ssm_bytes
            icw = (R + 1) * D * cost.conv_bytes
            line += (
                f"intermediate_ssm_state_cache size: {f2(gib(iss))}GB "
                f"intermediate_conv_window_cache size: {f2(gib(icw))}GB "
            )
        out.append(line)
    half = gib(kv_alloc) / 2
    attn = model.first_attention()
    if attn is not None and attn.kind == "mla":
        out.append(f"KV Cache is allocated. #tokens: {tokens}, KV size: {f2(gib(kv_alloc))} GB")
    else:
        out.append(
            f"KV Cache is allocated. #tokens: {tokens}, K size: {f2(half)} GB, V size: {f2(half)} GB"
        )
    out.append(f"Memory pool end. avail mem={f2(pool_end)} GB")
    if draft_kv:
        out.append(
            f"KV Cache is allocated. #tokens: {tokens}, K size: {f2(gib(draft_kv) / 2)} GB, "
            f"V size: {f2(gib(draft_kv) / 2)} GB"
        )
    if error:
        return out + [error]
    out.append(
        f"max_total_num_tokens={tokens}, chunked_prefill_size={v['chunked_prefill_size']}, "
        f"max_prefill_tokens={v['max_prefill_tokens']}, max_running_requests={eff}, context_len={ctx}, "
        f"available_gpu_mem=≤{f2(max(free_after, 0))} GB"
    )
    return out


def _consumers(
    memory,
    reserved,
    cost,
    K,
    per_req,
    spec_gib,
    R,
    D,
    v,
    tokens,
    cell,
    kv_alloc,
    draft_kv,
    req_to_token,
    ctx,
    extra_ctx,
) -> list[Consumer]:
    P, f = memory.pre_load_free_gib, v["mem_fraction_static"]
    out = [
        Consumer(
            name="weights",
            gib=memory.weights_gib,
            formula="target weights on this rank",
            flags=["--tp-size", "--pp-size", "--quantization"],
        ),
        Consumer(
            name="reserved (outside the static fraction)",
            gib=reserved,
            formula=f"pre-load free {P:.2f} GiB x (1 - mem_fraction_static {f:.4g})",
            flags=["--mem-fraction-static"],
        ),
    ]
    if cost is not None:
        out.append(
            Consumer(
                name="mamba state pool",
                gib=gib((K + 1) * per_req),
                formula=f"({K} slots + 1 padding) x {per_req:,} B/request "
                f"({cost.layers} layers, conv {cost.conv_dtype}, ssm {cost.ssm_dtype})",
                flags=[
                    "--max-running-requests",
                    "--mamba-full-memory-ratio",
                    "--max-mamba-cache-size",
                    "--mamba-ssm-dtype",
                    "--disable-radix-cache",
                ],
            )
        )
        if spec_gib or (D and cost):
            mrr = v["max_running_requests"]
            out.append(
                Consumer(
                    name="speculative mamba state",
                    gib=gib((R + 1) * D * per_req) if tokens > 0 else spec_gib,
                    formula=f"reserved {mrr} requests x {D} draft tokens x {per_req:,} B = {spec_gib:.2f} GiB "
                    f"(allocated over {R}+1 slots)",
                    flags=[
                        "--max-running-requests",
                        "--speculative-num-draft-tokens",
                        "--speculative-num-steps",
                    ],
                )
            )
    out.append(
        Consumer(
            name="kv cache",
            gib=gib(kv_alloc),
            formula=f"({tokens:,} tokens + {v['page_size']} page) x {cell:,} B/token",
            flags=["--mem-fraction-static", "--kv-cache-dtype", "--max-total-tokens"],
        )
    )
    if draft_kv or memory.draft_weights_gib:
        out.append(
            Consumer(
                name="draft model (weights + KV)",
                gib=memory.draft_weights_gib + gib(draft_kv),
                formula="MTP/EAGLE draft layers, loaded after the target pool (from the reserve)",
                flags=["--speculative-algorithm"],
            )
        )
    out.append(
        Consumer(
            name="req_to_token pool",
            gib=gib(req_to_token),
            formula=f"{R} requests x ({ctx} + {extra_ctx}) x 4 B",
            flags=["--max-running-requests", "--context-length"],
        )
    )
    return sorted(out, key=lambda c: -c.gib)
