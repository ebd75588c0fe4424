"""The console every command prints through: no automatic highlighting, a width that never
cuts a flag or a number.

In a terminal the width is the terminal's. In a pipe or a log file (no terminal) it is
`COLUMNS` when set, else unlimited: tables are laid out at their natural width, one row per
line, so `grep` and copy see whole rows (rich alone falls back to 80 columns there and folds
flags and numbers character by character).
"""

from __future__ import annotations

import os
import sys
from typing import IO

from rich.console import Console

WIDE = 1000  # "no limit": tables never need more than their natural width


def make_console(file: IO[str] | None = None, *, width: int | None = None) -> Console:
    stream = file if file is not None else sys.stdout
    if width is None and not _is_terminal(stream) and not os.environ.get("COLUMNS"):
        width = WIDE
    return Console(
        file=file,
        width=width,
        highlight=False,  # no colouring of random digits (`Qwen3.6`)
        emoji=False,
        soft_wrap=False,
    )


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def plain(console: Console, text: str) -> None:
    """Print text exactly as given: no markup, no wrapping, no highlighting (commands)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)


class Plain:
    """Text laid out already (a command, one flag per line): printed as is, never rewrapped."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console, options):  # noqa: ANN001 - rich protocol
        from rich.text import Text

        yield Text(self.text, no_wrap=True, overflow="ignore")
