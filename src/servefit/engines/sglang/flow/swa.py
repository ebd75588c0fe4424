"""SGLang hybrid sliding-window (SWA) KV pools: which models get one, their per-token
geometry, and how the KV budget is split between the full-attention pool and the SWA pool.

Mirrors (paths inside the 0.5.23 wheel): configs/model_config.py (is_hybrid_swa_model,
get_hybrid_layer_ids, ModelConfig head/kv-head fields), model_executor/model_runner_components/
load_model_utils.py:resolve_sliding_window_size, model_executor/pool_configurator.py
(create_memory_pool_configurator, HybridSWAPoolConfigurator, SWARequestCapPoolConfigurator,
compute_swa_request_cap), mem_cache/kv_cache_configurator.py (config_from_budget,
_apply_token_constraints, _build_hybrid_swa_kv_pool) and mem_cache/swa_memory_pool.py:SWAKVPool.
See docs/engines/sglang-0.5.23.md §5.8.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servefit.engines.sglang import common
from servefit.engines.sglang.common import f2, gib
from servefit.engines.sglang.flow.rules import Rules
from servefit.errors import ConfigError
from servefit.frozen import frozen
from servefit.model.layers import MLA
from servefit.model.spec import ModelSpec
from servefit.units import GiB

# configs/model_config.py:is_hybrid_swa_model, with SWA_SINK_ARCHS and MIMO_V2_MODEL_ARCHS inlined.
HYBRID_SWA_ARCHS = frozenset(
    {
        "BeamForCausalLM", "Llama4ForConditionalGeneration", "DeepseekV4ForCausalLM",
        "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark", "GptOssForCausalLM",
        "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM", "IQuestQ1MTP",
        "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2MTP", "Step3p5ForCausalLM",
        "Step3p5MTP", "Step3p7ForConditionalGeneration", "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration", "EmbeddingGemma2Model",
        "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
        "LagunaForCausalLM", "MellumForCausalLM", "MuseGlimmerForCausalLM",
        "MuseGlimmerForConditionalGeneration", "InklingForConditionalGeneration",
        "InklingForConditionalGenerationMTP", "UnlimitedOCRForCausalLM",
    }
)  # fmt: skip
MIMO_V2_ARCHS = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
# The families whose layer split, geometry and window servefit mirrors; the rest of the list
# (Gemma4, DeepSeek-V4's compressed pools, Inkling, ...) is planned as full attention, with a warning.
MIRRORED_ARCHS = frozenset({"GptOssForCausalLM", "Llama4ForConditionalGeneration", *MIMO_V2_ARCHS, "Step3p5ForCausalLM"})  # fmt: skip
# ModelConfig._derive_hybrid_model: is_hybrid_swa_compress (architectures[0]); their SWAKVPool
# gets the SWA heads/dims (kv_cache_configurator.py:_build_hybrid_swa_kv_pool).
COMPRESS_ARCHS = frozenset({*MIMO_V2_ARCHS, "MiMoV2MTP"})
SWA_EVICTION_INTERVAL = 128  # environ.py: SGLANG_SWA_EVICTION_INTERVAL = EnvInt(128)


def architectures(model: ModelSpec) -> list[str]:
    archs = model.raw_config.get("architectures")
    if isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs):
        return archs
    return [model.architecture]


def _text(model: ModelSpec) -> dict[str, Any]:
    return model.text_config or model.raw_config


def is_hybrid_swa_model(model: ModelSpec) -> bool:
    """configs/model_config.py:is_hybrid_swa_model (0.5.23)."""
    archs, t = architectures(model), _text(model)
    if any(a in HYBRID_SWA_ARCHS for a in archs):
        if "BeamForCausalLM" in archs:
            return "sliding_attention" in (t.get("layer_types") or [])
        # Laguna counts only when it actually has a sliding window.
        return "LagunaForCausalLM" not in archs or bool(t.get("sliding_window"))
    return bool(t.get("is_hybrid_swa", False))


def is_hybrid_swa(model: ModelSpec, v: dict[str, Any]) -> bool:
    """ModelConfig._derive_hybrid_model: is_hybrid_swa_model and not --disable-hybrid-swa-memory."""
    return is_hybrid_swa_model(model) and not v.get("disable_hybrid_swa_memory")


@frozen
class Geometry:
    """One rank's hybrid SWA layout. *_per_token: the configurator's bytes per token of one layer
    (HybridSWAPoolConfigurator._full_per_token / _swa_per_token); *_k / *_v: what SWAKVPool's
    sub-pools allocate per token of one layer."""

    full_ids: tuple[int, ...]
    swa_ids: tuple[int, ...]
    full_per_token: int
    swa_per_token: int
    full_k: int
    full_v: int
    swa_k: int
    swa_v: int
    window: int | None


def _layer_ids(model: ModelSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """configs/model_config.py:get_hybrid_layer_ids -> (swa ids, full ids). Falls back to the
    ModelSpec's classification when the config lacks the pattern key."""
    archs, t = architectures(model), _text(model)
    n = t.get("num_hidden_layers") or model.num_layers
    if "Llama4ForConditionalGeneration" in archs:
        return (
            tuple(i for i in range(n) if (i + 1) % 4 != 0),
            tuple(i for i in range(n) if (i + 1) % 4 == 0),
        )
    if any(a in MIMO_V2_ARCHS for a in archs) and isinstance(t.get("hybrid_layer_pattern"), list):
        pattern = t["hybrid_layer_pattern"]
        return (
            tuple(i for i in range(n) if pattern[i] == 1),
            tuple(i for i in range(n) if pattern[i] == 0),
        )
    types = t.get("layer_types")
    if isinstance(types, list) and types:  # SWA_SINK_ARCHS; Step3p5 also drops ids >= n
        limit = n if "Step3p5ForCausalLM" in archs else len(types)
        return (
            tuple(i for i, x in enumerate(types) if x == "sliding_attention" and i < limit),
            tuple(i for i, x in enumerate(types) if x == "full_attention" and i < limit),
        )
    return model.layer_ids("sliding_window"), model.layer_ids("full_attention")


