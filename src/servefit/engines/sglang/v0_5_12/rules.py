"""What SGLang 0.5.12 (and 0.5.12.post1) decide otherwise than 0.5.13 (paths inside the 0.5.12
wheel; 0.5.12.post1 changes no mirrored function, docs/engines/releases.md). Everything not
named here is the 0.5.13 rule (v0_5_13/rules.py)."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.base import LogFeature
from servefit.engines.sglang.v0_5_13 import rules as newer

VERSION = "0.5.12"

# server_args.py:_handle_model_specific_adjustments (+ arg_groups/nemotron_h_hook.py) calls
# _handle_mamba_radix_cache per architecture: KimiLinear and BailingMoeV2_5 pass
# support_mamba_cache=False; NemotronH, FalconH1, Jet*, GraniteMoeHybrid and Lfm2
# support_mamba_cache_extra_buffer=False; the Qwen3-Next / Qwen3.5 family, InternS2-Preview and
# MiniCPM-V-4.6 allow extra_buffer
EXTRA_BUFFER_ARCHS = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
})  # fmt: skip
MAMBA_RADIX_ARCHS = EXTRA_BUFFER_ARCHS | {
    "NemotronHForCausalLM", "FalconH1ForCausalLM", "JetNemotronForCausalLM",
    "JetVLMForConditionalGeneration", "GraniteMoeHybridForCausalLM", "Lfm2ForCausalLM",
}  # fmt: skip
# the SM100 attention-backend default (sm100_default_attention_backend) of that family
QWEN3_5_HYBRID_ARCHS = EXTRA_BUFFER_ARCHS - {"MiniCPMV4_6ForConditionalGeneration"}

RULES = replace(
    newer.RULES,
    version=VERSION,
    # Requires-Dist: transformers==5.6.0 (0.5.11 and 0.5.12)
    transformers="5.6.0",
    # configs/model_config.py:_get_and_verify_dtype: "Upcasting ..." / "Downcasting ..." at
    # INFO, "Casting ..." at WARNING (logger.debug from 0.5.13)
    dtype_cast_logged=True,
    # memory_pool.py:KVCache._finalize_allocation_log without "dtype: "
    log_format=frozenset({LogFeature.ARGS_MAMBA_SCHEDULER_STRATEGY, LogFeature.LOAD_END_QUANT}),
    mamba_radix_archs=MAMBA_RADIX_ARCHS,
    extra_buffer_archs=EXTRA_BUFFER_ARCHS,
    qwen3_5_hybrid_archs=QWEN3_5_HYBRID_ARCHS,
    radix_unsupported_archs=frozenset({"KimiLinearForCausalLM", "BailingMoeV2_5ForCausalLM"}),
    # server_args.py:_handle_mamba_radix_cache: no period after --disable-radix-cache
    extra_buffer_no_radix=(
        "mamba extra_buffer is not compatible with --disable-radix-cache Overlap scheduling is "
        "already supported with no_buffer + disable_radix_cache. Please use "
        "--mamba-scheduler-strategy no_buffer instead."
    ),
    # configs/model_config.py:piecewise_cuda_graph_disabled_model_archs
    piecewise_off_archs=frozenset(
        {
            "DeepseekV32ForCausalLM",
            "DeepseekV4ForCausalLM",
            "DeepseekV4ForCausalLMNextN",
            "Qwen3NextForCausalLM",
            "GlmMoeDsaForCausalLM",
            "BailingMoeV2_5ForCausalLM",
            "LLaDAModelLM",
        }
    ),  # fmt: skip
    # model_runner_kv_cache_mixin.py:handle_max_mamba_cache: per_req x mrr x D reserved first,
    # K from the rest, no K > 0 check; _resolve_max_num_reqs has no hybrid-state RuntimeError
    spec_reserve="upfront",
    # server_args.py:_handle_gpu_memory_settings: piecewise_cuda_graph_max_tokens not clamped to
    # --context-length (0.5.13 adds the clamp)
    prefill_graph_context_clamp=False,
    # model_runner_kv_cache_mixin.py:init_memory_pool: extra_max_context_len = 4 + draft tokens
    req_to_token_paged_extra=False,
)
