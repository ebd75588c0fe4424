"""What vLLM 0.18.0 changed from 0.17.0 (also 0.18.1). Paths inside the 0.18.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm.v0_17_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.layers import MLA
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.18.0"

    # _get_kv_cache_groups_uniform_page_size: "if max_num_layers < min_num_layers * 1.5"
    GROUP_MAX_RATIO = 1.5
    # envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "0" (opt-in)
    CUDAGRAPH_ESTIMATE_DEFAULT = "0"
    # config/compilation.py:CompilationConfig.adjust_cudagraph_sizes_for_mamba_cache caps
    # the capture sizes to the Mamba blocks (a warning), gpu_model_runner.py calls it with
    # FULL decode graphs
    MAMBA_SEQS_CHECK = "cap"

    def block_alignment(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> tuple[int, int]:
        """HybridAttentionMambaModelConfig.verify_and_update_config: 16 (the SM100 head-256
        case is gone), MLA 64 / 128 (CUTLASS_MLA); the block it picks overrides even a user's
        --block-size that is smaller."""
        block = v.get("block_size") or self.platform_block_size(gpus)
        if isinstance(model.first_attention(), MLA):
            return block, 128 if v.get("_env_attention_backend") == "CUTLASS_MLA" else 64
        return block, 16


RULES = Rules()
