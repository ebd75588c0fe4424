"""What vLLM 0.24.0 changed from 0.23.0. Paths inside the 0.24.0 wheel."""

from __future__ import annotations

from servefit.engines.vllm import common
from servefit.engines.vllm.v0_23_0 import rules as previous
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.24.0"

    # config/vllm.py:DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
    V2_DEFAULT_ARCHS = frozenset(
        {
            "Qwen3ForCausalLM",
            "DeepseekV2ForCausalLM",
            "Qwen2MoeForCausalLM",
            "GraniteMoeForCausalLM",
            "LlamaForCausalLM",
            "MistralForCausalLM",
        }
    )
    # BambaForCausalLM left the registry after 0.23.0 (registry.py:_PREVIOUSLY_SUPPORTED_MODELS)
    MAMBA_PREFIX_CACHING = previous.Rules.MAMBA_PREFIX_CACHING - {"BambaForCausalLM"}
    # utils/cpu_resource_utils.py:get_memory_node_info clamps the node's total and available
    # memory by the cgroup's limit (get_cgroup_memory_limit); 0.20.0-0.23.x read the node as is
    CPU_MEMORY_CGROUP_CLAMP = True

    def v1_runner(self, model: ModelSpec) -> bool:
        """VllmConfig._is_default_v2_model_runner_model: Model Runner V2 for the listed
        architectures, MoE or quantized alike."""
        return not any(a in self.V2_DEFAULT_ARCHS for a in common.architectures(model))


RULES = Rules()
