"""SGLang memory profiling and pool sizing (0.5.10 onward).

Mirrors (0.5.23) sglang/srt/mem_cache/kv_cache_configurator.py:KVCacheConfigurator:
_profile_available_bytes -> _handle_max_mamba_cache (memory.py) -> config_from_budget
(model_executor/pool_configurator.py:DefaultPoolConfigurator; swa.py for hybrid SWA models) ->
resolve_max_num_reqs, then what mem_cache/memory_pool.py allocates (alloc.py) and prints
(logs.py). See docs/engines/sglang-0.5.23.md §5.
"""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import PerRank, Pools
from servefit.engines.base import MemoryInputs, ResolvedArgs, Sizing
from servefit.engines.sglang import common
from servefit.engines.sglang.common import gib
from servefit.engines.sglang.flow import logs, swa
from servefit.engines.sglang.flow.alloc import allocate
from servefit.engines.sglang.flow.memory import profile_available, requested_per_worker
from servefit.engines.sglang.flow.records import Budget, Layout, Pass, Requests, Tokens
from servefit.engines.sglang.flow.rules import Rules
from servefit.errors import ArgumentError
from servefit.evolve import evolve
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.units import GiB

NOT_ENOUGH = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


def eagle_draft_layers(model: ModelSpec, v: dict[str, Any], rules: Rules) -> int | None:
    """spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state -> eagle_draft_num_layers.

    Path-less: the TARGET config's num_nextn_predict_layers (Qwen3-Next/3.5 carry
    mtp_num_hidden_layers only -> None, no draft term), where the release reads it
    (Rules.pathless_draft_layers; else None). With a draft path: the draft's
    num_nextn_predict_layers, else max(num_hidden_layers, num_attention_layers).
    """
    if v["speculative_draft_model_path"] is None:
        return (
            model.mtp_layers
            if rules.pathless_draft_layers
            and model.mtp_source == "num_nextn_predict_layers"
            and model.mtp_layers
            else None
        )
    return max(1, model.mtp_layers) if model.mtp_source == "num_nextn_predict_layers" else 1


def layout(model: ModelSpec, v: dict[str, Any], env: dict[str, str], rules: Rules) -> Layout:
    """DefaultPoolConfigurator.__init__: full-attention layers of this PP stage; the engine takes
    the MIN token count over PP ranks, i.e. the stage with the most attention layers."""
    if v["kv_cache_dtype"] in ("nvfp4", "fp4_mx_block16", "mxfp8"):
        raise ArgumentError(
            f"servefit does not size --kv-cache-dtype {v['kv_cache_dtype']} for SGLang {rules.version}"
        )
    kv_dtype = common.kv_cache_dtype(model, v["kv_cache_dtype"])
    pp, attn_tp = v["pp_size"], v["tp_size"] // v["attn_dp_size"]
    rec_ids = model.recurrent_layer_ids
    num_layers = common.most_per_stage(model, "attention", pp)
    stage_mamba = common.most_per_stage(model, "recurrent", pp) if rec_ids else 0
    target_cell = common.kv_cell_size(model, attn_tp, num_layers, kv_dtype)
    cell = target_cell
    eagle = v["speculative_algorithm"] in ("EAGLE", "EAGLE3", "STANDALONE")
    draft_layers = eagle_draft_layers(model, v, rules) if eagle else None
    if draft_layers and num_layers > 0:  # draft KV counted inside the target budget
        cell += int(target_cell * draft_layers / num_layers)
    return Layout(
        attn_tp=attn_tp,
        page=v["page_size"],
        ctx=v["context_len"],
        kv_dtype=kv_dtype,
        num_layers=num_layers,
        stage_mamba=stage_mamba,
        stage_scale=stage_mamba / max(len(rec_ids), 1),
        target_cell=target_cell,
        cell=cell,
        eagle=eagle,
        draft_layers=draft_layers,
        D=v["speculative_num_draft_tokens"] or 0,
        cost=common.state_cost(model, attn_tp, None, env),
    )


