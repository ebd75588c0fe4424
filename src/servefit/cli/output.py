"""Shared output for explain and fit: --format table|json and --html FILE."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def emit(
    ctx: click.Context,
    obj: Any,
    fmt: str,
    html_path: str | None,
    render: Callable[[Any], None],
    ok: bool,
) -> None:
    """Write the HTML page if asked, print JSON or the table, exit 0 (ok) or 1."""
    if html_path:
        from servefit.report.html import write_html

        write_html(obj, html_path)
    if fmt == "json":
        click.echo(obj.model_dump_json(indent=2))
    else:
        render(obj)
        if html_path:
            click.echo(f"wrote {html_path}")
    ctx.exit(0 if ok else 1)


def format_options(f):
    f = click.option(
        "--html",
        "html_path",
        default=None,
        metavar="FILE",
        help="Also write one self-contained HTML page with the charts (needs servefit[html]).",
    )(f)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="table for people, json (docs/explain-fit.md) for scripts.",
    )(f)
