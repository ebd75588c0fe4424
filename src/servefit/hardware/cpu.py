"""This machine's CPU as an engine device (vLLM's CPU platform): the raw facts the engine reads at
start-up, read from the same files.

What vLLM's CPU worker reads (vllm/utils/cpu_resource_utils.py, vllm/v1/worker/cpu_worker.py):
* the node: `get_allowed_cpu_list()[0].numa_node` -- the lowest-numbered online CPU this process
  may run on (`lscpu --json --extended=CPU,CORE,NODE --online` filtered by
  `os.sched_getaffinity(0)`), and its NUMA node (lscpu's `-` means no NUMA: node 0);
* that node's memory: `get_memory_node_info(node)` reads /sys/devices/system/node/nodeN/meminfo
  (MemTotal; available = MemFree + Active(file) + Inactive(file) + SReclaimable), or, where that
  file is missing, psutil.virtual_memory() (/proc/meminfo's MemTotal and MemAvailable); from
  vLLM 0.24.0 the figures are clamped by the cgroup's memory limit (`get_cgroup_memory_limit`);
* the memory nodes it may bind (`get_memory_affinity`: Mems_allowed_list of /proc/self/status);
* the ISA (torch.cpu._is_avx512_bf16_supported, _is_amx_tile_supported, _is_avx512_supported).

Which of these a release applies, and how, is the engine profile's business
(servefit/engines/vllm/cpu_platform.py:node_memory): this module only reads. The node memory can
differ from /proc/meminfo (a VM whose node file lists only the memory plugged in so far, a
NUMA machine), and on some VMs it changes while the machine runs: a plan reads it when it runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from servefit.errors import HardwareError
from servefit.frozen import frozen
from servefit.hardware.host import HostMemory, NodeMeminfo
from servefit.hardware.spec import GPUSpec

# the /proc/cpuinfo flags an engine's CPU platform branches on
# torch.cpu._is_avx512_supported is avx512f and avx512vl and avx512bw and avx512dq
# (aten/src/ATen/cpu/Utils.cpp:is_avx512_supported)
ENGINE_FLAGS = frozenset(
    {"avx2", "avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512_bf16", "amx_tile", "amx_bf16"}
)
NODE_DIR = "sys/devices/system/node"
# cgroup v1 reports "no limit" as a value near PAGE_COUNTER_MAX (get_cgroup_memory_limit)
CGROUP_V1_UNLIMITED = 1 << 62


@frozen
class CpuFacts:
    name: str
    flags: frozenset[str]
    memory: HostMemory


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def parse_id_list(raw: str) -> tuple[int, ...]:
    """'0-2,4,7-8' -> (0, 1, 2, 4, 7, 8) (cpu_resource_utils.py:parse_id_list); junk is skipped."""
    out: set[int] = set()
    for part in raw.strip().split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            out.update(range(int(lo), int(hi) + 1) if dash else [int(lo)])
        except ValueError:
            continue
    return tuple(sorted(out))


def _meminfo_kib(text: str, key_index: int) -> dict[str, int]:
    """`Key: N kB` lines (/proc/meminfo: key_index 0; a node file's `Node 0 Key: N kB`: 2)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > key_index + 1:
            try:
                found[parts[key_index].rstrip(":")] = int(parts[key_index + 1]) * 1024
            except ValueError:
                continue
    return found


def _node_meminfo(root: Path, node: int) -> NodeMeminfo | None:
    text = _read(root / NODE_DIR / f"node{node}" / "meminfo")
    if text is None:
        return None
    f = _meminfo_kib(text, 2)
    keys = ("MemTotal", "MemFree", "Active(file)", "Inactive(file)", "SReclaimable")
    if not all(k in f for k in keys):  # the engine would stop on a KeyError; read it as absent
        return None
    return NodeMeminfo(*(f[k] for k in keys))


def _int_file(path: Path) -> int | None:
    """cpu_resource_utils.py:_read_int_file: None for a missing, empty or "max" file."""
    text = _read(path)
    if text is None or text.strip() in ("", "max"):
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def _cgroup(root: Path) -> tuple[int | None, int | None]:
    """get_cgroup_memory_limit / get_cgroup_memory_usage: v2 (memory.max, memory.current), else
    v1 (memory.limit_in_bytes below the unlimited sentinel, memory.usage_in_bytes)."""
    cg = root / "sys/fs/cgroup"
    v2 = _int_file(cg / "memory.max")
    if v2 is not None:
        return v2, _int_file(cg / "memory.current")
    v1 = _int_file(cg / "memory/memory.limit_in_bytes")
    if v1 is not None and v1 < CGROUP_V1_UNLIMITED:
        return v1, _int_file(cg / "memory/memory.usage_in_bytes")
    return None, None


def _cpu_nodes(root: Path) -> tuple[dict[int, int], int]:
    """CPU -> NUMA node from each node's cpulist (what lscpu's NODE column shows), and the
    number of memory nodes."""
    nodes = sorted(
        int(p.name[4:])
        for p in (root / NODE_DIR).glob("node*")
        if p.name[4:].isdigit()
    )
    of: dict[int, int] = {}
    for node in nodes:
        for cpu in parse_id_list(_read(root / NODE_DIR / f"node{node}" / "cpulist") or ""):
            of.setdefault(cpu, node)
    return of, len(nodes)


def _status_list(status: str, key: str) -> tuple[int, ...]:
    for line in status.splitlines():
        if line.startswith(key + ":"):
            return parse_id_list(line.split(":", 1)[1])
    return ()


def read_host_memory(root: Path = Path("/"), allowed: tuple[int, ...] | None = None) -> HostMemory:
    """The node the CPU worker binds and its memory, read from `root` (a synthetic tree in tests).
    `allowed` is this process's CPU affinity (os.sched_getaffinity(0)); by default the
    Cpus_allowed_list of `root`/proc/self/status, which is the same set for this process."""
    status = _read(root / "proc/self/status") or ""
    if allowed is None:
        allowed = _status_list(status, "Cpus_allowed_list")
        if not allowed and root == Path("/") and hasattr(os, "sched_getaffinity"):
            allowed = tuple(sorted(os.sched_getaffinity(0)))
    online = parse_id_list(_read(root / "sys/devices/system/cpu/online") or "")
    usable = [c for c in allowed if not online or c in online]
    cpu_node, n_nodes = _cpu_nodes(root)
    # lscpu prints `-` for a CPU without a node, which the engine maps to node 0
    node = cpu_node.get(usable[0], 0) if usable else 0
    system = _meminfo_kib(_read(root / "proc/meminfo") or "", 0)
    if "MemTotal" not in system:
        raise HardwareError("--device cpu: no MemTotal in /proc/meminfo")
    limit, usage = _cgroup(root)
    return HostMemory(
        node=node,
        node_meminfo=_node_meminfo(root, node),
        system_total=system["MemTotal"],
        system_available=system.get("MemAvailable", system.get("MemFree", 0)),
        cgroup_limit=limit,
        cgroup_usage=usage,
        nodes=n_nodes,
        allowed_cpus=tuple(usable),
        mems_allowed=_status_list(status, "Mems_allowed_list"),
    )


def read_cpu_facts(root: Path = Path("/"), allowed: tuple[int, ...] | None = None) -> CpuFacts:
    """Model name and the engine-relevant ISA flags (/proc/cpuinfo), and the node memory."""
    info = _read(root / "proc/cpuinfo")
    if info is None:
        raise HardwareError("--device cpu: cannot read this machine's CPU (/proc/cpuinfo)")
    name, flags = "CPU", frozenset[str]()
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and name == "CPU":
            name = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = frozenset(value.split()) & ENGINE_FLAGS
    return CpuFacts(name=name, flags=flags, memory=read_host_memory(root, allowed))


def node_total_bytes(host: HostMemory, cgroup_clamp: bool = True) -> int:
    """The node's total as the newest releases read it (the display figure; each engine release
    reads its own through engines/vllm/cpu_platform.py:node_memory)."""
    total = host.node_meminfo.total if host.node_meminfo else host.system_total
    if cgroup_clamp and host.cgroup_limit is not None:
        total = min(total, host.cgroup_limit)
    return total


def cpu_spec(facts: CpuFacts) -> GPUSpec:
    return GPUSpec(
        key="cpu",
        name=facts.name,
        memory_mib=node_total_bytes(facts.memory) // 2**20,
        bandwidth_gbs=0.0,
        bf16_tflops=0.0,
        vendor="cpu",
        context_mib=0.0,
        features=facts.flags,
        host=facts.memory,
    )


def local_cpu(root: Path = Path("/")) -> GPUSpec:
    """The CPU this runs on, as an engine device: its ISA flags and the memory facts of the node
    the engine's worker would bind (GPUSpec.host)."""
    return cpu_spec(read_cpu_facts(root))


def describe(facts: CpuFacts) -> str:
    """One line of the facts a CPU plan depends on (CI prints it, so a red run on another machine
    of the same kind says at once whether the machine differs)."""
    m = facts.memory
    gib = 2**30
    node = (
        f"node {m.node} MemTotal {m.node_meminfo.total / gib:.2f} GiB, available "
        f"{m.node_meminfo.available / gib:.2f} GiB"
        if m.node_meminfo
        else f"node {m.node}: no node meminfo (the engine takes /proc/meminfo)"
    )
    cgroup = f"{m.cgroup_limit / gib:.2f} GiB" if m.cgroup_limit is not None else "none"
    isa = ",".join(sorted(facts.flags)) or "none of " + ",".join(sorted(ENGINE_FLAGS))
    return (
        f"{node} ({m.nodes} node{'s' if m.nodes != 1 else ''}); /proc/meminfo MemTotal "
        f"{m.system_total / gib:.2f} GiB; cgroup limit {cgroup}; CPUs {len(m.allowed_cpus)}; "
        f"ISA {isa}"
    )
