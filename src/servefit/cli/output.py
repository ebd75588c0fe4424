"""Shared output for explain and fit: --format table|json|shell and --html FILE."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from servefit.validate import OutputFile


def emit(
    ctx: click.Context,
    obj: Any,
    fmt: str,
    html_path: str | None,
    render: Callable[[Any], None],
    ok: bool,
    shell: Callable[[Any], None] | None = None,
    html_args: dict[str, Any] | None = None,
) -> None:
    """Write the HTML page if asked, print JSON, the commands or the table; exit 0 (ok) or 1."""
    if html_path:
        from servefit.report.html import write_html

        write_html(obj, html_path, **(html_args or {}))
    if fmt == "json":
        click.echo(obj.model_dump_json(indent=2))
    elif fmt == "shell" and shell is not None:
        shell(obj)
    else:
        render(obj)
        if html_path:
            click.echo(f"wrote {html_path}")
    ctx.exit(0 if ok else 1)


def require_html(html_path: str | None) -> None:
    """--html needs plotly: say so before a search of seconds, not after it (the module is
    found, not imported, so the check costs nothing on the CLI's path)."""
    if not html_path:
        return
    from importlib.util import find_spec

    from servefit.errors import ServefitError

    if find_spec("plotly") is None:
        raise ServefitError(
            "--html needs the plotly package: pip install 'servefit[html]' (or pip install plotly)"
        )


SHELL_HELP = "shell: only the recommended launch command(s), ready to paste or pipe."


def format_options(f):
    f = click.option(
        "--html",
        "html_path",
        type=OutputFile(),
        default=None,
        metavar="FILE",
        help="Also write one self-contained HTML page with the charts (needs servefit[html]).",
    )(f)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json", "shell"]),
        default="table",
        show_default=True,
        help="table for people, json (docs/explain-fit.md) for scripts; " + SHELL_HELP,
    )(f)
