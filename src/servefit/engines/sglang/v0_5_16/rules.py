"""What SGLang 0.5.16 decides differently from 0.5.17 (paths inside the 0.5.16 wheel); every
other table and variant is 0.5.17's (v0_5_17/rules.py). docs/engines/sglang-0.5.16.md."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.flow.rules import Rules
from servefit.engines.sglang.v0_5_17 import rules as newer

VERSION = "0.5.16"

# models/kimi_k3.py is new in 0.5.17; Lfm2MoeForCausalLM is registered but takes no mamba radix
# resolution in 0.5.16
_KIMI_K3 = {"KimiK3ForConditionalGeneration"}

RULES: Rules = replace(
    newer.RULES,
    version=VERSION,
    # pool_configurator.py:DefaultPoolConfigurator.calculate_pool_sizes divides by the KV
    # bytes per token (0.5.17 sizes a pool without KV from the context: _zero_kv_max_tokens)
    kv_divides_by_cell=True,
    # mem_cache/kv_cache_configurator.py:KVCacheConfigurator._handle_max_mamba_cache: the joint
    # solve K = budget // (per_req (1 + D/ratio)) without the pools' +1 padding slot; reserves
    # per_req x capped x D and K x per_req; per_req is every recurrent layer's (no stage_per_req)
    spec_reserve="joint",
    stage_state_share=False,
    # KVCacheConfigurator._calculate_mamba_ratio: SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK not read
    skip_decode_lock_ratio=False,
    # KVCacheConfigurator.resolve_max_num_reqs: no "max_running_requests is capped to …" warning;
    # the "reduced from the requested …" warning also when the state pool capped it
    mamba_cap_warning=False,
    # server_args.py:ServerArgs._handle_gpu_memory_settings: the prefill graph max_bs is clamped
    # to an explicit --context-length
    prefill_graph_context_clamp=True,
    # server_args.py:ServerArgs._disable_breakable_cudagraph_if_incompatible: off for MLA, LoRA,
    # any MoE A2A backend, DP attention; no NemotronH or two-batch-overlap check
    breakable_checks=("mla", "dcp", "lora", "a2a_any", "dp_attention", "multimodal"),
    # arg_groups/overrides.py:_MAMBA_RADIX_CACHE_ARCHS, _MAMBA_EXTRA_BUFFER_ARCHS
    mamba_radix_archs=newer.RULES.mamba_radix_archs - _KIMI_K3 - {"Lfm2MoeForCausalLM"},
    extra_buffer_archs=newer.RULES.extra_buffer_archs - _KIMI_K3,
)
