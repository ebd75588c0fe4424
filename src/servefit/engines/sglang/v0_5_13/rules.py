"""What SGLang 0.5.13 decides otherwise than 0.5.14 (paths inside the 0.5.13 wheel); 0.5.13.post1
changes no mirrored function (docs/engines/releases.md). Everything not named here is the
0.5.14 rule (v0_5_14/rules.py)."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.base import LogFeature
from servefit.engines.sglang.v0_5_14 import rules as newer

VERSION = "0.5.13"

# server_args.py ServerArgs: the piecewise prefill graph flags (no per-phase backends yet)
DEFAULTS = {
    **newer.RULES.defaults,
    "disable_piecewise_cuda_graph": False,
    "enforce_piecewise_cuda_graph": False,
}

# server_args.py:_handle_model_specific_adjustments (+ arg_groups/nemotron_h_hook.py) calls
# _handle_mamba_radix_cache for these; KimiLinear passes support_mamba_cache=False, Lfm2
# support_mamba_cache_extra_buffer=False, the others keep the defaults (True, True).
# GraniteMoeHybrid is called only when it has mamba layers (args.py handles it by the model).
MAMBA_RADIX_ARCHS = frozenset({
    "BailingMoeV2_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "MiniCPMV4_6ForConditionalGeneration", "FalconH1ForCausalLM", "JetNemotronForCausalLM",
    "JetVLMForConditionalGeneration", "Lfm2ForCausalLM", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "GraniteMoeHybridForCausalLM",
})  # fmt: skip
EXTRA_BUFFER_ARCHS = MAMBA_RADIX_ARCHS - {"Lfm2ForCausalLM"}

RULES = replace(
    newer.RULES,
    version=VERSION,
    defaults=DEFAULTS,
    # ServerArgs fields: cuda_graph_max_bs, cuda_graph_bs, mamba_scheduler_strategy (the
    # canonical names: nothing renamed against 0.5.9)
    renames={},
    flow_names={
        "cuda_graph_max_bs_decode": "cuda_graph_max_bs",
        "cuda_graph_bs_decode": "cuda_graph_bs",
        "mamba_radix_cache_strategy": "mamba_scheduler_strategy",
    },
    # server_args dump field name; model_runner.py:load_model quant string;
    # memory_pool.py:KVCache._finalize_allocation_log "dtype: " (new in 0.5.13)
    log_format=frozenset(
        {
            LogFeature.ARGS_MAMBA_SCHEDULER_STRATEGY,
            LogFeature.LOAD_END_QUANT,
            LogFeature.KV_ALLOCATED_DTYPE,
        }
    ),
    # server_args.py:_handle_missing_default_values (auto -> no_buffer) and
    # _handle_mamba_radix_cache per architecture; ROCm turns the radix cache off for spec
    mamba_radix_cache="handler",
    mamba_radix_archs=MAMBA_RADIX_ARCHS,
    extra_buffer_archs=EXTRA_BUFFER_ARCHS,
    radix_unsupported_archs=frozenset({"KimiLinearForCausalLM"}),
    spec_no_buffer_radix="error_cuda",
    no_buffer_page_one=True,
    # environ.py:Envs.SGLANG_ENABLE_SPEC_V2 = EnvBool(True); server_args.py:_handle_speculative_decoding
    spec_v2_default=True,
    # server_args.py:_handle_gpu_memory_settings: "eagle draft models and cuda graphs" 4 GiB,
    # "standalone draft model and cuda graphs" 6 GiB (the draft loads after the pools)
    eagle_reserve_mib=4096,
    standalone_reserve_mib=6144,
    # server_args.py:_handle_piecewise_cuda_graph (before the memory heuristic)
    prefill_graph="piecewise",
    # model_runner_kv_cache_mixin.py:_resolve_max_num_reqs: min(mrr // dp, estimate), no warning
    explicit_mrr_cap="estimate",
    # model_runner_kv_cache_mixin.py:_profile_available_bytes: no weights-vs-fraction check
    budget_error=False,
    # managers/scheduler.py:Scheduler.init_model_worker: the draft worker loads after the
    # target's pools are sized
    draft_before_pools=False,
    # mem_cache/memory_pool.py: no conv_window_dedup_enabled (full conv window per draft token)
    conv_window_dedup=False,
)
