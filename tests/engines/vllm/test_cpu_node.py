"""vLLM's CPU platform planned from machine facts: the node the worker binds, that node's memory
as each release reads it, and the refusal of a KV size the node cannot hold.

The machines are synthetic /proc and /sys trees (tests/hardware/test_cpu.py:make_tree) read by
servefit's own readers. Expected lines are the engine's f-strings
(vllm/v1/worker/cpu_worker.py:CPUWorker.determine_available_memory, identical 0.20.0-0.33.0)
with the figures worked by hand: format_gib(b) = round(b / 2**30, 2)
(vllm/utils/mem_utils.py:format_gib).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.engines import registry
from servefit.hardware.cpu import local_cpu
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec
from tests.hardware.test_cpu import NODE0_KB, SYSTEM_KB, make_tree, node_meminfo

MODEL_CONFIG = Path(__file__).resolve().parents[2] / "data/engine-logs/models/qwen3-tiny/config.json"
GIB = 2**30
ONE_GIB = {"VLLM_CPU_KVCACHE_SPACE": "1"}
CPU_RELEASES = [r for r in registry.releases("vllm") if registry.parse_version(r) >= registry.parse_version("0.20.0")]


def model():
    return build_model_spec(read_json(MODEL_CONFIG), name="qwen3-tiny", source="test")


def cpu_plan(root: Path, release: str = "0.32.0", env: dict[str, str] | None = None,
             **args: object):
    return plan(PlanRequest(model=model(), gpu=local_cpu(root), engine=f"vllm=={release}",
                            args={"max_model_len": 4096, **args}, env=env or ONE_GIB))


def kv_line(p) -> str:
    return next(line for line in p.log_lines if line.startswith("Explicitly set ("))


@pytest.mark.parametrize("release", CPU_RELEASES)
def test_the_line_names_the_node_memory_not_the_machine(tmp_path: Path, release: str) -> None:
    # 16,213,752 kB = 15.4627 GiB -> "15.46"; /proc/meminfo's 24,683,584 kB would be "23.54"
    root = make_tree(tmp_path, nodes={0: ("0-1", node_meminfo(0, NODE0_KB, 12_000_000))})
    p = cpu_plan(root, release)
    assert p.verdict == "ok", p.error
    assert kv_line(p) == "Explicitly set (1.0/15.46) GiB for KV cache on node 0."
    assert p.hardware.cpu_node is not None
    assert p.hardware.cpu_node.total_bytes == NODE0_KB * 1024
    assert round(SYSTEM_KB * 1024 / GIB, 2) == 23.54  # the figure the line must not show


def test_the_second_node_when_the_process_runs_there(tmp_path: Path) -> None:
    root = make_tree(tmp_path, cpus_allowed="2-3", mems_allowed="0-1", nodes={
        0: ("0-1", node_meminfo(0, 8_000_000, 7_000_000)),
        1: ("2-3", node_meminfo(1, 12_000_000, 11_000_000)),
    })
    # 12,000,000 kB = 11.4441 GiB
    assert kv_line(cpu_plan(root)) == "Explicitly set (1.0/11.44) GiB for KV cache on node 1."


def test_without_numa_the_system_total(tmp_path: Path) -> None:
    root = make_tree(tmp_path, nodes=None)
    assert kv_line(cpu_plan(root)) == "Explicitly set (1.0/23.54) GiB for KV cache on node 0."


@pytest.mark.parametrize(("release", "line"), [
    # 0.24.0 on: get_memory_node_info clamps the total by the cgroup limit (8 GiB)
    ("0.24.0", "Explicitly set (1.0/8.0) GiB for KV cache on node 0."),
    ("0.32.0", "Explicitly set (1.0/8.0) GiB for KV cache on node 0."),
    # 0.20.0-0.23.x read the node as is
    ("0.20.0", "Explicitly set (1.0/15.46) GiB for KV cache on node 0."),
    ("0.23.0", "Explicitly set (1.0/15.46) GiB for KV cache on node 0."),
])
def test_a_cgroup_limit_clamps_the_node_from_0_24(tmp_path: Path, release: str, line: str) -> None:
    root = make_tree(tmp_path, nodes={0: ("0-1", node_meminfo(0, NODE0_KB, 12_000_000))},
                     cgroup={"memory.max": str(8 * GIB), "memory.current": str(GIB)})
    assert kv_line(cpu_plan(root, release)) == line


def test_a_kv_space_beyond_the_node_is_refused_with_the_engine_text(tmp_path: Path) -> None:
    # available = MemFree + Active(file) + Inactive(file) + SReclaimable
    #           = 12,000,000 + 1,000 + 2,000 + 300 kB = 12,003,300 kB = 11.4472 GiB, less the
    # weights the worker loaded first (qwen3-tiny: the plan's own weights figure) and the
    # engine's processes (ENGINE_RESIDENT_BYTES, 1.75 GiB measured)
    root = make_tree(tmp_path, nodes={0: ("0-1", node_meminfo(0, NODE0_KB, 12_000_000))})
    p = cpu_plan(root, env={"VLLM_CPU_KVCACHE_SPACE": "20"})
    assert p.verdict == "fail"
    after_load = 12_003_300 * 1024 - p.per_rank.weights_gib * GIB - int(1.75 * GIB)
    assert p.error == (
        f"ValueError: Available memory on node 0 ({round(after_load / GIB, 2)}/15.46 GiB) on kv "
        "cache allocation is less than requested memory for kv (20.0 GiB). Decrease "
        "--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other "
        "processes."
    )
    assert not any(line.startswith("Explicitly set (") for line in p.log_lines)  # raised first
    # 11.45 - 0.01 - 1.75 = 9.69 GiB: 9 GiB starts, 10 GiB does not
    assert cpu_plan(root, env={"VLLM_CPU_KVCACHE_SPACE": "9"}).verdict == "ok"
    assert cpu_plan(root, env={"VLLM_CPU_KVCACHE_SPACE": "10"}).verdict == "fail"


def test_the_refusal_follows_the_cgroup_clamp(tmp_path: Path) -> None:
    # limit 8 GiB, usage 1 GiB: available = min(11.45 GiB, 8 - 1) = 7 GiB from 0.24.0, less
    # 1.76 GiB (weights and the engine's processes): 5.24 GiB; 0.23.0 keeps 9.69 GiB
    root = make_tree(tmp_path, nodes={0: ("0-1", node_meminfo(0, NODE0_KB, 12_000_000))},
                     cgroup={"memory.max": str(8 * GIB), "memory.current": str(GIB)})
    env = {"VLLM_CPU_KVCACHE_SPACE": "6"}
    assert cpu_plan(root, "0.32.0", env=env).verdict == "fail"
    assert cpu_plan(root, "0.23.0", env=env).verdict == "ok"
