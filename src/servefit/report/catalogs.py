"""`servefit models` and `servefit gpus`: the bundled catalogs as tables or JSON."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table


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
    t = Table(title="GPU catalog (--gpu NAME)", title_justify="left")
    for col, just in (
        ("name", "left"),
        ("--gpu", "left"),
        ("MiB", "right"),
        ("GB/s", "right"),
        ("bf16 TFLOP/s", "right"),
        ("memory figure from", "left"),
    ):
        t.add_column(col, justify=just)
    for r in rows:
        t.add_row(
            r["name"],
            r["key"],
            f"{r['memory_mib']:,}",
            f"{r['bandwidth_gbs']:,.0f}",
            f"{r['bf16_tflops']:,.0f}",
            r["memory_from"],
        )
    (console or Console()).print(t)


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


def render_models(fmt: str, console: Console | None = None) -> None:
    from servefit.catalog import list_entries

    entries = list_entries()
    if fmt == "json":
        rows = [
            {
                "id": e.id,
                "architecture": e.architecture,
                "layers": e.layers,
                "params_billion": e.params_b,
                "kind": e.kind,
                "file": e.file,
                "provenance": e.provenance,
            }
            for e in entries
        ]
        print(json.dumps(rows, indent=2))
        return
    t = Table(
        title="Model catalog (--model ID, works offline; provenance: --format json)",
        title_justify="left",
    )
    t.add_column("id", no_wrap=True)
    t.add_column("token mixers", overflow="fold")
    t.add_column("params B", justify="right")
    for e in entries:
        mixers = {k: n for k, n in e.layers.items() if k not in ("mlp", "moe")}
        ffn = "moe" if e.layers.get("moe") else "dense"
        text = " + ".join(f"{n} {_ABBREV.get(k, k)}" for k, n in mixers.items()) + f" ({ffn})"
        t.add_row(e.id, text, f"{e.params_b:,.1f}")
    (console or Console()).print(t)
