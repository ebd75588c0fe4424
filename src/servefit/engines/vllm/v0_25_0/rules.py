"""What vLLM 0.25.0 changed from 0.24.0 (also 0.25.1). Paths inside the 0.25.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm import common
from servefit.engines.vllm.v0_24_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.25.0"

    # config/vllm.py:DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
    V2_DEFAULT_ARCHS = frozenset(
        {"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}
    )

    def cpu_update(
        self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any], logs: list[str]
    ) -> None:
        """platforms/cpu.py: the AMX prefix-caching refusal for linear attention is gone."""

    def v1_runner(self, model: ModelSpec) -> bool:
        """VllmConfig._is_default_v2_model_runner_model: hybrids and attention-free models stay
        on V1; every other non-MoE model, and the listed MoE ones, run V2."""
        if model.is_hybrid:
            return True
        listed = any(a in self.V2_DEFAULT_ARCHS for a in common.architectures(model))
        return not (listed or not common.is_moe(model))

    def cpu_warmup_error(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> str | None:
        """fused_moe/cpu_fused_moe.py: the torch path's SiLU no longer builds a CustomOp."""
        return None


RULES = Rules()
