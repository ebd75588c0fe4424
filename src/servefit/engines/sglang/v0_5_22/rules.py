"""What SGLang 0.5.22 decides differently from 0.5.23 (paths inside the 0.5.22 wheel); every
other table and variant is 0.5.23's (v0_5_23/rules.py). docs/engines/sglang-0.5.22.md."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.flow.rules import Rules
from servefit.engines.sglang.v0_5_23 import rules as newer

VERSION = "0.5.22"

RULES: Rules = replace(
    newer.RULES,
    version=VERSION,
    # mem_cache/kv_cache_configurator.py:KVCacheConfigurator.resolve_max_num_reqs and
    # _handle_max_mamba_cache: max_running_requests // attn_dp_size with no max(1, ...) floor
    mrr_floor_one=False,
    # arg_groups/memory_hook.py:handle_gpu_memory_settings: MLA prefill max_bs = 2048
    mla_prefill_graph_max_bs=2048,
    # configs/model_config.py:multimodal_breakable_cuda_graph_supported_model_archs: no Muse Spark
    breakable_mm_archs=newer.BREAKABLE_MM_ARCHS - {"MuseSparkForConditionalGeneration"},
    # arg_groups/overrides.py:_MAMBA_RADIX_CACHE_ARCHS / _MAMBA_EXTRA_BUFFER_ARCHS: no MiniCPM-V 4.7
    mamba_radix_archs=newer.MAMBA_RADIX_ARCHS - {"MiniCPMV4_7ForConditionalGeneration"},
    extra_buffer_archs=newer.EXTRA_BUFFER_ARCHS - {"MiniCPMV4_7ForConditionalGeneration"},
)
