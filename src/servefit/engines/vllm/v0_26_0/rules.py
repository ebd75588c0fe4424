"""What vLLM 0.26.0 changed from 0.25.0. Paths
inside the 0.26.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm.v0_25_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.26.0"

    # gpu_worker.py:determine_available_memory profiles CUDA-graph memory on ROCm too
    # ("ROCm is included: #44825 moved the profiler to torch.accelerator.get_memory_info")
    CUDAGRAPH_ESTIMATE_ROCM = True

    def cpu_update(
        self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any], logs: list[str]
    ) -> None:
        """platforms/cpu.py:CpuPlatform.check_and_update_config: "AMX GDN requires float32
        state" (CPUs with AMX tiles)."""
        if "amx_tile" in gpus.gpu.features and v["mamba_ssm_cache_dtype"] != "float32":
            v["mamba_ssm_cache_dtype"] = "float32"
            logs.append("Reset SSM cache type to float32 for AMX mamba attention.")


RULES = Rules()
