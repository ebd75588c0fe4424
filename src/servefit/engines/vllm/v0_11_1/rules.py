"""What vLLM 0.11.1 changed from 0.10.2 (also 0.11.2). Paths inside the 0.11.1 wheel."""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Change
from servefit.engines.vllm.device import capability
from servefit.engines.vllm.v0_10_2 import rules as previous
from servefit.errors import EngineRejection
from servefit.hardware.spec import GPUSet
from servefit.model.layers import MLA
from servefit.model.spec import ModelSpec
from servefit.units import GiB

PREFIX_CACHING_EXPERIMENTAL = (
    "Warning: Prefix caching is currently enabled. Its support for Mamba layers is "
    "experimental. Please report any issues you may observe."
)
PREFIX_CACHING_UNSUPPORTED = (
    "Hybrid or mamba-based model detected without support for prefix caching: disabling."
)


class Rules(previous.Rules):
    VERSION = "0.11.1"

    # the model classes declaring SupportsMambaPrefixCaching (model_executor/models/*.py)
    MAMBA_PREFIX_CACHING = frozenset(
        {
            "BambaForCausalLM",
            "NemotronHForCausalLM",
            "JambaForCausalLM",
            "Mamba2ForCausalLM",
            "MambaForCausalLM",
            "Zamba2ForCausalLM",
            "GraniteMoeHybridForCausalLM",
            "FalconH1ForCausalLM",
        }
    )

    def prefix_caching_default(self, model: ModelSpec) -> tuple[bool, str]:
        """engine/arg_utils.py:EngineArgs.get_chunked_prefill_prefix_caching_defaults: "Disable
        prefix caching default for hybrid models since the feature is still experimental"."""
        if model.is_hybrid:
            return False, f"{self.VERSION} turns prefix caching off by default for hybrid models"
        return True, "generative models support prefix caching"

    def hybrid_prefix_caching(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> bool:
        """model_executor/models/config.py:MambaModelConfig.verify_and_update_config: asked-for
        prefix caching stays on only for SupportsMambaPrefixCaching models."""
        if not v["enable_prefix_caching"]:
            return False
        if model.architecture in self.MAMBA_PREFIX_CACHING:
            logs.append(PREFIX_CACHING_EXPERIMENTAL)
            return True
        logs.append(PREFIX_CACHING_UNSUPPORTED)
        changes.append(
            Change(
                arg="enable_prefix_caching",
                old=True,
                new=False,
                log=PREFIX_CACHING_UNSUPPORTED,
                reason=f"{model.architecture} does not declare SupportsMambaPrefixCaching",
            )
        )
        return False

    def hybrid_config_logs(self, model: ModelSpec, v: dict[str, Any]) -> list[str]:
        """MambaModelConfig.verify_and_update_config (0.11.1 - 0.13.0)."""
        return ["Disabling cascade attention since it is not supported for hybrid models."]

    def mamba_cache_mode(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> str:
        """No mode yet; with prefix caching (a SupportsMambaPrefixCaching model) the Mamba state
        is kept every block (HybridAttentionMambaModelConfig's chunk-aligned block and
        mamba_block_size = the attention block): "all" in the later releases' words."""
        return "all" if v["enable_prefix_caching"] else "none"

    def check_speculative(self, model: ModelSpec, v: dict[str, Any]) -> None:
        """model_executor/layers/mamba/abstract.py:MambaBase.get_kv_cache_spec (0.11.1 -
        0.16.0): speculative decoding only for model_type qwen3_next."""
        if v["num_speculative_tokens"] and model.model_type != "qwen3_next":
            raise EngineRejection(
                "NotImplementedError: Mamba with speculative decoding is not supported yet."
            )

    def block_alignment(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> tuple[int, int]:
        """HybridAttentionMambaModelConfig.verify_and_update_config: kernel alignment 16; 32 on
        the SM100 family for head_dim 256 with the default / FLASHINFER backend (flashinfer
        issue 1993); MLA 64 (128 with VLLM_ATTENTION_BACKEND=CUTLASS_MLA)."""
        block = v.get("block_size") or self.platform_block_size(gpus)
        attn = model.first_attention()
        if isinstance(attn, MLA):
            backend = v.get("_env_attention_backend")
            return block, 128 if backend == "CUTLASS_MLA" else 64
        cap = capability(gpus.gpu)
        blackwell = cap is not None and cap[0] == 10
        head_256 = attn is not None and attn.head_dim == 256
        if blackwell and head_256 and v.get("_env_attention_backend") in (None, "FLASHINFER"):
            return block, 32
        return block, 16

    def mamba_blocks_per_request(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> int:
        """v1/kv_cache_interface.py:MambaSpec.max_memory_usage_bytes (0.11.1 - 0.14.1):
        cdiv(max_model_len, block_size) x page, block_size = mamba_block_size (max_model_len
        without prefix caching: 1 block); speculative blocks are not counted."""
        return 1

    def capacity_logs(
        self, tokens: int, max_model_len: int, concurrency: float, device: str, workers: int
    ) -> list[str]:
        """kv_cache_utils.py:_report_kv_cache_config (0.11.1 - 0.11.2): "GPU KV cache size"
        info_once, "Maximum concurrency" logger.info once per worker."""
        conc = f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x"
        return [f"GPU KV cache size: {tokens:,} tokens"] + [conc] * workers

    def model_loading_log(self, weights_bytes: float) -> str:
        """gpu_model_runner.py:load_model (0.11.1 - 0.13.0)."""
        return f"Model loading took {weights_bytes / GiB:.4f} GiB memory and … seconds"

    def kv_bytes_log(self, free: float, reserved: int) -> str | None:
        """gpu_worker.py:determine_available_memory with --kv-cache-memory-bytes (0.11.1 -
        0.13.0)."""
        return (
            f"Initial free memory {free / GiB:.2f} GiB, reserved {reserved / GiB:.2f} GiB memory "
            "for KV Cache as specified by kv_cache_memory_bytes config and skipped memory "
            "profiling. This does not respect the gpu_memory_utilization config. Only use "
            "kv_cache_memory_bytes config when you want manual control of KV cache memory "
            "size. If OOM'ed, check the difference of initial free memory between the current "
            "run and the previous run where kv_cache_memory_bytes is suggested and update it "
            "correspondingly."
        )


RULES = Rules()
