"""What SGLang 0.5.23 decides its own way (paths inside the 0.5.23 wheel): its tables and the
variants of the shared flow's functions it runs (engines/sglang/flow/rules.py:Rules).

The shared flow is servefit/engines/sglang/flow/ (args.py resolution, pools.py sizing).
"""

from __future__ import annotations

from typing import Any

from servefit.engines.base import LogFeature
from servefit.engines.sglang.flow.rules import Rules

VERSION = "0.5.23"

# fmt: off

# arg_groups/fields/*.py defaults (0.5.23) for the args servefit mirrors.
DEFAULTS: dict[str, Any] = {
    "tp_size": 1, "pp_size": 1, "dp_size": 1, "attn_dp_size": 1, "ep_size": 1, "dcp_size": 1, "nnodes": 1,
    "enable_dp_attention": False, "mem_fraction_static": None, "max_running_requests": None,
    "max_total_tokens": None, "chunked_prefill_size": None, "max_prefill_tokens": 16384,
    "context_length": None, "page_size": None, "kv_cache_dtype": "auto",
    "cuda_graph_max_bs_decode": None, "cuda_graph_bs_decode": None, "cuda_graph_max_bs_prefill": None,
    "cuda_graph_bs_prefill": None, "cuda_graph_backend_decode": None, "cuda_graph_backend_prefill": None,
    "disable_cuda_graph": False, "disable_prefill_cuda_graph": False, "disable_decode_cuda_graph": False,
    "disable_cuda_graph_padding": False, "disable_radix_cache": False, "disable_overlap_schedule": False,
    "enable_mixed_chunk": False, "enable_two_batch_overlap": False, "moe_a2a_backend": "none",
    "speculative_algorithm": None, "speculative_draft_model_path": None, "speculative_num_steps": None,
    "speculative_eagle_topk": None, "speculative_num_draft_tokens": None,
    "speculative_ngram_max_bfs_breadth": 10,
    "mamba_full_memory_ratio": None, "max_mamba_cache_size": None, "mamba_ssm_dtype": None,
    "mamba_radix_cache_strategy": "auto", "mamba_track_interval": 256, "linear_attn_backend": "triton",
    "language_only": False, "language_model_only": False, "disaggregation_mode": "null",
    "attention_backend": None, "mm_feature_transport": None, "enable_multimodal": None,
    "swa_full_tokens_ratio": None, "disable_hybrid_swa_memory": False, "enable_hierarchical_cache": False,
}
MAMBA_FULL_MEMORY_RATIO_FALLBACK = 0.9  # fields/schedule.py: Arg(fallback=0.9)
SWA_FULL_TOKENS_RATIO_FALLBACK = 0.8  # fields/schedule.py: swa_full_tokens_ratio Arg(fallback=0.8)

