"""The host-memory facts of vLLM's CPU platform: records only (read by hardware/cpu.py, carried
by GPUSpec.host, interpreted per release by engines/vllm/cpu_platform.py:node_memory)."""

from __future__ import annotations

from servefit.frozen import frozen


@frozen
class NodeMeminfo:
    """One /sys/devices/system/node/nodeN/meminfo, in bytes (the file's kB x 1024)."""

    total: int
    free: int
    active_file: int
    inactive_file: int
    reclaimable: int

    @property
    def available(self) -> int:
        """cpu_resource_utils.py:get_memory_node_info's sum (not the kernel's MemAvailable)."""
        return self.free + self.active_file + self.inactive_file + self.reclaimable


@frozen
class HostMemory:
    """The memory facts of the node vLLM's CPU worker binds, as read now.

    `node_meminfo` is None where the node file does not exist (no NUMA in sysfs): the engine then
    takes psutil's system figures, `system_total` / `system_available`. The cgroup figures are
    None where no limit is set (v2 "max", v1's sentinel) or none can be read."""

    node: int
    node_meminfo: NodeMeminfo | None
    system_total: int
    system_available: int | None  # None: unknown (a device read back from a log)
    cgroup_limit: int | None = None
    cgroup_usage: int | None = None
    # the node's available memory as the worker measured it once the engine was up (a log's
    # "Available memory on node N (A/T GiB)"); None when only the state before the start is known
    available_after_load: int | None = None
    nodes: int = 1  # memory nodes in sysfs
    allowed_cpus: tuple[int, ...] = ()
    mems_allowed: tuple[int, ...] = ()
