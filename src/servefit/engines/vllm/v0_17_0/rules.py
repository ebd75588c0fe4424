"""What vLLM 0.17.0 changed from 0.15.0 (also 0.17.1): Qwen3.5, the GDN SSM dtype,
speculative decoding on Mamba models. Paths inside the 0.17.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm.v0_15_0 import rules as previous
from servefit.errors import EngineRejection
from servefit.model.spec import ModelSpec

# models/nemotron_h.py and models/mamba2.py pass num_spec to mamba2_state_shape
MAMBA2_NUM_SPEC = frozenset({"NemotronHForCausalLM", "Mamba2ForCausalLM"})


class Rules(previous.Rules):
    VERSION = "0.17.0"

    # model_executor/models/config.py:MODELS_CONFIG_MAP -> Qwen3_5ForConditionalGenerationConfig
    QWEN35_SSM_DTYPE_ARCHS = frozenset(
        {"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}
    )

    def gdn_ssm_dtype(self, conv_dtype: str, ssm_dtype: str) -> str:
        """mamba_utils.py:gated_delta_net_state_dtype -> _mamba_state_dtype: the temporal state
        takes mamba_ssm_cache_dtype unless "auto"."""
        return ssm_dtype

    def mamba2_num_spec(self, model: ModelSpec, num_spec: int) -> int:
        return num_spec if model.architecture in MAMBA2_NUM_SPEC else 0

    def check_speculative(self, model: ModelSpec, v: dict[str, Any]) -> None:
        """MambaBase.get_kv_cache_spec no longer refuses speculative decoding."""

    def check_align(self, v: dict[str, Any]) -> None:
        """MambaModelConfig: align mode needs chunked prefill (speculative decoding is
        allowed from 0.17.0)."""
        if not v["enable_chunked_prefill"]:
            raise EngineRejection(
                "AssertionError: Chunked prefill is required for mamba cache mode 'align'."
            )


RULES = Rules()
