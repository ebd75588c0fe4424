"""What vLLM 0.26.0 changed from 0.25.0. Paths
inside the 0.26.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm.device import is_cpu
from servefit.engines.vllm.v0_25_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec

# config/vllm.py: EagleModelTypes ("eagle", "eagle3", "mtp" and the MTP aliases), NgramGPUTypes,
# "draft_model", "dflash", "dspark" keep async scheduling; other draft methods turn it off
_ASYNC_DRAFTS = frozenset(
    {"eagle", "eagle3", "mtp", "draft_model", "ngram_gpu", "dflash", "dspark"}
)


class Rules(previous.Rules):
    VERSION = "0.26.0"

    # gpu_worker.py:determine_available_memory profiles CUDA-graph memory on ROCm too
    # ("ROCm is included: #44825 moved the profiler to torch.accelerator.get_memory_info")
    CUDAGRAPH_ESTIMATE_ROCM = True

    def sliding_in_flight_tokens(self, gpus: GPUSet, v: dict[str, Any]) -> int:
        """v1/kv_cache_interface.py:SlidingWindowSpec.max_admission_blocks_per_request takes
        VllmConfig.max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens
        (config/vllm.py, the same in 0.26.0 - 0.33.0): with async scheduling 2 batches (PP 1,
        the V1 runner) or PP + 1 (the V2 runner), else PP. Async scheduling
        (VllmConfig.__post_init__, async_scheduling None -> on unless): off on the CPU platform
        (platforms/cpu.py: "async scheduling is not required on CPU"), off with PP > 1 on the
        V1 runner, off with a draft method outside the EAGLE / MTP / draft-model / n-gram GPU
        families. servefit assumes the V1 runner (VLLM_USE_V2_MODEL_RUNNER unset)."""
        pp = int(v["pipeline_parallel_size"])
        user = v.get("async_scheduling")
        if is_cpu(gpus.gpu):
            on = False
        elif user is not None:
            on = bool(user)
        else:
            method = v.get("_spec_method")
            on = pp <= 1 and (method is None or method in _ASYNC_DRAFTS)
        batches = (2 if pp <= 1 else pp) if on else pp
        return batches * int(v["max_num_batched_tokens"])

    def cpu_update(
        self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any], logs: list[str]
    ) -> None:
        """platforms/cpu.py:CpuPlatform.check_and_update_config: "AMX GDN requires float32
        state" (CPUs with AMX tiles)."""
        if "amx_tile" in gpus.gpu.features and v["mamba_ssm_cache_dtype"] != "float32":
            v["mamba_ssm_cache_dtype"] = "float32"
            logs.append("Reset SSM cache type to float32 for AMX mamba attention.")


RULES = Rules()
