"""What vLLM 0.22.0 changed from 0.21.0 (also 0.22.1). Paths inside the 0.22.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm import common, cpu_platform
from servefit.engines.vllm.device import is_cpu
from servefit.engines.vllm.v0_15_0 import rules as modes
from servefit.engines.vllm.v0_21_0 import rules as previous
from servefit.errors import EngineRejection
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.22.0"

    # v1/kv_cache_interface.py:MambaSpec.max_memory_usage_bytes: "all" mode adds the
    # speculative blocks, (cdiv(max_model_len, block) + k) pages
    MAMBA_ALL_COUNTS_SPEC = True

    # config/vllm.py:DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
    V2_DEFAULT_ARCHS = frozenset({"Qwen3ForCausalLM"})

    def v1_runner(self, model: ModelSpec) -> bool:
        """VllmConfig._is_default_v2_model_runner_model: Model Runner V2 for the listed
        architectures when the model is neither MoE nor quantized."""
        listed = any(a in self.V2_DEFAULT_ARCHS for a in common.architectures(model))
        return not (listed and not common.is_moe(model) and model.quant.method == "none")

    def cpu_update(
        self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any], logs: list[str]
    ) -> None:
        """platforms/cpu.py:CpuPlatform.check_and_update_config (0.22.0 - 0.24.0): on CPUs with
        AMX tiles, a model with linear-attention layers (cpu_platform.has_linear_attention)
        loses prefix caching and chunked prefill; asked-for prefix caching had already set
        mamba_block_size (model_executor/models/config.py:MambaModelConfig), so
        VllmConfig.validate_mamba_block_size refuses the config."""
        if "amx_tile" not in gpus.gpu.features or not cpu_platform.has_linear_attention(model):
            return
        logs.append(cpu_platform.AMX_LINEAR_ATTENTION_LOG)
        if v["enable_prefix_caching"]:
            raise EngineRejection(
                "ValidationError: 1 validation error for VllmConfig: Value error, "
                "--mamba-block-size can only be set with --enable-prefix-caching",
                logs=tuple(logs),
            )
        v["enable_chunked_prefill"] = False

    def attn_backend_log(self, model: ModelSpec, gpus: GPUSet) -> str | None:
        """v1/attention/selector.py:_cached_get_attn_backend: CPU_ATTN's
        get_required_kv_cache_layout is "HND" (v1/attention/backends/cpu_attn.py, 0.22.0 -
        0.28.0), logged when the first attention layer is built (once a process)."""
        if not is_cpu(gpus.gpu) or not model.attention_layer_ids:
            return None
        return "Using HND KV cache layout for CPU_ATTN backend."

    def cpu_conv_pack_error(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> str | None:
        """model_executor/layers/utils.py:dispatch_cpu_unquantized_gemm (0.22.0 - 0.28.0):
        the causal-conv weights are packed on CPUs with AMX tiles."""
        if "amx_tile" not in gpus.gpu.features:
            return None
        return cpu_platform.conv_pack_error(model, self, v)

    def default_mamba_mode(self, model: ModelSpec, v: dict[str, Any]) -> tuple[str, str]:
        """MambaModelConfig.verify_and_update_config: back to 0.15's choice, "all" for
        SupportsMambaPrefixCaching models (speculative decoding or not), else "align"."""
        return modes.Rules.default_mamba_mode(self, model, v)

    def no_memory_error(self) -> str:
        """kv_cache_utils.py:_check_enough_kv_cache_memory: now names the CPU backend."""
        return common.NO_MEMORY

    def max_seq_len_error(self, mml: int, needed: int, available: int, estimated: int) -> str:
        """_check_enough_kv_cache_memory: "model's", and the CPU note."""
        return common.max_seq_len_error(mml, needed, available, estimated)


RULES = Rules()