def size_pools(
    model: ModelSpec,
    gpus: GPUSet,
    resolved: ResolvedArgs,
    memory: MemoryInputs,
    rules: Rules,
    *,
    text: bool = True,
) -> Sizing:
    v, env = resolved.values, resolved.env
    lay = layout(model, v, env, rules)
    b = profile_available(model, v, memory, lay, env, rules)
    tok = token_pool(model, v, env, lay, b, rules)
    if tok.error == NOT_ENOUGH and rules.not_enough_names_fraction:
        # MemoryPoolConfig.__post_init__ appends the fraction it was given
        suffix = f" Current value: mem_fraction_static={v['mem_fraction_static']}"
        tok = evolve(tok, error=NOT_ENOUGH + suffix)
    error, kind = tok.error, tok.error_kind
    reqs = Requests()
    if error is None:
        reqs = resolve_max_num_reqs(v, b, lay, tok.tokens, rules)
        error, kind = reqs.error, reqs.error_kind
    if error is None and min(lay.ctx - 1, tok.tokens - 1) <= 0:
        error, kind = "AssertionError: Memory pool size is too small", "tokens"
    notes = tok.logs + reqs.logs
    if error is None and tok.tokens < lay.ctx:
        notes += (
            f"KV pool holds {tok.tokens} tokens, fewer than --context-length {lay.ctx}. One "
            "full-length request cannot fit, so long requests will be refused or truncated at "
            "serving time. Lower --context-length, raise --mem-fraction-static, or free memory "
            "taken before the pool is sized.",
        )
    alloc = allocate(model, v, lay, b, tok, reqs.R, ok=error is None, rules=rules)
    p = Pass(model, v, memory, lay, b, tok, reqs, alloc, error, kind, notes)
    return _sizing(p, _warnings(p, rules), rules, text=text)


def token_pool(
    model: ModelSpec, v: dict[str, Any], env: dict[str, str], lay: Layout, b: Budget, rules: Rules
) -> Tokens:
    """calculate_pool_sizes (a hybrid SWA model: swa.split), then _apply_token_constraints."""
    # pool_configurator.py:create_memory_pool_configurator: hybrid SWA models split the budget.
    geo = swa.geometry(model, lay.attn_tp, lay.kv_dtype) if swa.is_hybrid_swa(model, v) else None
    if b.error is not None:
        return Tokens(tokens=0, cell=lay.cell, geo=geo, error=b.error, error_kind=b.error_kind)
    if geo is not None:
        draft = swa.draft_layers(model, v, geo, lay.draft_layers if lay.eagle else None)
        split = swa.split(model, v, env, geo, int(b.rest * GiB), draft, rules)
        if split.error:  # raised inside calculate_pool_sizes: nothing is allocated
            return Tokens(0, int(split.cell), split, geo, split.error, "tokens", tuple(split.logs))
        return Tokens(split.full or split.swa, int(split.cell), split, geo, logs=tuple(split.logs))
    page, cell = lay.page, lay.cell
    tokens = int(b.rest * GiB) // cell // page * page if cell else 0
    if tokens <= 0:
        return Tokens(tokens, cell, error=NOT_ENOUGH, error_kind="tokens")
    logs_: tuple[str, ...] = ()
    user = v["max_total_tokens"]
    if user is not None:
        if user > tokens:
            logs_ = (
                f"max_total_tokens={user} is larger than the profiled value {tokens}. Use the "
                "profiled value instead.",
            )
        tokens = min(tokens, user) // page * page
        if tokens <= 0:
            return Tokens(tokens, cell, error=NOT_ENOUGH, error_kind="tokens", logs=logs_)
    return Tokens(tokens, cell, logs=logs_)


