"""What vLLM 0.33.0 changed from 0.32.0: FlashInfer GDN prefill checkpoints, GB10's batch tier,
the deprecated --mamba-cache-mode. Paths inside the 0.33.0 wheel."""

from __future__ import annotations

from math import lcm
from typing import Any

from servefit._plan.schema import Change
from servefit.engines.vllm.device import capability, cuda_total_gib, is_cpu
from servefit.engines.vllm.v0_32_0 import rules as previous
from servefit.errors import EngineRejection
from servefit.hardware.spec import GPUSet
from servefit.model import readers
from servefit.model.layers import GatedDeltaNet
from servefit.model.spec import ModelSpec

# vllm/v1/attention/backends/gdn_attn.py
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
# vllm/config/cache.py: the deprecation message --mamba-cache-mode prints
MAMBA_CACHE_MODE_DEPRECATED = (
    "--mamba-cache-mode is deprecated and will be removed in v0.33.0. It has no effect: Mamba "
    "prefix caching follows --enable-prefix-caching."
)


class Rules(previous.Rules):
    VERSION = "0.33.0"

    # quantization/auto_gptq.py, auto_awq.py, modelopt.py and transformers_utils/
    # model_arch_config_convertor.py:_normalize_quantization_config (model/quant_checks.py)
    CONFIG_READERS = frozenset({readers.transformers("5.19.0"), readers.VLLM_QUANT_0_33})

    def batch_defaults(self, gpus: GPUSet, world_size: int) -> tuple[int, int, str]:
        """EngineArgs.get_batch_defaults (vllm serve): >= 160 GiB: 16384 tokens / 1024 seqs;
        >= 70 GiB, not an A100, not GB10 (capability 12.1): 8192 / 1024; else 2048 / 256."""
        if is_cpu(gpus.gpu):
            return super().batch_defaults(gpus, world_size)
        total = cuda_total_gib(gpus.gpu)
        gb10 = capability(gpus.gpu) == (12, 1)
        if total >= 160:
            return 16384, 1024, f"{total:.1f} GiB device (>= 160 GiB): 16384 tokens, 1024 seqs"
        if total >= 70 and "a100" not in gpus.gpu.name.lower() and not gb10:
            return (
                8192,
                1024,
                f"{total:.1f} GiB device, not an A100 or GB10: 8192 tokens, 1024 seqs",
            )
        return (
            2048,
            256,
            f"{total:.1f} GiB device (< 70 GiB, an A100 or a GB10): 2048 tokens, 256 seqs",
        )

    def mamba_cache_mode(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> str:
        """MambaModelConfig.verify_and_update_config: "align" with prefix caching, "none"
        without; --mamba-cache-mode is deprecated and ignored."""
        if v.get("mamba_cache_mode") is not None:
            logs.append(MAMBA_CACHE_MODE_DEPRECATED)
            v["mamba_cache_mode"] = None
        return super().mamba_cache_mode(model, v, logs, changes)

    def check_align(self, v: dict[str, Any]) -> None:
        if not v["enable_chunked_prefill"]:
            raise EngineRejection(
                "AssertionError: Chunked prefill is required for Mamba prefix caching."
            )

    def _flashinfer_gdn(self, model: ModelSpec, gpus: GPUSet) -> bool:
        """qwen_gdn_linear_attn.py:_resolve_gdn_prefill_backend ("auto"): FlashInfer on SM90; on
        the SM10x and SM12x families only with linear_key_head_dim 128 and CUDA runtime >= 13
        (the 0.33.0 PyPI wheel depends on cu13 packages, so that holds)."""
        cap = capability(gpus.gpu)
        if cap is None:
            return False
        if cap == (9, 0):
            return True
        layer = model.first_recurrent()
        return cap[0] in (10, 12) and isinstance(layer, GatedDeltaNet) and layer.state_size == 128

    def _gdn_checkpoints(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> bool:
        """QwenGatedDeltaNetAttention._exports_checkpoints: align mode + FlashInfer GDN
        prefill, and every Mamba layer of the model is such a layer."""
        return (
            v.get("mamba_cache_mode") == "align"
            and isinstance(model.first_recurrent(), GatedDeltaNet)
            and self._flashinfer_gdn(model, gpus)
        )

    def block_alignment(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> tuple[int, int]:
        """_align_hybrid_block_size: in align mode, the lcm with every Mamba layer's
        prefill-checkpoint alignment (64 for Qwen GDN on the FlashInfer prefill path,
        get_mamba_prefill_checkpoint_alignment; Mamba2 declares none)."""
        block, align = super().block_alignment(model, gpus, v)
        if self._gdn_checkpoints(model, gpus, v):
            align = lcm(align, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
        return block, align

    def checkpoint_blocks(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> int:
        """Mamba2: 1 (mamba_mixer2.py); Qwen GDN: 1 when it exports checkpoints; KDA: 1 only
        with a checkpointing prefill backend, taken as none here."""
        if isinstance(model.first_recurrent(), GatedDeltaNet):
            return int(self._gdn_checkpoints(model, gpus, v))
        return super().checkpoint_blocks(model, gpus, v)


RULES = Rules()
