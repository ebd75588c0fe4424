"""What SGLang 0.5.21 decides differently from 0.5.22 (paths inside the 0.5.21 wheel); every
other table and variant is 0.5.22's (v0_5_22/rules.py). docs/engines/sglang-0.5.21.md."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.flow.rules import Rules
from servefit.engines.sglang.v0_5_22 import rules as newer

VERSION = "0.5.21"

RULES: Rules = replace(
    newer.RULES,
    version=VERSION,
    # Requires-Dist: transformers==5.12.1 (0.5.15 to 0.5.21; 0.5.22 pins 5.19.0)
    transformers="5.12.1",
    # layers/vocab_parallel_embedding.py:VocabParallelEmbedding.__init__ pads the vocabulary to
    # 64 x tp only on CPU (`if _is_cpu and pad_vocab_size(...) % self.tp_size != 0`): on GPUs
    # divide(pad64(vocab), tp) in vocab_range_from_global_vocab_size must hold
    layout=replace(newer.RULES.layout, vocab_pads_to_tp=False),
    # arg_groups/memory_hook.py:handle_gpu_memory_settings: no clamp of the default decode
    # max_bs to an explicit --max-running-requests (0.5.22 adds decode_max_bs_is_default)
    decode_bs_clamp=False,
    # no attn_dp_size field and no arg_groups/parallel_hook.py:handle_deprecated_dp_attention
    # (both new in 0.5.22): --enable-dp-attention with --dp-size N gives N attention-DP ranks
    # (server_args.py: attn_dp_size = dp_size if enable_dp_attention else 1)
    dp_attention="flag",
    # mem_cache/kv_cache_configurator.py:KVCacheConfigurator._handle_max_mamba_cache: a PD
    # prefill server still reserves the speculative state (no _pd_prefill_skips_mamba_spec_state)
    pd_prefill_skips_spec_state=False,
    # arg_groups/cuda_graph_hook.py:disable_breakable_cudagraph_if_incompatible: the KDA check
    # has no GLM-5 Next exception
    breakable_checks=tuple(
        "kda" if name == "kda_except_glm5_next" else name for name in newer.RULES.breakable_checks
    ),
    # configs/model_config.py:multimodal_breakable_cuda_graph_supported_model_archs
    breakable_mm_archs=newer.RULES.breakable_mm_archs
    - {
        "MiniMaxM3SparseForCausalLM",
        "MiniMaxM3SparseForConditionalGeneration",
        "Qwen4ExpForConditionalGeneration",
    },
)
