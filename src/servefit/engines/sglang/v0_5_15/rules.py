"""What SGLang 0.5.15 decides otherwise than 0.5.16 (paths inside the 0.5.15 wheel); 0.5.15.post1
changes no mirrored function (docs/engines/releases.md). Everything not named here is the
0.5.16 rule (v0_5_16/rules.py)."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.v0_5_16 import rules as newer

VERSION = "0.5.15"

# server_args.py ServerArgs field defaults: the ratios are plain defaults
DEFAULTS = {
    **newer.RULES.defaults,
    "mamba_full_memory_ratio": 0.9,
    "swa_full_tokens_ratio": 0.8,
}

# environ.py (0.5.15): the sizing variables it reads (no mamba skip-decode lock, no
# multimodal reservation, no aiter explicit-fraction switch yet)
ENV_VARS = (
    "SGLANG_MAMBA_CONV_DTYPE", "SGLANG_MAMBA_SSM_DTYPE", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
    "SGLANG_SWA_EVICTION_INTERVAL",
)  # fmt: skip

RULES = replace(
    newer.RULES,
    version=VERSION,
    defaults=DEFAULTS,
    env_vars=ENV_VARS,
    # arg_groups/overrides.py:_MAMBA_EXTRA_BUFFER_ARCHS: no KimiLinear yet
    extra_buffer_archs=newer.RULES.extra_buffer_archs - {"KimiLinearForCausalLM"},
    # arg_groups/speculative_hook.py:_handle_eagle_family: the draft path defaults to the model path
    draft_in_target_archs=newer.RULES.draft_in_target_archs
    - {"HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration"},
    # configs/model_config.py: no multimodal_breakable_cuda_graph_supported_model_archs yet, so
    # a multimodal model runs without the breakable prefill graph
    breakable_mm_archs=frozenset(),
    # server_args.py:_disable_breakable_cudagraph_if_incompatible: MLA, DeepSeek-V4, CP, LoRA,
    # a2a backend, DP attention (the flag), multimodal (DeepSeek-V4 and CP are not planned)
    breakable_checks=("mla", "lora", "a2a_any", "dp_attention_flag", "multimodal"),
    # configs/model_config.py:ModelConfig.__init__: enable_multimodal None -> False (no Inkling)
    mm_disabled_archs=newer.RULES.mm_disabled_archs - {"InklingForConditionalGeneration"},
    # no --attn-dp-size field: --enable-dp-attention with --dp-size (server_args.py)
    dp_attention="flag",
)
