"""What vLLM 0.23.0 changed from 0.22.0. Paths inside the 0.23.0 wheel."""

from __future__ import annotations

from servefit.engines.vllm.v0_22_0 import rules as previous


class Rules(previous.Rules):
    VERSION = "0.23.0"

    # config/vllm.py:DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES: Llama and Mistral join Qwen3
    V2_DEFAULT_ARCHS = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})


RULES = Rules()
