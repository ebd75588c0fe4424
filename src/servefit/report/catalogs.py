"""`servefit models` and `servefit gpus`: the bundled catalogs as tables or JSON."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table


def render_gpus(fmt: str, console: Console | None = None) -> None:
    from servefit.hardware.catalog import entries

    rows = [
        {"key": e.spec.key, "name": e.spec.name, "memory_mib": e.spec.memory_mib,
         "bandwidth_gbs": e.spec.bandwidth_gbs, "bf16_tflops": e.spec.bf16_tflops, "vendor": e.spec.vendor,
         "unified_memory": e.spec.unified_memory, "memory_from": e.memory_from, "aliases": list(e.aliases)}
        for e in entries()
    ]
    if fmt == "json":
        print(json.dumps(rows, indent=2))
        return
    t = Table(title="GPU catalog (--gpu NAME)", title_justify="left")
    for col, just in (("name", "left"), ("--gpu", "left"), ("MiB", "right"), ("GB/s", "right"),
                      ("bf16 TFLOP/s", "right"), ("memory figure from", "left")):
        t.add_column(col, justify=just)
    for r in rows:
        t.add_row(r["name"], r["key"], f"{r['memory_mib']:,}", f"{r['bandwidth_gbs']:,.0f}",
                  f"{r['bf16_tflops']:,.0f}", r["memory_from"])
    (console or Console()).print(t)


def render_models(fmt: str, console: Console | None = None) -> None:
    from servefit.catalog import list_entries

    rows = [e.as_dict() if hasattr(e, "as_dict") else dict(e.__dict__) for e in list_entries()]
    if fmt == "json":
        print(json.dumps(rows, indent=2, default=str))
        return
    t = Table(title="Model catalog (--model ID, works offline)", title_justify="left")
    t.add_column("id")
    t.add_column("architecture")
    t.add_column("layers")
    t.add_column("params (B)", justify="right")
    t.add_column("provenance", overflow="fold")
    for r in rows:
        layers = r.get("layers") or {}
        layer_txt = ", ".join(f"{n} {k}" for k, n in layers.items()) if isinstance(layers, dict) else str(layers)
        params = r.get("params_billion") or r.get("params_b") or 0
        t.add_row(str(r.get("id")), str(r.get("architecture", "")), layer_txt, f"{float(params):,.1f}",
                  str(r.get("provenance", "")))
    (console or Console()).print(t)
