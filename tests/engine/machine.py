"""The machine facts the live engines read, sampled while they run.

vLLM's CPU worker reads its NUMA node's memory when it sizes the KV cache
(vllm/v1/worker/cpu_worker.py:CPUWorker.determine_available_memory ->
vllm/utils/cpu_resource_utils.py:get_memory_node_info). On some VMs that figure moves while the
machine runs (the node file lists only the memory plugged in so far, and more is plugged as it
is used), so the expectation of a test is never a number written down: it is what servefit's
own reader (servefit/hardware/cpu.py) saw on this machine while the engine started. On a machine
whose node memory holds still the sampler sees one value, and every check is an exact equality.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from servefit.hardware.cpu import node_total_bytes, read_host_memory

GIB = 2**30
# measured terms the suite compared in form only, with the gap it saw (printed at the end)
RESIDUALS: list[str] = []
KV_SPACE = re.compile(
    r"Explicitly set \((?P<kv>[\d.]+)/(?P<total>[\d.]+)\) GiB for KV cache on node (?P<node>\d+)\.")
KV_REFUSAL = re.compile(
    r"ValueError: Available memory on node (?P<node>\d+) \((?P<available>[\d.]+)/"
    r"(?P<total>[\d.]+) GiB\) on kv cache allocation is less than requested memory for kv "
    r"\((?P<kv>[\d.]+) GiB\)\. (?P<rest>.+)")


def format_gib(b: float) -> str:
    """vllm/utils/mem_utils.py:format_gib."""
    return f"{round(b / GIB, 2)}"


def node_total_now() -> int:
    """The node total both suite releases (0.24.0, 0.32.0: cgroup-clamped) read now."""
    return node_total_bytes(read_host_memory(), cgroup_clamp=True)


class NodeSampler:
    """Samples the node total every `period` seconds in a daemon thread, for the session."""

    def __init__(self, period: float = 0.2) -> None:
        self.period = period
        self.seen: set[int] = {node_total_now()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.seen.add(node_total_now())
            except Exception:  # a torn read: the next sample will do
                continue

    def start(self) -> NodeSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def totals(self) -> set[str]:
        """The node totals seen so far, as the engine prints them."""
        self.seen.add(node_total_now())
        return {format_gib(t) for t in self.seen}

    def describe(self) -> str:
        return ", ".join(sorted(self.totals(), key=float)) + " GiB"


def kv_space_lines(predicted: str, totals: Iterable[str]) -> set[str]:
    """The plan's "Explicitly set (X/Y) GiB ..." line with Y as each total the machine showed."""
    m = KV_SPACE.fullmatch(predicted)
    assert m, predicted
    return {f"Explicitly set ({m['kv']}/{t}) GiB for KV cache on node {m['node']}."
            for t in totals}


def same_refusal(predicted: str, actual: str, totals: Iterable[str]) -> bool:
    """The CPU worker's KV refusal: the same node, KV size and words, the node total one the
    machine showed; the available figure is the engine's measurement after its own processes
    loaded (the plan's is taken before it starts), so only its form is compared."""
    p, a = KV_REFUSAL.fullmatch(predicted), KV_REFUSAL.fullmatch(actual)
    if not (p and a):
        return False
    return (p["node"], p["kv"], p["rest"]) == (a["node"], a["kv"], a["rest"]) and (
        a["total"] in set(totals) and float(a["available"]) <= float(a["total"]))


def record_refusal_residual(predicted: str, actual: str) -> None:
    """The gap between the plan's and the worker's available figure (ENGINE_RESIDENT_BYTES on a
    start it was not taken from), printed at the end of the run."""
    p, a = KV_REFUSAL.fullmatch(predicted), KV_REFUSAL.fullmatch(actual)
    if p and a:
        RESIDUALS.append(
            f"CPU worker's available memory after load: engine {a['available']} GiB, planned "
            f"{p['available']} GiB (ENGINE_RESIDENT_BYTES residual "
            f"{float(p['available']) - float(a['available']):+.2f} GiB)")
