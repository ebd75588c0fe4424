"""What SGLang 0.5.17 decides differently from 0.5.18 (paths inside the 0.5.17 wheel); every
other table and variant is 0.5.18's (v0_5_18/rules.py). docs/engines/sglang-0.5.17.md."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.flow.rules import Rules
from servefit.engines.sglang.v0_5_18 import rules as newer

VERSION = "0.5.17"

_MOBIUS = {"InternS2MobiusForConditionalGeneration"}  # registered from 0.5.18

RULES: Rules = replace(
    newer.RULES,
    version=VERSION,
    # layers/quantization/modelopt_quant.py:ModelOptFp8Config.from_config: the "static FP8"
    # text for an unknown quant_algo (0.5.18 words it "regular FP8")
    modelopt_fp8_text="static",
    # mem_cache/kv_cache_configurator.py:KVCacheConfigurator._profile_available_bytes: no
    # mm_runtime_reservation_gb (0.5.18 adds it and its "Reserving … GB" line)
    mm_reservation=False,
    # server_args.py:ServerArgs._disable_breakable_cudagraph_if_incompatible: also off for MLA
    # (but DSA: configs/model_config.py:is_deepseek_dsa) and NemotronH
    breakable_checks=("mla_non_dsa", "nemotron_h", *newer.RULES.breakable_checks),
    # arg_groups/overrides.py:_qwen3_5_hybrid_overrides registration, _MAMBA_RADIX_CACHE_ARCHS
    qwen3_5_hybrid_archs=newer.RULES.qwen3_5_hybrid_archs - _MOBIUS,
    mamba_radix_archs=newer.RULES.mamba_radix_archs - _MOBIUS,
    # configs/model_config.py:multimodal_breakable_cuda_graph_supported_model_archs
    breakable_mm_archs=newer.RULES.breakable_mm_archs
    - _MOBIUS
    - {
        "KimiK25ForConditionalGeneration",
        "KimiK3ForConditionalGeneration",
        "MuseGlimmerForConditionalGeneration",
    },
)
