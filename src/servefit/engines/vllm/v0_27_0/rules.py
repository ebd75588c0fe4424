"""What vLLM 0.27.0 changed from 0.26.0 (also 0.27.1). Paths inside the 0.27.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm import common
from servefit.engines.vllm.common import StateTensor
from servefit.engines.vllm.v0_26_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.layers import KDA, MLA
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.27.0"

    # vllm/config/model.py:_FLOAT16_NOT_SUPPORTED_MODELS no longer lists plamo2
    FLOAT16_NOT_SUPPORTED = previous.Rules.FLOAT16_NOT_SUPPORTED - {"plamo2"}

    # MODELS_CONFIG_MAP: the text-only Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM register
    # with Qwen3_5ForCausalLMConfig (the same mamba_ssm_dtype hook)
    QWEN35_SSM_DTYPE_ARCHS = frozenset(
        {
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
            "Qwen3_5ForCausalLM",
            "Qwen3_5MoeForCausalLM",
        }
    )

    # config/vllm.py:DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (default_v2_model_runner_architectures)
    V2_DEFAULT_ARCHS = frozenset(
        {
            "DeepseekV2ForCausalLM",
            "GraniteMoeForCausalLM",
            "InklingForCausalLM",
            "InklingForConditionalGeneration",
            "KimiK3ForConditionalGeneration",
            "LongcatFlashNgramForCausalLM",
            "Qwen2MoeForCausalLM",
        }
    )

    def v1_runner(self, model: ModelSpec) -> bool:
        """VllmConfig._is_default_v2_model_runner_model: a hybrid stays on V1 unless its
        architecture is listed."""
        listed = any(a in self.V2_DEFAULT_ARCHS for a in common.architectures(model))
        if model.is_hybrid and not listed:
            return True
        return not (listed or not common.is_moe(model))

    def kda_state(
        self, layer: KDA, tp: int, num_spec: int, conv_dtype: str, ssm_dtype: str
    ) -> tuple[StateTensor, ...]:
        """mamba_utils.py:kda_state_shape: the conv state gets num_spec rows."""
        dim = common.divide(3 * layer.num_heads * layer.head_dim, tp, "KDA conv dim")
        rec = (common.divide(layer.num_heads, tp, "KDA heads"), layer.head_dim, layer.head_dim)
        return (
            StateTensor((layer.conv_kernel - 1 + num_spec, dim), conv_dtype),
            StateTensor(rec, "float32"),
        )

    def block_alignment(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> tuple[int, int]:
        """platforms/interface.py:_align_hybrid_block_size: hybrid MLA models align to at least
        128 ("TRTLLM/FlashInfer MLA decode kernels require the physical number of kernel
        blocks to be aligned to 128 / kernel_block_size")."""
        block, align = super().block_alignment(model, gpus, v)
        if isinstance(model.first_attention(), MLA):
            align = max(align, 128)
        return block, align


RULES = Rules()
