"""What SGLang 0.5.11 decides otherwise than 0.5.12 (paths inside the 0.5.11 wheel). The sizing
code is 0.5.12's (0.5.12's changes were judged size-neutral, docs/engines/releases.md); what
differs is the tables: 0.5.12 registers DeepSeek-V4, InternS2-Preview, MiniCPM-V-4.6, Laguna,
Gemma-4 assistant (archs_0_5_12.txt) and gives them their rules, and its flag table differs.
Everything not named here is the 0.5.12 rule (v0_5_12/rules.py)."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.v0_5_12 import rules as newer

VERSION = "0.5.11"

NEW_IN_0_5_12 = frozenset(
    {"InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration"}
)

RULES = replace(
    newer.RULES,
    version=VERSION,
    # server_args.py:_handle_model_specific_adjustments
    mamba_radix_archs=newer.MAMBA_RADIX_ARCHS - NEW_IN_0_5_12,
    extra_buffer_archs=newer.EXTRA_BUFFER_ARCHS - NEW_IN_0_5_12,
    qwen3_5_hybrid_archs=newer.QWEN3_5_HYBRID_ARCHS - NEW_IN_0_5_12,
    # server_args.py:_handle_speculative_decoding: the draft path defaults to the model path
    draft_in_target_archs=newer.RULES.draft_in_target_archs - {"DeepseekV4ForCausalLM"},
    # configs/model_config.py:piecewise_cuda_graph_disabled_model_archs
    piecewise_off_archs=newer.RULES.piecewise_off_archs
    - {"DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN"},
)
