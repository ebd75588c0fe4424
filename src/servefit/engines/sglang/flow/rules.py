"""What one SGLang release (0.5.10 onward) decides its own way: the record each release's rules
module declares (engines/sglang/v<version>/rules.py: RULES), and the only thing the shared flow
asks about a release.

A field is either a table read from the wheel (defaults, architecture lists, memory tiers) or a
switch naming which of the known variants of an engine function the release runs. Each field
says which function it stands for; the release's rules module cites the file in its wheel.
Switches default to the newest mirrored release's behaviour, so a release's rules module names
only where it differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from servefit.engines.base import LogFeature
from servefit.engines.sglang.layout import LayoutRules
from servefit.frozen import frozen


@frozen
class Rules:
    """One SGLang release's answers to the shared flow (see the module docstring)."""

    version: str
    # ServerArgs field defaults for the args servefit mirrors (this release's attribute names)
    defaults: Mapping[str, Any]
    # attributes the flag table spells differently from the engine's canonical (0.5.9) name
    renames: Mapping[str, str]
    # the line formats the release prints (doctor tells releases apart by them)
    log_format: frozenset[LogFeature]
    # environment variables the release reads that change memory sizing
    env_vars: tuple[str, ...]
    # --mamba-full-memory-ratio / --swa-full-tokens-ratio when the user gives none
    mamba_full_memory_ratio: float
    swa_full_tokens_ratio: float
    # handle_gpu_memory_settings: (upper bound MiB, chunked_prefill_size, decode max_bs at
    # TP < 4, decode max_bs at TP >= 4), first bound above the GPU's memory wins
    tiers: tuple[tuple[float, int, int, int], ...]
    # configs/hybrid_arch.py:mambaish_config: architectures given a recurrent-state pool
    state_pool_archs: frozenset[str]
    # the mamba radix-cache resolution: architectures it applies to / that support extra_buffer
    mamba_radix_archs: frozenset[str]
    extra_buffer_archs: frozenset[str]
    # the Qwen3.5-hybrid SM100 override (attention backend and page size)
    qwen3_5_hybrid_archs: frozenset[str]
    # speculative decoding: architectures whose draft path defaults to the model path
    draft_in_target_archs: frozenset[str]
    # multimodal architectures that keep the breakable prefill CUDA graph
    breakable_mm_archs: frozenset[str]
    # ModelConfig: architectures whose enable_multimodal None means False
    mm_disabled_archs: frozenset[str]

    # --- switches (defaults: the newest release's behaviour) ---------------------------------
    # mem_cache/kv_cache_configurator.py:KVCacheConfigurator._handle_max_mamba_cache: how the
    # speculative intermediate state and the state pool are taken from the budget.
    # "joint": K solved jointly with the intermediate state, K x per_req and capped x D x
    # per_req reserved; "joint_padded": the same with the pools' +1 padding slot in the solve
    # and in every reservation ((K + 1) x per_req, (capped + 1) x D x per_req); "upfront"
    # (model_runner_kv_cache_mixin.py:handle_max_mamba_cache before 0.5.13): mrr x D x per_req
    # taken from the budget first, K from the rest, K x per_req reserved, no K > 0 check
    spec_reserve: str = "joint_padded"
    # _handle_max_mamba_cache: per_req charged at the largest PP stage's share of the recurrent
    # layers (stage_per_req); False: every recurrent layer's, on each stage
    stage_state_share: bool = True
    # _calculate_mamba_ratio: SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK lowers the base ratio by one
    skip_decode_lock_ratio: bool = True
    # resolve_max_num_reqs: the "max_running_requests is capped to …" warning (and no
    # "reduced from" warning when the state pool capped it)
    mamba_cap_warning: bool = True
    # _profile_available_bytes: mm_runtime_reservation_gb taken out of the budget
    mm_reservation: bool = True
    # model_runner_components/spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state: with no
    # draft path the draft KV layers come from the target config (num_nextn_predict_layers);
    # False: only a draft path's config counts, path-less drafts add no KV layers to the cell
    pathless_draft_layers: bool = True
    # _handle_max_mamba_cache (_pd_prefill_skips_mamba_spec_state): a PD prefill server reserves
    # no speculative intermediate state
    pd_prefill_skips_spec_state: bool = True
    # handle_gpu_memory_settings: a default decode CUDA-graph max_bs is clamped to an explicit
    # --max-running-requests
    decode_bs_clamp: bool = True
    # handle_gpu_memory_settings: the MLA prefill CUDA-graph max_bs; None means
    # min(8192, chunked_prefill_size)
    mla_prefill_graph_max_bs: int | None = None
    # handle_gpu_memory_settings: the prefill CUDA-graph max_bs clamped to an explicit
    # --context-length
    prefill_graph_context_clamp: bool = False
    # handle_gpu_memory_settings: breakable prefill graphs under PP capped at 8192 tokens
    # (_DEFAULT_PP_PREFILL_CUDA_GRAPH_MAX_TOKENS)
    pp_prefill_graph_cap: bool = True
    # resolve_max_num_reqs / _handle_max_mamba_cache: max(1, mrr // attn_dp); False: mrr // attn_dp
    mrr_floor_one: bool = True

    # --- switches of the releases before 0.5.16 (defaults: the newest release's behaviour) -----
    # attribute names the flow reads (0.5.23 spelling) that this release spells otherwise
    # (ServerArgs fields: 0.5.10-0.5.13 cuda_graph_max_bs, cuda_graph_bs, mamba_scheduler_strategy)
    flow_names: Mapping[str, str] = field(default_factory=dict)
    # DP attention: "attn_dp_size" (parallel_hook.py:handle_deprecated_dp_attention maps
    # --enable-dp-attention --dp-size N to --attn-dp-size N) | "flag" (server_args.py: the
    # attention DP degree is dp_size while enable_dp_attention is set; no attn_dp_size field)
    dp_attention: str = "attn_dp_size"
    # the mamba radix-cache pass: "resolution" (server_args.py:_handle_mamba_radix_cache(model_arch)
    # / overrides.py:_mamba_radix_cache_resolution: auto -> extra_buffer with overlap or paging)
    # | "handler" (server_args.py:_handle_missing_default_values turns auto into no_buffer, then
    # _handle_model_specific_adjustments calls _handle_mamba_radix_cache per architecture)
    mamba_radix_cache: str = "resolution"
    # "handler": architectures passed support_mamba_cache=False (radix cache turned off)
    radix_unsupported_archs: frozenset[str] = frozenset()
    # "handler": spec + no_buffer + radix cache: "error" (ValueError) | "error_cuda" (ROCm turns
    # the radix cache off instead)
    spec_no_buffer_radix: str = "error_cuda"
    # "handler": the ValueError text for extra_buffer with --disable-radix-cache
    extra_buffer_no_radix: str = (
        "mamba extra_buffer is not compatible with --disable-radix-cache. Overlap scheduling is "
        "already supported with no_buffer + disable_radix_cache. Please use "
        "--mamba-scheduler-strategy no_buffer instead."
    )
    # "handler": no_buffer with the radix cache forces page_size 1 (with a warning)
    no_buffer_page_one: bool = True
    # "handler": --linear-attn-decode-backend flashinfer + no_buffer is a ValueError
    flashinfer_gdn_no_buffer_error: bool = False
    # environ.py:SGLANG_ENABLE_SPEC_V2 default; None: no spec v1 (EAGLE keeps the overlap schedule)
    spec_v2_default: bool | None = None
    # _handle_gpu_memory_settings: MiB reserved for the draft model and its graphs
    # (EAGLE / EAGLE3, STANDALONE); 0 where the draft weights are profiled instead
    eagle_reserve_mib: int = 0
    standalone_reserve_mib: int = 0
    # the prefill CUDA graph the memory heuristic counts: "breakable" (cuda_graph_hook.py) |
    # "piecewise" (server_args.py:_handle_piecewise_cuda_graph, disable_piecewise_cuda_graph)
    prefill_graph: str = "breakable"
    # "piecewise": configs/model_config.py:piecewise_cuda_graph_disabled_model_archs
    piecewise_off_archs: frozenset[str] = frozenset()
    # resolve_max_num_reqs with an explicit --max-running-requests: "tokens_half"
    # (min(mrr, tokens // 2) + "was reduced" warning) | "estimate" (min(mrr // dp, estimate))
    explicit_mrr_cap: str = "tokens_half"
    # _profile_available_bytes: the "Loaded weights leave no GPU memory" ValueError
    budget_error: bool = True
    # configs/model_config.py:_get_and_verify_dtype logs its cast line at INFO / WARNING (0.5.12
    # and before) rather than DEBUG (engines/sglang/dtype.py)
    dtype_cast_logged: bool = False
    # MemoryPoolConfig.__post_init__: "Not enough memory" names the fraction
    not_enough_names_fraction: bool = False
    # Scheduler.init_model_worker loads the draft before the pools (draft weights in the budget)
    draft_before_pools: bool = True
    # memory_pool.py:ReqToTokenPool.__init__ allocates size + 1 rows
    req_to_token_extra_row: bool = True
    # mem_cache/common.py:get_req_to_token_extra_context_len (paged speculative extra)
    req_to_token_paged_extra: bool = True
    # memory_pool.py:conv_window_dedup_enabled
    conv_window_dedup: bool = True
    # the breakable prefill CUDA graph's compatibility checks, in the release's order, by their
    # names in flow/heuristics.py:BREAKABLE_CHECKS (cuda_graph_hook.py:
    # apply_cuda_graph_compatibility, disable_breakable_cudagraph_if_incompatible)
    # the layouts it cannot build the model in (engines/sglang/layout.py)
    layout: LayoutRules = LayoutRules()
    # The code that reads a config before any of this (model/readers.py; profile.py:
    # config_readers): the transformers the wheel pins (its Requires-Dist: SGLang builds the
    # config with transformers' class first, hf_transformers_utils.py:get_config), the text of
    # ModelOptFp8Config.from_config ("regular" FP8 from 0.5.18, "static" before), and the KV
    # pool sized by dividing by the KV bytes per token (to 0.5.16).
    transformers: str = "5.19.0"
    modelopt_fp8_text: str = "regular"
    kv_divides_by_cell: bool = False
    # check_server_args with --pp-size > 1 and speculative decoding on a GPU:
    # "prefill_only" (arg_groups/validation_hook.py:check_pipeline_parallel_compat, 0.5.21 on:
    # EAGLE (NEXTN) only, and only on a disaggregated prefill node unless SGLANG_ENABLE_PP_SPEC)
    # | "refused" (server_args.py / validation_hook.py:check_server_args up to 0.5.20: no
    # speculative decoding at all with PP)
    pp_spec: str = "prefill_only"
    breakable_checks: tuple[str, ...] = (
        "pp",
        "kda_except_glm5_next",
        "dcp",
        "two_batch_overlap",
        "a2a_unvalidated",
        "multimodal",
    )
