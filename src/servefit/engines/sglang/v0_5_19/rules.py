"""What SGLang 0.5.19 decides differently from 0.5.20 (paths inside the 0.5.19 wheel); every
other table and variant is 0.5.20's (v0_5_20/rules.py). docs/engines/sglang-0.5.19.md."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.flow.rules import Rules
from servefit.engines.sglang.v0_5_20 import rules as newer

VERSION = "0.5.19"

# registered from 0.5.20 (archs_0_5_20.txt)
_NOT_YET = {
    "Glm5NextForConditionalGeneration",
    "NemotronH_Omni_Reasoning_V3",
    "Qwen4ExpForConditionalGeneration",
}

RULES: Rules = replace(
    newer.RULES,
    version=VERSION,
    # arg_groups/memory_hook.py:handle_gpu_memory_settings: the < 35 GiB tier (A10, 4090, 5090)
    # is chunked_prefill_size 2048, decode max_bs 24 (TP < 4) / 80
    tiers=tuple(
        (35 * 1024, 2048, 24, 80) if bound == 35 * 1024 else (bound, chunk, small, large)
        for bound, chunk, small, large in newer.RULES.tiers
    ),
    # model_runner_components/spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state: only a
    # --speculative-draft-model-path sets eagle_draft_num_layers; path-less drafts add none
    pathless_draft_layers=False,
    # arg_groups/cuda_graph_hook.py:disable_breakable_cudagraph_if_incompatible: no KDA check
    breakable_checks=tuple(name for name in newer.RULES.breakable_checks if name != "kda"),
    # arg_groups/overrides.py:_MAMBA_RADIX_CACHE_ARCHS, _MAMBA_EXTRA_BUFFER_ARCHS;
    # configs/model_config.py:multimodal_breakable_cuda_graph_supported_model_archs
    mamba_radix_archs=newer.RULES.mamba_radix_archs - _NOT_YET,
    extra_buffer_archs=newer.RULES.extra_buffer_archs - _NOT_YET,
    breakable_mm_archs=newer.RULES.breakable_mm_archs - {"Glm5NextForConditionalGeneration"},
    # arg_groups/speculative_hook.py:_handle_eagle_family: draft path defaults to the model path
    draft_in_target_archs=newer.RULES.draft_in_target_archs
    - {"HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration"},
)
