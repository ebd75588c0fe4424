"""What SGLang 0.5.18 decides differently from 0.5.19 (paths inside the 0.5.18 wheel); every
other table and variant is 0.5.19's (v0_5_19/rules.py). docs/engines/sglang-0.5.18.md."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.flow.rules import Rules
from servefit.engines.sglang.v0_5_19 import rules as newer

VERSION = "0.5.18"

# arg_groups/overrides.py:_MAMBA_RADIX_CACHE_ARCHS / _MAMBA_EXTRA_BUFFER_ARCHS lack these in
# 0.5.18 (Qwen3.5 text-only classes are registered, models/qwen3_5.py, but take no mamba radix
# resolution; Bailing V3 is registered from 0.5.19)
_NO_MAMBA_RADIX = {
    "BailingMoeV3ForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
}

RULES: Rules = replace(
    newer.RULES,
    version=VERSION,
    # models/kimi_linear.py:KimiDeltaAttention.__init__: `assert self.num_heads % self.tp_size
    # == 0`, a bare assert (the ValueError of _get_kda_local_num_heads appears in 0.5.19)
    layout=replace(newer.RULES.layout, kda_value_error=False),
    # server_args.py:ServerArgs._handle_gpu_memory_settings: no PP cap of the prefill graph
    # (_DEFAULT_PP_PREFILL_CUDA_GRAPH_MAX_TOKENS appears in 0.5.19)
    pp_prefill_graph_cap=False,
    # server_args.py:ServerArgs._apply_cuda_graph_compatibility: PP keeps the breakable graph
    breakable_checks=tuple(name for name in newer.RULES.breakable_checks if name != "pp"),
    mamba_radix_archs=newer.RULES.mamba_radix_archs - _NO_MAMBA_RADIX,
    extra_buffer_archs=newer.RULES.extra_buffer_archs - _NO_MAMBA_RADIX,
    # configs/model_config.py:multimodal_breakable_cuda_graph_supported_model_archs
    breakable_mm_archs=newer.RULES.breakable_mm_archs
    - {"Cohere2VisionForConditionalGeneration", "PaddleOCRVLForConditionalGeneration"},
)
