"""What vLLM 0.20.0 changed from 0.19.0: the hybrid block alignment moves after the weights
load (Platform.update_block_size_for_backend), CUDA-graph memory is profiled by default.
Paths inside the 0.20.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm import cpu_platform
from servefit.engines.vllm.device import capability, is_cpu
from servefit.engines.vllm.v0_19_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.layers import MLA
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.20.0"

    # config/cache.py:CacheConfig.gpu_memory_utilization (PR #38284)
    DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
    # envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1"
    CUDAGRAPH_ESTIMATE_DEFAULT = "1"
    # config/compilation.py:resolve_cudagraph_mode_and_sizes raises "max_num_seqs (%d)
    # exceeds available Mamba cache blocks (%d)" with FULL decode graphs
    MAMBA_SEQS_CHECK = "error"
    # the executors call Platform.update_block_size_for_backend after load_model
    BLOCK_LINES_AFTER_LOAD = True
    # NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE
    NEMOTRON_H_SSM_DEFAULT = "float32"
    # v1/attention/backends/cpu_attn.py: CPU_ATTN's smallest kernel block (the AttentionBackend
    # default MultipleOf(1) here; MultipleOf(16) from 0.21.0, MultipleOf(32) from 0.29.0)
    CPU_KERNEL_BLOCK = 1
    # v1/worker/cpu_worker.py:CPUWorker.determine_available_memory takes kv_cache_memory_bytes
    # (or VLLM_CPU_KVCACHE_SPACE) as is: "Explicitly set (X/Y) GiB for KV cache on node N."
    CPU_PLATFORM = True
    # utils/cpu_resource_utils.py:get_memory_node_info: the node's meminfo (or psutil's system
    # figures without one), not clamped by a cgroup limit before 0.24.0
    CPU_MEMORY_CGROUP_CLAMP = False

    def default_mamba_mode(self, model: ModelSpec, v: dict[str, Any]) -> tuple[str, str]:
        """MambaModelConfig.verify_and_update_config (0.20.0 - 0.21.0): a
        SupportsMambaPrefixCaching model with speculative decoding gets "align"."""
        if model.architecture in self.MAMBA_PREFIX_CACHING and v["num_speculative_tokens"]:
            return "align", (
                f"Mamba cache mode is set to 'align' for {model.architecture} by default when "
                "prefix caching and speculative decoding are enabled"
            )
        return super().default_mamba_mode(model, v)

    def backend_min_block(self, model: ModelSpec, gpus: GPUSet) -> int:
        """The attention backend's smallest kernel block (get_supported_kernel_block_sizes):
        FLASH_ATTN MultipleOf(16) (or [16, 32, 64] for hybrids with a float32 Mamba state),
        FLASHINFER / TRITON_ATTN 16; FLASHINFER_MLA, the MLA default on SM10x, [32, 64]; the
        CPU platform's CPU_ATTN (v1/attention/backends/cpu_attn.py)."""
        if is_cpu(gpus.gpu):
            return self.CPU_KERNEL_BLOCK
        cap = capability(gpus.gpu)
        if isinstance(model.first_attention(), MLA) and cap is not None and cap[0] == 10:
            return 32
        return 16

    def block_alignment(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> tuple[int, int]:
        """(phase-1 block size, kernel alignment), platforms/interface.py:
        Platform.update_block_size_for_backend / _align_hybrid_block_size: the alignment is
        max(the backend's smallest kernel block, cache_config.block_size). On the CPU platform
        (CpuPlatform.update_block_size_for_backend: no phase 1) the block stays the 128 of
        check_and_update_config."""
        smallest = self.backend_min_block(model, gpus)
        block = v.get("block_size") or (128 if is_cpu(gpus.gpu) else smallest)
        return block, max(smallest, block)

    def cpu_warmup_error(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> str | None:
        """cpu_platform.moe_torch_path_error: fused MoE's torch path builds a CustomOp at
        forward time (0.20.0 - 0.24.0)."""
        return cpu_platform.moe_torch_path_error(model, gpus, v)


RULES = Rules()