def _total_kv_heads(t: dict[str, Any]) -> int:
    """ModelConfig.get_total_num_kv_heads: the first of these attributes, else the query heads."""
    if t.get("multi_query"):
        return 1
    for key in (
        "n_head_kv",
        "num_kv_heads",
        "num_key_value_heads",
        "multi_query_group_num",
        "num_attention_groups",
    ):
        if t.get(key) is not None:
            return int(t[key])
    return int(t["num_attention_heads"])


def _window(model: ModelSpec) -> int | None:
    """load_model_utils.py:resolve_sliding_window_size. GptOss defines
    get_attention_sliding_window_size = config.sliding_window - 1 (models/gpt_oss.py); the others
    take ModelConfig.sliding_window_size (sliding_window_size / sliding_window / window_size),
    else attention_chunk_size (Llama 4)."""
    t = _text(model)
    if "GptOssForCausalLM" in architectures(model) and t.get("sliding_window") is not None:
        return int(t["sliding_window"]) - 1
    for key in ("sliding_window_size", "sliding_window", "window_size", "attention_chunk_size"):
        if t.get(key) is not None:
            return int(t[key])
    return None


def geometry(model: ModelSpec, attn_tp: int, kv_dtype: str) -> Geometry | None:
    """None unless SGLang gives this model a hybrid SWA pool that servefit mirrors."""
    if model.architecture not in MIRRORED_ARCHS or model.is_hybrid:
        return None
    try:
        return _geometry(model, attn_tp, kv_dtype)
    except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError) as exc:
        # A config shape the engine would also choke on: one clear line, not a traceback.
        raise ConfigError(
            f"cannot read the sliding-window layout of {model.architecture}: "
            f"{type(exc).__name__}: {exc}"[:300]
        ) from None