# configs/hybrid_arch.py:mambaish_config (mamba2_config | hybrid_gdn_config | hybrid_kda_config |
# hybrid_lightning_config), by the architectures those config classes serve. Kimi-K3
# (models/kimi_k3.py) is KimiK3Config whose text_config is a KimiLinearConfig:
# kimi_linear_config returns that text_config, so it gets the KDA state pool.
STATE_POOL_ARCHS = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "InternS2PreviewForConditionalGeneration",
    "JetNemotronForCausalLM", "JetVLMForConditionalGeneration", "FalconH1ForCausalLM", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM",
    "Lfm2VlForConditionalGeneration", "ZayaForCausalLM", "Mamba2ForCausalLM", "MambaForCausalLM",
    "FalconMambaForCausalLM", "GraniteMoeHybridForCausalLM", "KimiLinearForCausalLM",
    "BailingMoeV2_5ForCausalLM", "Glm5NextForConditionalGeneration", "KimiK3ForConditionalGeneration",
})
# arg_groups/overrides.py:_MAMBA_RADIX_CACHE_ARCHS
MAMBA_RADIX_ARCHS = frozenset({
    "KimiLinearForCausalLM", "KimiK3ForConditionalGeneration", "BailingMoeV2_5ForCausalLM",
    "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration", "Qwen3NextForCausalLM",
    "Qwen3_5MoeForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
    "Qwen3_5ForCausalLM", "Qwen4ExpForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "FalconH1ForCausalLM", "JetNemotronForCausalLM",
    "JetVLMForConditionalGeneration", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "ZayaForCausalLM",
    "Glm5NextForConditionalGeneration",
})
# arg_groups/overrides.py:_MAMBA_EXTRA_BUFFER_ARCHS
EXTRA_BUFFER_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
    "Glm5NextForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration", "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
})
# arg_groups/model_overrides/qwen3_5.py:_qwen3_5_hybrid_overrides registration
QWEN3_5_HYBRID_ARCHS = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
})
# arg_groups/speculative_hook.py:_handle_eagle_family: archs whose draft path defaults to the model path
DRAFT_IN_TARGET_ARCHS = frozenset({
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
    "HYV3ForCausalLM", "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration",
})
# configs/model_config.py:multimodal_breakable_cuda_graph_supported_model_archs
BREAKABLE_MM_ARCHS = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration", "MiniMaxM3SparseForCausalLM",
})
# configs/model_config.py:ModelConfig.__init__: enable_multimodal None -> False for these
MM_DISABLED_ARCHS = frozenset({
    "Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
    "Step3VLForConditionalGeneration", "InklingForConditionalGeneration",
})

# arg_groups/memory_hook.py:handle_gpu_memory_settings tiers:
# (upper bound MiB, chunked_prefill_size, decode max_bs tp<4, decode max_bs tp>=4)
TIERS = (
    (20 * 1024, 2048, 8, 8),          # T4, 4080
    (35 * 1024, 4096, 48, 160),       # A10, 4090, 5090 (0.5.9: 2048, 24 / 80)
    (60 * 1024, 4096, 32, 160),       # A100 (40GB), L40
    (90 * 1024, 8192, 256, 512),      # H100, A100
    (160 * 1024, 8192, 256, 512),     # H20, H200
    (float("inf"), 16384, 512, 512),  # B200, MI300
)

# Environment variables (sglang/srt/environ.py, 0.5.23) that change memory sizing.
ENV_VARS = (
    "SGLANG_MAMBA_CONV_DTYPE", "SGLANG_MAMBA_SSM_DTYPE", "SGLANG_VLM_CACHE_SIZE_MB",
    "SGLANG_MM_FEATURE_CACHE_MB", "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK",
    "SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
    "SGLANG_SWA_EVICTION_INTERVAL",
)

# fmt: on

RULES = Rules(
    version=VERSION,
    defaults=DEFAULTS,
    # arg_groups/fields: the decode CUDA-graph cap and the mamba radix-cache strategy
    renames={
        "cuda_graph_max_bs": "cuda_graph_max_bs_decode",
        "mamba_scheduler_strategy": "mamba_radix_cache_strategy",
    },
    log_format=frozenset(
        {
            LogFeature.ARGS_MAMBA_RADIX_CACHE_STRATEGY,
            LogFeature.LOAD_END_QUANT,
            LogFeature.KV_ALLOCATED_DTYPE,
        }
    ),
    env_vars=ENV_VARS,
    mamba_full_memory_ratio=MAMBA_FULL_MEMORY_RATIO_FALLBACK,
    swa_full_tokens_ratio=SWA_FULL_TOKENS_RATIO_FALLBACK,
    tiers=TIERS,
    state_pool_archs=STATE_POOL_ARCHS,
    mamba_radix_archs=MAMBA_RADIX_ARCHS,
    extra_buffer_archs=EXTRA_BUFFER_ARCHS,
    qwen3_5_hybrid_archs=QWEN3_5_HYBRID_ARCHS,
    draft_in_target_archs=DRAFT_IN_TARGET_ARCHS,
    breakable_mm_archs=BREAKABLE_MM_ARCHS,
    mm_disabled_archs=MM_DISABLED_ARCHS,
)
