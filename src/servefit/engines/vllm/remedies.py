"""vLLM's error messages that name their own fix (engines/remedy.py). The texts are those the
profiles reproduce from the engine (engines/vllm/common.py, resolve.py), the same in every
mirrored release that prints them."""

from __future__ import annotations

import re

from servefit.engines.remedy import Remedy, floor2

REMEDIES: tuple[Remedy, ...] = (
    Remedy(
        "context beyond the model",
        re.compile(
            r"User-specified max_model_len \((\d+)\) is greater than the derived max_model_len "
            r"\(\w+=(\d+)"
        ),
        lambda m: {"max_model_len": int(m.group(2))},
        "vllm/config/model.py:_get_and_verify_max_len",
    ),
    Remedy(
        "context beyond the KV cache",
        re.compile(r"the estimated maximum model length is (\d+)"),
        lambda m: {"max_model_len": int(m.group(1))},
        "vllm/v1/core/kv_cache_utils.py:_check_enough_kv_cache_memory",
    ),
    Remedy(
        "sequences above the Mamba cache blocks",
        re.compile(r"Please lower max_num_seqs to at most (\d+)"),
        lambda m: {"max_num_seqs": int(m.group(1))} if int(m.group(1)) > 0 else None,
        "vllm/config/compilation.py:CompilationConfig.resolve_cudagraph_mode_and_sizes",
    ),
    Remedy(
        "utilization above the free memory",
        re.compile(
            r"Free memory on device \S+ \(([\d.]+)/([\d.]+) GiB\) on startup is less than "
            r"desired GPU memory utilization"
        ),
        lambda m: (
            {"gpu_memory_utilization": u}
            if (u := floor2(float(m.group(1)) / float(m.group(2)) - 0.01)) > 0
            else None
        ),
        "vllm/v1/worker/utils.py:request_memory",
    ),
    Remedy(
        "expert parallelism without experts",
        re.compile(r"Number of experts in the model must be greater than 0 when expert"),
        lambda m: {"enable_expert_parallel": None},
        "vllm/config/model.py:ModelConfig._verify_with_expert_parallelism",
    ),
)