def _geometry(model: ModelSpec, attn_tp: int, kv_dtype: str) -> Geometry | None:
    attn = model.first_attention()
    if attn is None or isinstance(attn, MLA):
        return None
    t = _text(model)
    swa_ids, full_ids = _layer_ids(model)
    size = common.element_size(kv_dtype)
    if "num_attention_heads" in t:
        # ModelConfig: head_dim = config.head_dim or hidden // heads; v_head_dim falls back to
        # head_dim; swa_head_dim to head_dim; swa_v_head_dim to swa_head_dim.
        hd = t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"]
        vhd = t.get("v_head_dim") or hd
        swa_hd = t.get("swa_head_dim") or hd
        swa_vhd = t.get("swa_v_head_dim") or swa_hd
        total_kv = _total_kv_heads(t)
        if t.get("swa_num_key_value_heads") is not None:  # get_swa_num_kv_heads
            total_swa_kv = int(t["swa_num_key_value_heads"])
        elif isinstance(t.get("attention_other_setting"), dict):  # Step3p5
            total_swa_kv = int(t["attention_other_setting"]["num_attention_groups"])
        else:
            total_swa_kv = total_kv
    else:  # a hand-built ModelSpec without a config: its own mixers
        hd, vhd, total_kv = attn.head_dim, attn.v_head_dim, attn.num_kv_heads
        swa_mixer = model.attention_mixer(swa_ids[0]) if swa_ids else attn
        if isinstance(swa_mixer, MLA):  # no MLA model has sliding-window layers
            return None
        swa_hd, swa_vhd, total_swa_kv = (
            swa_mixer.head_dim,
            swa_mixer.v_head_dim,
            swa_mixer.num_kv_heads,
        )
    heads = max(1, total_kv // attn_tp)  # get_num_kv_heads (dcp 1)
    swa_heads = max(1, total_swa_kv // attn_tp)  # get_swa_num_kv_heads
    if model.architecture in COMPRESS_ARCHS:  # SWA heads/dims and v_head_dim reach the pools
        full_k, full_v = heads * hd, heads * vhd
        swa_k, swa_v = swa_heads * swa_hd, swa_heads * swa_vhd
    else:  # SWAKVPool(head_num=get_num_kv_heads, head_dim=head_dim), V as wide as K
        full_k = full_v = swa_k = swa_v = heads * hd
    return Geometry(
        full_ids=full_ids,
        swa_ids=swa_ids,
        full_per_token=heads * (hd + vhd) * size,
        swa_per_token=swa_heads * (swa_hd + swa_vhd) * size,
        full_k=full_k * size,
        full_v=full_v * size,
        swa_k=swa_k * size,
        swa_v=swa_v * size,
        window=_window(model),
    )


@dataclass
class Split:
    """The full/SWA token split on one rank (HybridSWAPoolConfigurator + config_from_budget)."""

    full: int = 0
    swa: int = 0
    cell: float = 0.0  # budget bytes per full token (the configurator's _cell_size)
    ratio: float = 0.0  # swa_full_tokens_ratio (split() sets it)
    mode: str = "ratio"  # "ratio" | "request cap" | "all SWA"
    swa_cap: int | None = None
    n_full: int = 0  # layers of the reported PP stage
    n_swa: int = 0
    draft_full: int = 0
    draft_swa: int = 0
    logs: list[str] = field(default_factory=list)
    error: str | None = None


def draft_layers(
    model: ModelSpec, v: dict[str, Any], geo: Geometry, eagle_layers: int | None
) -> tuple[int, int]:
    """HybridSWAPoolConfigurator.__init__ draft terms (EAGLE/STANDALONE target). Path-less, the
    draft config is the target's: eagle_draft_swa_num_layers = its SWA layer count
    (spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state), capped at the draft layers. With
    a draft path servefit does not read the draft config and takes it as full attention."""
    if not eagle_layers:
        return 0, 0
    swa = min(len(geo.swa_ids), eagle_layers) if v["speculative_draft_model_path"] is None else 0
    return eagle_layers - swa, swa


def alloc_len_per_decode(v: dict[str, Any]) -> int:
    """mem_cache/allocation_sizing.py:get_alloc_len_per_decode (dcp 1)."""
    algo = v["speculative_algorithm"]
    if algo is None:
        return 1
    steps, topk = v["speculative_num_steps"] or 1, v["speculative_eagle_topk"] or 1
    tokens, page = v["speculative_num_draft_tokens"] or 0, v["page_size"]
    if page == 1 or topk == 1 or algo == "NGRAM":  # NGRAM: not has_draft_kv()
        return max(steps * topk, tokens)
    return max(((page - 1) + steps + page - 1) // page * page * topk, tokens)


def request_cap(v: dict[str, Any], env: dict[str, str], window: int) -> int:
    """pool_configurator.py:compute_swa_request_cap (not PD-decode)."""
    page = v["page_size"]
    draft = v["speculative_num_draft_tokens"] or 1
    interval = max(1, int(env.get("SGLANG_SWA_EVICTION_INTERVAL", SWA_EVICTION_INTERVAL)))
    trailing = window + interval * draft + page
    if v["speculative_algorithm"] is None:
        decode_alloc = page
    elif v["disable_overlap_schedule"]:  # utils/common.py:spec_decode_alloc_len_per_request
        steps, topk = v["speculative_num_steps"] or 1, v["speculative_eagle_topk"] or 1
        if page > 1 and topk > 1:
            steps, draft_al = _ceil_align(steps + page, page), _ceil_align(draft, page)
        elif page > 1:
            steps, draft_al = _ceil_align(steps, page), _ceil_align(draft, page)
        else:
            draft_al = draft
        decode_alloc = max(steps * topk, draft_al)
    else:  # spec v2 keeps 2 x alloc_len outstanding
        decode_alloc = 2 * alloc_len_per_decode(v)
    num_reqs = max(1, v["max_running_requests"] // v["attn_dp_size"])
    chunks = 1 if v["disable_overlap_schedule"] else 2
    return (trailing + decode_alloc) * num_reqs + chunks * v["chunked_prefill_size"] + page


def _ceil_align(x: int, a: int) -> int:
    return -(-x // a) * a


def _cap_applies(v: dict[str, Any], geo: Geometry, n_full: int) -> bool:
    """SWARequestCapPoolConfigurator.is_applicable."""
    cps = v["chunked_prefill_size"]
    return (
        v["max_running_requests"] is not None
        and v["disable_radix_cache"]
        and (v["disaggregation_mode"] == "decode" or (cps is not None and cps > 0))
        and geo.window is not None
        and n_full > 0
    )


NOT_ENOUGH = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


def _use_line(full: int, swa: int) -> str:
    return f"Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa}"


def _validate(swa: int, window: int | None, page: int) -> str | None:
    """MemoryPoolConfigurator.validate_swa_pool_size."""
    if window is not None and window + page >= swa:
        return (
            f"ValueError: SWA pool ({swa} tokens) cannot hold even one request: the prefill admission "
            f"floor is sliding_window_size ({window}) + page_size ({page}). Increase "
            "--swa-full-tokens-ratio or the total KV budget."
        )
    return None


def _solve(s: Split, geo: Geometry, n_full: int, max_tokens: int, page: int) -> int:
    """HybridSWAPoolConfigurator._solve_pool_sizes; sets s.full/s.swa, returns max_total."""
    if n_full == 0:  # all-SWA stage: the ratio is not applied
        s.full, s.swa, s.mode = 0, max_tokens // page * page, "all SWA"
        s.logs.append(f"Use sliding window memory pool (all SWA). swa_layer_tokens={s.swa}")
        return s.swa
    s.full = max_tokens // page * page
    s.swa = int(s.full * s.ratio) // page * page
    s.error = _validate(s.swa, geo.window, page)
    if s.error is None:
        s.logs.append(_use_line(s.full, s.swa))
    return s.full


def split(
    model: ModelSpec,
    v: dict[str, Any],
    env: dict[str, str],
    geo: Geometry,
    available_bytes: int,
    draft: tuple[int, int],
    rules: Rules,
) -> Split:
    """calculate_pool_sizes on every PP stage -> _apply_token_constraints (user cap, PP MIN) ->
    calculate_pool_sizes_from_max_tokens when that changed the count; the engine logs rank 0."""
    page, pp = v["page_size"], v["pp_size"]
    ratio = v.get("swa_full_tokens_ratio") or rules.swa_full_tokens_ratio
    dfull, dswa = draft
    stages = [common.pp_indices(model.num_layers, r, pp) for r in range(pp)]
    counts = [
        (sum(s <= i < e for i in geo.full_ids), sum(s <= i < e for i in geo.swa_ids))
        for s, e in stages
    ]
    result: Split | None = None
    capacities = []
    for n_full, n_swa in counts:
        s = Split(ratio=ratio, n_full=n_full, n_swa=n_swa, draft_full=dfull, draft_swa=dswa)
        if n_swa == 0:
            s.error = "AssertionError: Hybrid SWA model must have at least one SWA layer"
            return s
        swa_cell = geo.swa_per_token * (n_swa + dswa)  # _swa_cell_bytes
        full_cell = geo.full_per_token * (n_full + dfull)  # _full_cell_bytes
        if n_full == 0:  # _recompute_cell_size, all-SWA
            s.cell = geo.swa_per_token * (n_swa + dswa) + geo.full_per_token * dfull
        else:
            s.cell = full_cell + ratio * swa_cell
        if _cap_applies(v, geo, n_full):  # SWARequestCapPoolConfigurator.calculate_pool_sizes
            s.mode, s.swa_cap = "request cap", request_cap(v, env, geo.window or 0)
            s.swa = _ceil_align(s.swa_cap, page)
            s.full = int((available_bytes - s.swa * swa_cell) // full_cell) // page * page
            capacity = s.full
            if s.full <= 0:
                s.error = (
                    f"RuntimeError: SWA pool cap ({s.swa} tokens, {s.swa * swa_cell / GiB:.2f} "
                    f"GiB) leaves no room for the full KV pool within the available "
                    f"{available_bytes / GiB:.2f} GiB. Reduce --max-running-requests, lower "
                    "SGLANG_SWA_EVICTION_INTERVAL, or increase --mem-fraction-static."
                )
        else:
            capacity = _solve(s, geo, n_full, int(available_bytes // s.cell), page)
        if s.error is None and capacity <= 0:  # MemoryPoolConfig.__post_init__
            s.error = NOT_ENOUGH
        if s.error is not None:
            return s
        capacities.append(capacity)
        result = result or s  # rank 0 logs
    assert result is not None
    s = result
    tokens = min(capacities)  # PP: all-reduce MIN
    own = capacities[0]
    user = v["max_total_tokens"]
    if user is not None:
        if user > own:
            s.logs.append(
                f"max_total_tokens={user} is larger than the profiled value {own}. Use the "
                "profiled value instead."
            )
        tokens = min(tokens, user)
    if tokens != own:  # calculate_pool_sizes_from_max_tokens
        if s.mode == "request cap":
            s.full, s.swa = tokens // page * page, min(_ceil_align(s.swa_cap or 0, page), tokens)
            capacity = s.full
        else:
            capacity = _solve(s, geo, s.n_full, tokens, page)
        if s.error is None and capacity <= 0:
            s.error = NOT_ENOUGH
    # Report the stage whose pools are largest (the tightest rank).
    s.n_full, s.n_swa = max(
        counts, key=lambda c: c[0] * geo.full_per_token + c[1] * geo.swa_per_token
    )
    return s


def allocations(geo: Geometry, s: Split, page: int) -> dict[str, int]:
    """SWAKVPool: a full MHATokenToKVPool of (full + page) rows x full layers and an SWA one of
    (swa + page) rows x SWA layers (memory_pool.py:MHATokenToKVPool._kv_buffer_shapes)."""
    full_rows, swa_rows = s.full + page, s.swa + page
    out = {
        "full_k": full_rows * geo.full_k * s.n_full,
        "full_v": full_rows * geo.full_v * s.n_full,
        "swa_k": swa_rows * geo.swa_k * s.n_swa,
        "swa_v": swa_rows * geo.swa_v * s.n_swa,
    }
    out["k"] = out["full_k"] + out["swa_k"]
    out["v"] = out["full_v"] + out["swa_v"]
    out["kv"] = out["k"] + out["v"]
    return out


def kv_lines(dtype: str, s: Split, alloc: dict[str, int]) -> list[str]:
    """memory_pool.py:KVCache._finalize_allocation_log with allocation_label "Full" / "SWA",
    then SWAKVPool.__init__'s summary (post-capture sizing off)."""
    return [
        f"Full KV Cache is allocated. dtype: {dtype}, #tokens: {s.full}, K size: "
        f"{f2(gib(alloc['full_k']))} GB, V size: {f2(gib(alloc['full_v']))} GB",
        f"SWA KV Cache is allocated. dtype: {dtype}, #tokens: {s.swa}, K size: "
        f"{f2(gib(alloc['swa_k']))} GB, V size: {f2(gib(alloc['swa_v']))} GB",
        f"SWAKVPool mem usage: {f2(gib(alloc['kv']))} GB, swa size: {s.swa}, full size: {s.full}",
    ]


def kv_formula(geo: Geometry, s: Split, page: int) -> str:
    how = {
        "ratio": f"swa = full x swa_full_tokens_ratio {s.ratio:g}",
        "all SWA": "all layers sliding-window",
        "request cap": f"swa = request cap {s.swa_cap} (radix off, max_running_requests set)",
    }[s.mode]
    draft = (
        f" + {s.draft_full} full / {s.draft_swa} SWA draft layers"
        if s.draft_full or s.draft_swa
        else ""
    )
    return (
        f"full ({s.full:,} + {page}) x {geo.full_per_token:,} B x {s.n_full} layers + SWA "
        f"({s.swa:,} + {page}) x {geo.swa_per_token:,} B x {s.n_swa} layers; {how}; window "
        f"{geo.window}; budget at {s.cell:,.1f} B per full token{draft}"
    )
