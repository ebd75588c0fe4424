"""What SGLang 0.5.14 decides otherwise than 0.5.15 (paths inside the 0.5.14 wheel); everything
not named here is the 0.5.15 rule (v0_5_15/rules.py)."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.v0_5_15 import rules as newer

VERSION = "0.5.14"

RULES = replace(
    newer.RULES,
    version=VERSION,
    # Requires-Dist: transformers==5.8.1 (0.5.13 and 0.5.14)
    transformers="5.8.1",
    # model_executor/cuda_graph_config.py:CudaGraphConfig: the prefill default is TC_PIECEWISE
    # (0.5.15: default_prefill_backend, BREAKABLE on CUDA), turned off by
    # server_args.py:_disable_tc_piecewise_cudagraph_if_incompatible; the memory heuristic
    # (_handle_gpu_memory_settings) counts the decode graphs whatever their backend
    prefill_graph="piecewise",
    # configs/model_config.py:piecewise_cuda_graph_disabled_model_archs
    piecewise_off_archs=frozenset(
        {
            "DeepseekV4ForCausalLM",
            "DeepseekV4ForCausalLMNextN",
            "Qwen3NextForCausalLM",
            "BailingMoeV2_5ForCausalLM",
            "LLaDAModelLM",
        }
    ),  # fmt: skip
)
