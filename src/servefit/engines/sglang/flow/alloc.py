"""What SGLang's pools allocate once their sizes are known (mem_cache/memory_pool.py, 0.5.23):
MambaPool (K + 1 slots, the speculative intermediate state over R + 1), the KV pool
((tokens + page) rows; a hybrid SWA model's SWAKVPool), HybridReqToTokenPool ((R + 1) x
(context + extra) int32) and the draft model's KV pool."""

from __future__ import annotations

import math
from typing import Any

from servefit.engines.sglang import common
from servefit.engines.sglang.flow import swa
from servefit.engines.sglang.flow.records import Allocations, Budget, Layout, Tokens
from servefit.engines.sglang.flow.rules import Rules
from servefit.evolve import evolve
from servefit.model.layers import MLA
from servefit.model.spec import ModelSpec
from servefit.units import DTYPE_BYTES


def req_to_token_extra(v: dict[str, Any], rules: Rules) -> int:
    """allocation_sizing.py:get_req_to_token_extra_context_len (before it: 4 + draft tokens,
    model_runner_kv_cache_mixin.py:init_memory_pool's extra_max_context_len)."""
    D = v["speculative_num_draft_tokens"] or 0
    extra = 4 + D
    page = v["page_size"]
    if rules.req_to_token_paged_extra and v["speculative_algorithm"] is not None and page > 1:
        steps, topk = v["speculative_num_steps"] or 1, v["speculative_eagle_topk"] or 1
        if topk == 1:
            per_decode = max(steps * topk, D)
        else:  # get_alloc_len_per_decode, spec v2 page>1 topk>1 tree
            per_decode = max((page - 1 + steps + page - 1) // page * page * topk, D)
        extra = max(extra, 2 * per_decode + page - 1)
    return extra


def allocate(
    model: ModelSpec,
    v: dict[str, Any],
    lay: Layout,
    b: Budget,
    tok: Tokens,
    R: int,
    ok: bool,
    rules: Rules,
) -> Allocations:
    """Every pool of one rank; `ok`: the start gets as far as allocating the draft's pool."""
    a = _target_pools(model, v, lay, b, tok.tokens, R, ok, rules)
    split, geo = tok.split, tok.geo
    if split is not None and geo is not None and tok.tokens > 0:
        sw = swa.allocations(geo, split, lay.page)
        dtype = common.KV_DTYPES[lay.kv_dtype][0]
        a = evolve(
            a,
            kv=sw["kv"],
            k=sw["k"],
            v=sw["v"],
            kv_lines=(tuple(swa.kv_lines(dtype, split, sw)), ()),
            kv_formula=swa.kv_formula(geo, split, lay.page),
        )
    if not (ok and lay.eagle):
        return a
    # draft runner: HybridLinearKVPool([0]) for hybrid targets
    n = 1 if model.is_hybrid else max(1, lay.draft_layers or model.mtp_layers or 1)
    draft_cell = common.kv_cell_size(model, lay.attn_tp, n, lay.kv_dtype)
    a = evolve(a, draft_kv=(tok.tokens + lay.page) * draft_cell)
    if split is not None and geo is not None and split.draft_swa:
        # Path-less MTP draft of a hybrid SWA target (MiMoV2MTP / Step3p5MTP): get_hybrid_layer_ids
        # gives it swa [0], full [] -> an SWAKVPool whose one SWA layer holds swa tokens.
        draft_split = swa.Split(full=split.full, swa=split.swa, n_full=0, n_swa=1)
        draft_alloc = swa.allocations(geo, draft_split, lay.page)
        lines = a.kv_lines
        if lines is not None:
            dtype = common.KV_DTYPES[lay.kv_dtype][0]
            lines = (lines[0], tuple(swa.kv_lines(dtype, draft_split, draft_alloc)))
        a = evolve(a, draft_kv=(split.swa + lay.page) * (geo.swa_k + geo.swa_v), kv_lines=lines)
    return a


def _target_pools(
    model: ModelSpec,
    v: dict[str, Any],
    lay: Layout,
    b: Budget,
    tokens: int,
    R: int,
    ok: bool,
    rules: Rules,
) -> Allocations:
    if tokens <= 0:
        return Allocations()
    rows = tokens + lay.page
    kv = rows * lay.target_cell
    k = vb = 0
    attn = model.first_attention()
    if attn is not None and not isinstance(attn, MLA):
        heads = attn.kv_heads_per_rank(lay.attn_tp)
        size = common.element_size(lay.kv_dtype)
        k = rows * heads * attn.head_dim * size * lay.num_layers
        vb = rows * heads * attn.v_head_dim * size * lay.num_layers
    if R <= 0:
        return Allocations(kv=kv, k=k, v=vb)
    conv = ssm = iss = icw = 0
    cost = lay.cost
    if cost is not None and b.K is not None and b.K > 0:
        conv = int((b.K + 1) * cost.conv_bytes * lay.stage_scale)
        ssm = int((b.K + 1) * cost.ssm_bytes * lay.stage_scale)
        spec_state = ok and v["speculative_algorithm"] is not None
        if spec_state and v["disaggregation_mode"] != "prefill":
            iss, icw = _intermediate(model, v, lay, R, rules.conv_window_dedup)
    # memory_pool.py:ReqToTokenPool.__init__: size + 1 rows where rules.req_to_token_extra_row
    rows_r = R + 1 if rules.req_to_token_extra_row else R
    req_to_token = rows_r * (v["context_len"] + req_to_token_extra(v, rules)) * 4
    return Allocations(
        kv=kv, k=k, v=vb, conv=conv, ssm=ssm, iss=iss, icw=icw, req_to_token=req_to_token
    )


def _intermediate(
    model: ModelSpec, v: dict[str, Any], lay: Layout, R: int, dedup_on: bool
) -> tuple[int, int]:
    """MambaPool's speculative buffers over R + 1 slots: intermediate_ssm_state_cache
    (L_m, R+1, D) + temporal shape in the ssm dtype, and the conv window cache."""
    cost = lay.cost
    assert cost is not None
    D = lay.D
    layers = round(cost.layers * lay.stage_scale)
    conv_b = DTYPE_BYTES[cost.conv_dtype]
    iss = int((R + 1) * D * cost.ssm_bytes * lay.stage_scale)
    kda = bool(model.layer_ids("kda"))
    topk = v["speculative_eagle_topk"]
    # memory_pool.py:conv_window_dedup_enabled: not NPU/CPU, not KDA, topk <= 1
    dedup = dedup_on and not kda and (topk is None or topk <= 1)
    icw = 0
    for shape in cost.conv_shapes:
        win = shape[-1]
        icw += (math.prod(shape) // win * (D + win - 1)) if dedup else D * math.prod(shape)
    return iss, layers * (R + 1) * icw * conv_b
