"""`servefit calibration list | show | forget`: what servefit learned from this machine's starts."""

from __future__ import annotations

import click

EPILOG = """\b
Entries are recorded by `servefit doctor LOG` (unless --no-record) and by `servefit launch`
once the server is ready, one JSON file each in $SERVEFIT_CALIBRATION_DIR (default
~/.local/state/servefit/calibration; docs/calibration.md). plan, explain and fit use the entry
of the same engine release, GPU, model and TP/PP/DP/EP, and say so in their first line;
--no-calibration gives the cold plan.

\b
Examples:
  servefit calibration list
  servefit calibration show 3f2a9c
  servefit calibration forget 3f2a9c
"""


@click.group("calibration", epilog=EPILOG)
def calibration() -> None:
    """What real starts on this machine measured, and which plans use it."""


@calibration.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def list_cmd(fmt: str) -> None:
    """Every stored entry, newest first."""
    from servefit.calibration import store
    from servefit.records import to_json

    entries, notes = store.load()
    if fmt == "json":
        click.echo(
            to_json(
                {
                    "dir": str(store.root()),
                    "entries": [e.to_dict() for e in entries],
                    "notes": notes,
                },
                indent=2,
            )
        )
        return
    for n in notes:
        click.echo(f"note: {n}", err=True)
    if not entries:
        click.echo(f"no calibration entries in {store.root()}; `servefit doctor LOG` records one")
        return
    from servefit.report.console import make_console
    from servefit.report.grid import Col, Grid

    t = Grid(
        [
            Col("id"),
            Col("recorded"),
            Col("start", wrap=True),
            Col("measured", wrap=True, under=True),
        ],
        f"Calibration entries in {store.root()}, newest first",
    )
    for e in entries:
        t.add(
            e.id,
            e.recorded[:16].replace("T", " "),
            f"{e.model} on {e.num_gpus}x {e.gpu}, TP {e.tp} PP {e.pp} DP {e.dp}, "
            f"{e.engine}=={e.profile} ({e.outcome}); {e.source}",
            ", ".join(_terms(e)),
        )
    make_console().print(t)


@calibration.command("show")
@click.argument("entry_id", metavar="ID")
def show_cmd(entry_id: str) -> None:
    """One entry as stored (JSON); ID may be a unique prefix."""
    from servefit.calibration import store
    from servefit.records import to_json

    click.echo(to_json(store.find(entry_id).to_dict(), indent=2))


@calibration.command("forget")
@click.argument("entry_id", metavar="ID")
def forget_cmd(entry_id: str) -> None:
    """Remove one entry (later plans no longer use it); ID may be a unique prefix."""
    from servefit.calibration import store

    entry = store.find(entry_id)
    click.echo(f"forgot {entry.id} ({store.forget(entry)})")


def _terms(e) -> list[str]:
    m = e.measured
    names = {
        "free_before_weights_gib": "free before weights",
        "weights_gib": "weights",
        "kv_available_gib": "available KV",
        "cudagraph_estimate_gib": "CUDA graphs",
    }
    out = [f"{names[k]} {getattr(m, k):g} GiB" for k in names if getattr(m, k) is not None]
    if m.kv_tokens is not None:
        out.append(f"{m.kv_tokens:,} KV tokens")
    return out
