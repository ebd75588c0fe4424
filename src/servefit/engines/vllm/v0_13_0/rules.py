"""What vLLM 0.13.0 changed from 0.12.0. Paths inside the 0.13.0 wheel."""

from __future__ import annotations

from servefit.engines.vllm.v0_12_0 import rules as previous
from servefit.units import GiB

DOCS_LINK = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


class Rules(previous.Rules):
    VERSION = "0.13.0"

    # model_executor/models/config.py:NemotronHForCausalLMConfig: the config's
    # mamba_ssm_cache_dtype, else float16
    NEMOTRON_H_SSM_DEFAULT = "float16"

    def no_memory_error(self) -> str:
        """v1/core/kv_cache_utils.py:check_enough_kv_cache_memory, now with the docs link."""
        return (
            "ValueError: No available memory for the cache blocks. Try increasing "
            f"`gpu_memory_utilization` when initializing the engine. {DOCS_LINK}"
        )

    def max_seq_len_error(self, mml: int, needed: int, available: int, estimated: int) -> str:
        """check_enough_kv_cache_memory (0.13.0): the docs link appended."""
        est = (
            f"Based on the available memory, the estimated maximum model length is {estimated}."
            if estimated > 0
            else ""
        )
        return (
            f"ValueError: To serve at least one request with the models's max seq len ({mml}), "
            f"({needed / GiB:.2f} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({available / GiB:.2f} GiB). {est} Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
            f"engine. {DOCS_LINK}"
        )


RULES = Rules()
