"""What vLLM 0.14.0 changed from 0.13.0 (also 0.14.1). Paths inside the 0.14.0 wheel."""

from __future__ import annotations

import math
from typing import Any

from servefit.engines.vllm.common import format_gib
from servefit.engines.vllm.v0_13_0 import rules as previous
from servefit.engines.vllm.v0_13_0.rules import DOCS_LINK
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.14.0"

    # v1/core/kv_cache_utils.py:get_kv_cache_configs checks each worker with
    # _max_memory_usage_bytes_from_groups, which charges group_size x page x the blocks of
    # kv_cache_groups[0] alone ("any_spec"): for a model whose first layer is a Mamba layer,
    # one request is one Mamba block (fixed in 0.19.0)
    ONE_REQUEST_NEED = "first_group"

    def hybrid_config_logs(self, model: ModelSpec, v: dict[str, Any]) -> list[str]:
        """The cascade-attention line is gone from MambaModelConfig."""
        return []

    def max_seq_len_error(self, mml: int, needed: int, available: int, estimated: int) -> str:
        """kv_cache_utils.py:_check_enough_kv_cache_memory: sizes with format_gib."""
        est = (
            f"Based on the available memory, the estimated maximum model length is {estimated}. "
            if estimated > 0
            else ""
        )
        return (
            f"ValueError: To serve at least one request with the models's max seq len ({mml}), "
            f"({format_gib(needed)} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({format_gib(available)} GiB). {est}Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
            f"engine. {DOCS_LINK}"
        )

    def free_memory_error(self, free: float, total: float, util: float, requested: float) -> str:
        """v1/worker/utils.py:request_memory: the device named, format_gib."""
        return (
            f"ValueError: Free memory on device cuda:0 ({format_gib(free)}/{format_gib(total)} "
            f"GiB) on startup is less than desired GPU memory utilization ({util}, "
            f"{format_gib(requested)} GiB). Decrease GPU memory utilization or reduce GPU "
            "memory used by other processes."
        )

    def requested_memory(self, total: float, util: float) -> float:
        """utils.py:request_memory: math.ceil(total x gpu_memory_utilization)."""
        return math.ceil(total * util)

    def model_loading_log(self, weights_bytes: float) -> str:
        """gpu_model_runner.py:load_model: format_gib."""
        return f"Model loading took {format_gib(weights_bytes)} GiB memory and … seconds"

    def available_memory_log(self, available: int) -> str:
        """gpu_worker.py:Worker.determine_available_memory: format_gib."""
        return f"Available KV cache memory: {format_gib(available)} GiB"

    def kv_bytes_log(self, free: float, reserved: int) -> str | None:
        """gpu_worker.py:determine_available_memory with --kv-cache-memory-bytes: format_gib."""
        return (
            f"Initial free memory {format_gib(free)} GiB, reserved {format_gib(reserved)} GiB "
            "memory for KV Cache as specified by kv_cache_memory_bytes config and skipped "
            "memory profiling. This does not respect the gpu_memory_utilization config. Only "
            "use kv_cache_memory_bytes config when you want manual control of KV cache memory "
            "size. If OOM'ed, check the difference of initial free memory between the current "
            "run and the previous run where kv_cache_memory_bytes is suggested and update it "
            "correspondingly."
        )


RULES = Rules()