def resolve_max_num_reqs(
    v: dict[str, Any], b: Budget, lay: Layout, tokens: int, rules: Rules
) -> Requests:
    """KVCacheConfigurator.resolve_max_num_reqs (per attention-DP worker)."""
    cost, ctx = lay.cost, lay.ctx
    estimated = max(min(int(tokens / ctx * 512), 4096), 2048)
    mrr = v["max_running_requests"]
    requested: int | None = None
    if mrr is not None and rules.explicit_mrr_cap == "estimate":
        # model_runner_kv_cache_mixin.py:_resolve_max_num_reqs: min(mrr // dp, estimate), no warning
        reqs = min(mrr // v["attn_dp_size"], estimated)
        reason = "max_running_requests" if reqs < estimated else f"default estimate {estimated}"
    elif mrr is not None:
        requested = requested_per_worker(v, rules)
        reqs = min(requested, tokens // 2)
        reason = "max_running_requests" if reqs == requested else "KV tokens // 2"
    else:
        reqs = min(estimated, tokens // 2)
        reason = (
            f"default estimate clamp(tokens/{ctx}*512, 2048, 4096) = {estimated}"
            if reqs == estimated
            else "KV tokens // 2"
        )
    capped = False
    out: list[str] = []
    if cost is not None:
        assert b.K is not None and b.ratio is not None
        cap = b.K // b.ratio
        if cap < reqs:
            reason = f"mamba state cache: {b.K} slots // {b.ratio} per request"
        if cap < reqs and rules.mamba_cap_warning:
            capped = True  # the cap warning replaces the "reduced from" one
            out.append(
                f"max_running_requests is capped to {cap} by the mamba state cache (max_mamba_cache_size="
                f"{b.K}, {b.ratio} state slots per request). To raise it: increase --mamba-full-memory-ratio "
                "or --max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16."
            )
        reqs = min(reqs, cap)
        # the hybrid-state RuntimeError came with the joint solve; before it the scheduler's
        # assertion below fails instead
        if reqs <= 0 and rules.spec_reserve != "upfront":
            return Requests(
                reqs,
                reason,
                f"RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
                f"max_mamba_cache_size={b.K}, mamba_ratio={b.ratio}, resulting max_num_reqs={reqs}. Try: (1) reduce "
                "--max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory.",
                "mamba",
                tuple(out),
            )
    if requested is not None and reqs < requested and not capped:
        out.append(
            f"max_running_requests was reduced from the requested {requested} to {reqs} (per dp worker) due "
            "to the available KV cache capacity."
        )
    if reqs <= 0:  # managers/tp_worker.py
        return Requests(
            reqs, reason, "AssertionError: max_running_request is zero", "tokens", tuple(out)
        )
    return Requests(reqs, reason, logs=tuple(out))


def _warnings(p: Pass, rules: Rules) -> tuple[str, ...]:
    out = []
    model, v, lay = p.model, p.v, p.lay
    if lay.eagle and v["speculative_draft_model_path"] is not None:
        out.append(
            "the draft checkpoint's config is not read: its KV layer count is taken as "
            f"{lay.draft_layers} (num_nextn_predict_layers, else 1)"
        )
    if p.tok.geo is None and swa.is_hybrid_swa(model, v):
        out.append(
            f"SGLang {rules.version} gives {model.architecture} a hybrid sliding-window KV pool; "
            "servefit does not mirror its geometry and plans every layer as full attention"
        )
    if p.error is None and p.free_after < 0:
        out.append(
            f"the draft KV pool ({gib(p.alloc.draft_kv):.2f} GiB) exceeds the {p.pool_end:.2f} GiB "
            "left after the target pools: expect a CUDA out-of-memory while the draft pool is allocated"
        )
    return tuple(out)


def _sizing(p: Pass, warnings: tuple[str, ...], rules: Rules, *, text: bool) -> Sizing:
    consumer, detail = logs.culprit(p.b, p.error_kind) if p.error else (None, None)
    split = p.tok.split
    if split is not None and split.error:
        consumer, detail = (
            "kv cache",
            (
                f"{p.b.rest:.2f} GiB budget at {split.cell:,.1f} B per full token "
                f"({split.mode} split) leaves the SWA pool {split.swa} / full pool {split.full} tokens"
            ),
        )
    return Sizing(
        pools=_pools(p),
        per_rank=_per_rank(p),
        error=p.error,
        error_consumer=consumer,
        error_detail=detail,
        consumers=tuple(logs.consumers(p)) if text else (),
        log_lines=tuple(logs.log_lines(p, rules)) if text else (),
        warnings=warnings,
        extra=_extra(p),
    )


def _per_rank(p: Pass) -> PerRank:
    a, m = p.alloc, p.memory
    return PerRank(
        total_gib=m.total_gib,
        pre_load_free_gib=p.b.P,
        weights_gib=m.weights_gib,
        draft_weights_gib=m.draft_weights_gib,
        kv_cache_gib=gib(a.kv),
        mamba_state_gib=gib(a.mamba),
        spec_state_gib=gib(a.iss + a.icw),
        draft_kv_gib=gib(a.draft_kv),
        req_to_token_gib=gib(a.req_to_token),
        reserved_gib=p.b.slack,
        free_gib=p.free_after,
    )


def _pools(p: Pass) -> Pools:
    b, lay, cost, v = p.b, p.lay, p.lay.cost, p.v
    ok = p.error is None
    spec_state = (
        ok
        and cost is not None
        and v["speculative_algorithm"] is not None
        and v["disaggregation_mode"] != "prefill"
    )
    return Pools(
        budget_gib=b.budget,
        kv_budget_gib=b.budget - b.spec_reserved - b.mamba_reserved,
        kv_bytes_per_token=p.tok.cell,
        max_total_num_tokens=max(p.tokens, 0),
        page_size=lay.page,
        context_len=lay.ctx,
        mamba_state_bytes_per_request=b.per_req,
        conv_state_bytes_per_request=int(cost.conv_bytes * lay.stage_scale) if cost else 0,
        ssm_state_bytes_per_request=int(cost.ssm_bytes * lay.stage_scale) if cost else 0,
        mamba_layers=lay.stage_mamba,
        max_mamba_cache_size=b.K,
        mamba_slots_per_request=b.ratio,
        mamba_sizing=b.sizing,
        spec_state_slots=(p.R + 1) if spec_state else None,
        effective_max_running_requests=p.R if ok else 0,
        cap_reason=p.reqs.cap_reason,
        max_concurrency_at_context=round(max(p.tokens, 0) / lay.ctx, 2),
    )


def _extra(p: Pass) -> dict[str, Any]:
    b, v, split, geo = p.b, p.v, p.tok.split, p.tok.geo
    extra: dict[str, Any] = {
        "mm_reservation_gib": b.mm_gib,
        "spec_state_reserved_gib": b.spec_reserved,
        "draft_kv_in_budget": bool(p.lay.draft_layers),
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
    return extra
