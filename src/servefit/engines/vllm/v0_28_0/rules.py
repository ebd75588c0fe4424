"""What vLLM 0.28.0 changed from 0.27.0: prefix caching on for hybrids (Mamba align mode), one
capacity line, the >= 160 GiB batch tier. Paths inside the 0.28.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm.device import cuda_total_gib, is_cpu
from servefit.engines.vllm.v0_27_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.28.0"

    # config/vllm.py:VllmConfig._set_cudagraph_sizes: "1024 if
    # current_platform.is_device_capability_family(100) else 512"
    SM100_MAX_CAPTURE_SIZE = 1024

    def prefix_caching_default(self, model: ModelSpec) -> tuple[bool, str]:
        """engine/arg_utils.py:_set_default_chunked_prefill_and_prefix_caching_args takes
        ModelConfig.is_prefix_caching_supported as is ("Generative hybrid models support prefix
        caching."; PR #50991); attention-free models still have none."""
        if model.is_hybrid and not model.attention_layer_ids:
            return False, "attention-free models do not support prefix caching"
        if model.is_hybrid:
            return True, (
                f"{self.VERSION} turns prefix caching on for hybrid models (Mamba cache mode align)"
            )
        return True, "generative models support prefix caching"

    def default_mamba_mode(self, model: ModelSpec, v: dict[str, Any]) -> tuple[str, str]:
        """MambaModelConfig.verify_and_update_config: "none" becomes "align" for every model
        ("all" only when asked for); logged at INFO."""
        return "align", (
            f"Mamba cache mode is set to 'align' for {model.architecture} by default when "
            "prefix caching is enabled"
        )

    def experimental_log(self, mode: str) -> str | None:
        """The "Prefix caching in Mamba cache ... experimental" warning is gone."""
        return None

    def batch_defaults(self, gpus: GPUSet, world_size: int) -> tuple[int, int, str]:
        """EngineArgs.get_batch_defaults: >= 160 GiB devices get 16384 tokens / 1024 seqs."""
        if not is_cpu(gpus.gpu):
            total = cuda_total_gib(gpus.gpu)
            if total >= 160:
                return 16384, 1024, f"{total:.1f} GiB device (>= 160 GiB): 16384 tokens, 1024 seqs"
        return super().batch_defaults(gpus, world_size)

    def capacity_logs(
        self, tokens: int, max_model_len: int, concurrency: float, device: str, workers: int
    ) -> list[str]:
        """v1/core/kv_cache_utils.py:update_kv_cache_capacity: one line, "GPU" literally."""
        return [
            f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {max_model_len:,} "
            f"tokens per request: {concurrency:.2f}x"
        ]


RULES = Rules()
