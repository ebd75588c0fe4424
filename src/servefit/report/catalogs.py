"""`servefit models` and `servefit gpus`: the bundled catalogs as tables or JSON."""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path

from rich.console import Console

from servefit import catalog
from servefit.catalog import CatalogEntry
from servefit.engines import registry
from servefit.errors import ServefitError
from servefit.frozen import frozen
from servefit.report.console import make_console
from servefit.report.grid import Col, Grid


def render_gpus(fmt: str, console: Console | None = None) -> None:
    from servefit.hardware.catalog import entries

    rows = [
        {
            "key": e.spec.key,
            "name": e.spec.name,
            "memory_mib": e.spec.memory_mib,
            "bandwidth_gbs": e.spec.bandwidth_gbs,
            "bf16_tflops": e.spec.bf16_tflops,
            "vendor": e.spec.vendor,
            "unified_memory": e.spec.unified_memory,
            "memory_from": e.memory_from,
            "aliases": list(e.aliases),
        }
        for e in entries()
    ]
    if fmt == "json":
        print(json.dumps(rows, indent=2))
        return
    t = Grid(
        [
            Col("name", wrap=True),
            Col("--gpu"),
            Col("MiB", right=True),
            Col("GB/s", right=True),
            Col("bf16 TFLOP/s", right=True, wrap=True),
            Col("memory from", wrap=True, under=True),
        ],
        "GPU catalog (--gpu NAME; sources: --format json)",
    )
    for r in rows:
        t.add(
            r["name"],
            r["key"],
            f"{r['memory_mib']:,}",
            f"{r['bandwidth_gbs']:,.0f}",
            f"{r['bf16_tflops']:,.0f}",
            memory_source(r["memory_from"]),
        )
    (console or make_console()).print(t)


def render_cpu(fmt: str, console: Console | None = None, root: Path = Path("/")) -> None:
    """`servefit gpus --cpu`: the facts a --device cpu plan is sized from (hardware/cpu.py)."""
    from servefit.hardware.cpu import node_total_bytes, read_cpu_facts

    facts = read_cpu_facts(root)
    m = facts.memory
    row = {
        "name": facts.name,
        "isa": sorted(facts.flags),
        "node": m.node,
        "nodes": m.nodes,
        "node_total_bytes": node_total_bytes(m),
        "node_available_bytes": m.node_meminfo.available if m.node_meminfo else m.system_available,
        "node_meminfo": m.node_meminfo is not None,
        "system_total_bytes": m.system_total,
        "cgroup_limit_bytes": m.cgroup_limit,
        "allowed_cpus": list(m.allowed_cpus),
        "mems_allowed": list(m.mems_allowed),
    }
    if fmt == "json":
        print(json.dumps(row, indent=2))
        return

    def gib(b: int | None) -> str:
        return "none" if b is None else f"{b / 2**30:.2f} GiB"

    node_from = (
        f"/sys/devices/system/node/node{m.node}/meminfo"
        if m.node_meminfo
        else "/proc/meminfo (no node file)"
    )
    t = Grid([Col("what", wrap=True), Col("value", wrap=True)], "This machine as vLLM's CPU platform")
    t.add("CPU", facts.name)
    t.add("ISA the platform branches on", ", ".join(row["isa"]) or "none of them")
    t.add("NUMA node of the worker", f"{m.node} (of {m.nodes}; CPUs {len(m.allowed_cpus)} allowed)")
    t.add("node memory (the engine's total)", f"{gib(row['node_total_bytes'])} from {node_from}")
    t.add("node available now", gib(row["node_available_bytes"]))
    t.add("/proc/meminfo MemTotal", gib(m.system_total))
    t.add("cgroup memory limit (from vLLM 0.24.0)", gib(m.cgroup_limit))
    (console or make_console()).print(t)


def memory_source(memory_from: str) -> str:
    """The catalog's provenance tag (hardware/catalog.py) in words; the tag itself is in JSON."""
    kind = memory_from.split(":", 1)[0]
    return {
        "log": "a start-up log",
        "ref": "measured",
        "reported": "the driver",
        "inferred": "inferred",
    }.get(kind, memory_from)


_ABBREV = {
    "full_attention": "attn",
    "sliding_window": "swa",
    "gated_deltanet": "GDN",
    "mamba2": "mamba2",
    "kda": "KDA",
    "mla": "MLA",
    "short_conv": "conv",
    "lightning": "lightning",
    "mlp": "mlp",
    "moe": "moe",
}


@frozen
class ModelSummary:
    """A bundled config as the planner reads it: architecture, layers by kind, parameters."""

    entry: CatalogEntry
    architecture: str = ""
    layers: dict[str, int] = field(default_factory=dict)
    params_b: float = 0.0
    error: str = ""  # why the config could not be read (should stay empty for bundled files)
    served: dict[str, list[str]] = field(default_factory=dict)  # engine -> releases serving it

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def kind(self) -> str:
        return self.entry.kind

    @property
    def text(self) -> str:
        if self.error:
            return f"{self.id}: {self.error}"
        kinds = ", ".join(f"{n} {k}" for k, n in self.layers.items())
        return f"{self.architecture}, {self.params_b:.1f}B params, layers: {kinds}"


def summaries(kinds: tuple[str, ...] = ("real", "derived")) -> list[ModelSummary]:
    """Every bundled config of these kinds, read with the model inventory."""
    from servefit.model.config import read_json
    from servefit.model.inventory import build_model_spec

    out = []
    for e in catalog.entries(kinds):
        try:
            spec = build_model_spec(read_json(e.path), name=e.id, source=f"catalog:{e.id}")
        except ServefitError as exc:
            out.append(ModelSummary(e, error=str(exc)))
            continue
        out.append(
            ModelSummary(
                e,
                spec.architecture,
                spec.kind_counts(),
                round(spec.params.total / 1e9, 2),
                served=registry.serving_releases(spec),
            )
        )
    return out


def render_models(fmt: str, console: Console | None = None) -> None:
    entries = summaries()
    if fmt == "json":
        rows = [
            {
                "id": e.id,
                "architecture": e.architecture,
                "layers": e.layers,
                "params_billion": e.params_b,
                "kind": e.kind,
                "file": e.entry.file,
                "provenance": e.entry.provenance,
                "served_by": e.served,
            }
            for e in entries
        ]
        print(json.dumps(rows, indent=2))
        return
    t = Grid(
        [
            Col("id"),
            Col("token mixers", wrap=True),
            Col("params B", right=True),
            Col("served by (engine releases)", wrap=True, under=True),
        ],
        "Model catalog (--model ID, works offline; provenance: --format json)",
    )
    for e in entries:
        mixers = {k: n for k, n in e.layers.items() if k not in ("mlp", "moe")}
        ffn = "moe" if e.layers.get("moe") else "dense"
        text = " + ".join(f"{n} {_ABBREV.get(k, k)}" for k, n in mixers.items()) + f" ({ffn})"
        served = "; ".join(registry.release_runs(k, v) for k, v in e.served.items())
        t.add(e.id, text, f"{e.params_b:,.1f}", served)
    (console or make_console()).print(t)
