"""Per-rank memory inputs for the vLLM profiles: CUDA total, free memory at the init snapshot,
weights ("Model loading took")."""

from __future__ import annotations

from typing import Any

from servefit.engines.base import Measured, MemoryInputs
from servefit.engines.vllm.common import pp_indices
from servefit.engines.vllm.device import cuda_total_gib, is_cpu
from servefit.hardware.preload import pre_load_free_gib
from servefit.hardware.spec import GPUSet
from servefit.model.cache import weights
from servefit.model.spec import ModelSpec
from servefit.units import GiB


def memory_inputs(
    model: ModelSpec, gpus: GPUSet, v: dict[str, Any], measured: Measured
) -> MemoryInputs:
    """`total_gib` is what `torch.cuda.mem_get_info` reports (vllm/engines/vllm/device.py);
    `pre_load_free_gib` the free memory of Worker.init_device's snapshot (after NCCL init and
    the cuBLAS warm-up, before weights; servefit/hardware/preload.py, engine="vllm");
    `weights_gib` + `draft_weights_gib` what "Model loading took" reports: the target, plus the
    MTP layers when speculative decoding loads them in the same DeviceMemoryProfiler block
    (gpu_model_runner.py:load_model); a measured figure (--measured-weights-gib) is the whole."""
    tp, pp = v["tensor_parallel_size"], v["pipeline_parallel_size"]
    ep = v["_ep_size"]
    # cached: explain and fit re-plan one model many times; vLLM's own PP layer split
    w = weights(model, tp, pp, ep, pp_indices)
    draft = w.draft_gib if v.get("_spec_method") == "mtp" else 0.0
    if is_cpu(gpus.gpu):  # host memory: the NUMA node the CPU worker binds, read now
        node = v["_cpu_node"]  # cpu_platform.node_memory, as this release reads it
        total = node.total / GiB
        return MemoryInputs(
            total_gib=total,
            # the node's available memory before the engine loads anything (None: unknown)
            pre_load_free_gib=total if node.available is None else node.available / GiB,
            weights_gib=measured.weights_gib if measured.weights_gib is not None else w.target_gib,
            draft_weights_gib=0.0 if measured.weights_gib is not None else draft,
            calibrated=measured.weights_gib is not None,
        )  # the CPU worker profiles nothing: its KV memory is the one set
    total = cuda_total_gib(gpus.gpu)
    if measured.free_before_gib is not None:
        free = measured.free_before_gib
    elif gpus.free_gib_override is not None:
        free = gpus.free_gib_override
    else:
        car = False if v.get("disable_custom_all_reduce") else None
        free = pre_load_free_gib(
            gpus.gpu, world_size=tp * pp, tp=tp, engine="vllm", custom_all_reduce=car
        )
    free = min(free, total)
    given = measured.weights_gib
    return MemoryInputs(
        total_gib=total,
        pre_load_free_gib=free,
        weights_gib=given if given is not None else w.target_gib,
        draft_weights_gib=0.0 if given is not None else draft,  # inside the measured figure
        calibrated=given is not None or measured.nonkv_correction_gib is not None,
        nonkv_correction_gib=measured.nonkv_correction_gib or 0.0,
    )
