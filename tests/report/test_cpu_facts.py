"""`servefit gpus --cpu`: the machine facts a --device cpu plan is sized from, on a synthetic
machine whose NUMA node holds less than /proc/meminfo says (tests/hardware/test_cpu.py)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

from rich.console import Console

from servefit.report.catalogs import render_cpu
from tests.hardware.test_cpu import NODE0_KB, SYSTEM_KB, make_tree, node_meminfo


def test_json_gives_the_node_and_the_machine(tmp_path: Path) -> None:
    root = make_tree(tmp_path, nodes={0: ("0-1", node_meminfo(0, NODE0_KB, 3_000_000))},
                     cgroup={"memory.max": "max"})
    out = io.StringIO()
    with redirect_stdout(out):
        render_cpu("json", root=root)
    row = json.loads(out.getvalue())
    assert row == {
        "name": "Test CPU", "isa": ["avx2"], "node": 0, "nodes": 1,
        "node_total_bytes": NODE0_KB * 1024,
        # MemFree + Active(file) + Inactive(file) + SReclaimable (get_memory_node_info)
        "node_available_bytes": (3_000_000 + 1000 + 2000 + 300) * 1024,
        "node_meminfo": True, "system_total_bytes": SYSTEM_KB * 1024,
        "cgroup_limit_bytes": None, "allowed_cpus": [0, 1], "mems_allowed": [0],
    }


def test_the_table_says_where_the_node_memory_comes_from(tmp_path: Path) -> None:
    root = make_tree(tmp_path, nodes={0: ("0-1", node_meminfo(0, NODE0_KB, 3_000_000))})
    buf = io.StringIO()
    render_cpu("table", Console(file=buf, width=120, color_system=None), root=root)
    text = buf.getvalue()
    # 16,213,752 kB = 15.46 GiB; 24,683,584 kB = 23.54 GiB
    assert "15.46 GiB from /sys/devices/system/node/node0/meminfo" in text
    assert "23.54 GiB" in text and "AMD" not in text
