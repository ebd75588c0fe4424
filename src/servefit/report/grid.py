"""Tables that never split a flag or a number, at any width.

A table is laid out the first way that fits the width:
1. inline: every column side by side; prose columns wrap at spaces (a `--flag value` pair
   stays on one line when it can), numbers and flags never wrap;
2. under: the columns marked `under` (long flags, reasons) move to indented lines below
   their row;
3. stacked: each row becomes a block of `header: value` lines.
No cell is ever cut or folded inside a word; a word longer than the whole width is printed
whole. Lines carry no trailing spaces, so snapshots and copies are clean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.text import Text

from servefit.frozen import frozen

GAP = 2  # spaces between columns
INDENT = 4  # under/stacked lines
UNDER_MIN = 32  # an `under` column squeezed narrower than this moves below its row


@frozen
class Col:
    header: str
    right: bool = False  # numbers: right-aligned
    wrap: bool = False  # prose: may wrap at spaces
    under: bool = False  # may move below the row when the width is short
    label: str | None = None  # shown before the text when it moved below the row (default: header)


@frozen
class Cell:
    text: str
    style: str = ""


@frozen
class Row:
    cells: tuple[Cell, ...]
    style: str = ""


@dataclass
class Grid:
    cols: Sequence[Col]
    title: str | None = None
    rows: list[Row] = field(default_factory=list)

    def add(self, *cells: str | Cell, style: str = "") -> None:
        if len(cells) != len(self.cols):
            raise ValueError(f"{len(cells)} cells for {len(self.cols)} columns")
        self.rows.append(
            Row(tuple(c if isinstance(c, Cell) else Cell(str(c)) for c in cells), style)
        )

    def render(self, width: int) -> Text:
        out = Text(no_wrap=True, overflow="ignore")  # laid out here; rich must not refold it
        if self.title:
            _line(out, Text(self.title, style="bold"))
        idx = list(range(len(self.cols)))
        widths = _inline_widths(self.cols, self.rows, idx, width)
        if widths is not None and not self._squeezed(widths):
            _inline(out, self.cols, self.rows, idx, widths, [], width)
            return _done(out)
        kept = [i for i in idx if not self.cols[i].under]
        moved = [i for i in idx if self.cols[i].under]
        if moved and kept:
            widths = _inline_widths(self.cols, self.rows, kept, width)
            if widths is not None:
                _inline(out, self.cols, self.rows, kept, widths, moved, width)
                return _done(out)
        _stacked(out, self.cols, self.rows, width)
        return _done(out)

    def _squeezed(self, widths: list[int]) -> bool:
        """An `under` column inline but narrower than UNDER_MIN (and than its text): reads
        better below the row."""
        for c, w, i in zip(self.cols, widths, range(len(self.cols)), strict=True):
            if c.under and w < UNDER_MIN and any(len(r.cells[i].text) > w for r in self.rows):
                return True
        return False

    def __rich_console__(self, console, options):  # noqa: ANN001 - rich protocol
        yield self.render(options.max_width)


# ------------------------------------------------------------------------------------ layout


def _groups(text: str) -> list[str]:
    """Words, with a `--flag` kept together with the value that follows it."""
    words = text.split()
    out: list[str] = []
    for w in words:
        if out and out[-1].startswith("-") and " " not in out[-1] and not w.startswith("-"):
            out[-1] += " " + w
        else:
            out.append(w)
    return out


def wrap(text: str, width: int) -> list[str]:
    """Greedy wrap at spaces; groups longer than the width fall back to words; a word longer
    than the width stays whole on its own line. Explicit newlines are kept."""
    lines: list[str] = []
    for para in text.split("\n"):
        cur = ""
        for g in _groups(para):
            parts = [g] if len(g) <= width else g.split(" ")
            for p in parts:
                if not cur:
                    cur = p
                elif len(cur) + 1 + len(p) <= width:
                    cur += " " + p
                else:
                    lines.append(cur)
                    cur = p
        lines.append(cur)
    return lines


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _natural(text: str) -> int:
    return max((len(line) for line in text.split("\n")), default=0)


def _inline_widths(
    cols: Sequence[Col], rows: list[Row], idx: list[int], width: int
) -> list[int] | None:
    mins, nats = [], []
    for i in idx:
        c = cols[i]
        cells = [r.cells[i].text for r in rows]
        nat = max([_natural(c.header), *(_natural(t) for t in cells)])
        if c.wrap:
            lo = max([_longest_word(c.header), *(_longest_word(t) for t in cells)])
        else:
            lo = max([_longest_word(c.header), *(_natural(t) for t in cells)])
        mins.append(lo)
        nats.append(nat)
    spare = width - sum(mins) - GAP * (len(idx) - 1)
    if spare < 0:
        return None
    widths = list(mins)
    # headers of fixed columns on one line first, then prose in proportion to its need
    for k, i in enumerate(idx):
        if not cols[i].wrap:
            add = min(spare, nats[k] - widths[k])
            widths[k] += add
            spare -= add
    # an `under` column first gets what keeps it inline, then prose in column order
    # (labels come first, long reasons last)
    for k, i in enumerate(idx):
        if cols[i].under:
            add = max(0, min(spare, min(nats[k], UNDER_MIN) - widths[k]))
            widths[k] += add
            spare -= add
    for k in range(len(idx)):
        add = min(spare, nats[k] - widths[k])
        widths[k] += add
        spare -= add
    return widths


def _inline(
    out: Text,
    cols: Sequence[Col],
    rows: list[Row],
    idx: list[int],
    widths: list[int],
    moved: list[int],
    width: int,
) -> None:
    header = [wrap(cols[i].header, w) for i, w in zip(idx, widths, strict=True)]
    for k in range(max(len(h) for h in header)):
        cells = [
            (h[k] if k < len(h) else "", cols[i].right, w, "bold")
            for h, i, w in zip(header, idx, widths, strict=True)
        ]
        _line(out, _join(cells))
    _line(out, Text((" " * GAP).join("─" * w for w in widths), style="dim"))
    for r in rows:
        wrapped = [
            wrap(r.cells[i].text, w) if cols[i].wrap else r.cells[i].text.split("\n")
            for i, w in zip(idx, widths, strict=True)
        ]
        for k in range(max(len(x) for x in wrapped)):
            cells = [
                (x[k] if k < len(x) else "", cols[i].right, w, r.cells[i].style or r.style)
                for x, i, w in zip(wrapped, idx, widths, strict=True)
            ]
            _line(out, _join(cells))
        for i in moved:
            cell = r.cells[i]
            if not cell.text.strip():
                continue
            name = cols[i].header if cols[i].label is None else cols[i].label
            label = f"{name}: " if name else ""
            _hanging(out, label, cell.text, width, cell.style or r.style)


def _stacked(out: Text, cols: Sequence[Col], rows: list[Row], width: int) -> None:
    for r in rows:
        head, *rest = range(len(cols))
        first = r.cells[head]
        lead = "#" if cols[head].header == "#" else ""
        _line(out, Text(lead + first.text, style=first.style or r.style or "bold"))
        for i in rest:
            cell = r.cells[i]
            if not cell.text.strip():
                continue
            _hanging(out, f"{cols[i].header}: ", cell.text, width, cell.style or r.style)


def _hanging(out: Text, label: str, text: str, width: int, style: str) -> None:
    """`label text` indented by INDENT, continuation lines indented under the text."""
    pad = " " * INDENT
    body = wrap(text, max(20, width - INDENT - len(label)))
    if len(label) > width // 3:  # a long label: the text goes below it
        _line(out, Text(pad + label.rstrip(), style="dim"))
        for ln in wrap(text, max(20, width - 2 * INDENT)):
            _line(out, Text(pad * 2 + ln, style=style))
        return
    for k, ln in enumerate(body):
        t = Text(pad)
        t.append(label if k == 0 else " " * len(label), style="dim")
        t.append(ln, style=style)
        _line(out, t)


def _join(cells: list[tuple[str, bool, int, str]]) -> Text:
    t = Text()
    for k, (s, right, w, style) in enumerate(cells):
        if k:
            t.append(" " * GAP)
        padded = s.rjust(w) if right else s.ljust(w)
        t.append(padded, style=style)
    return t


def _line(out: Text, t: Text) -> None:
    t.rstrip()
    out.append_text(t)
    out.append("\n")


def _done(out: Text) -> Text:
    if out.plain.endswith("\n"):
        out.right_crop(1)
    return out


@frozen
class Para:
    """A paragraph wrapped at spaces with a hanging indent: `prefix` on the first line, the
    continuation lines indented by `indent` (never a fold inside a word or a number)."""

    text: str
    prefix: str = ""
    indent: int = 2
    style: str = ""
    prefix_style: str = ""

    def render(self, width: int) -> Text:
        out = Text(no_wrap=True, overflow="ignore")
        first = width - len(self.prefix)
        groups = _groups(self.text)
        if groups and len(groups[0]) > first and self.prefix.strip():
            # the first flag and its value do not fit after the prefix: all of it below
            _line(out, Text(self.prefix.rstrip(), style=self.prefix_style))
            for ln in wrap(self.text, max(20, width - self.indent)):
                _line(out, Text(" " * self.indent + ln, style=self.style))
            return _done(out)
        lines = wrap(self.text, max(20, first))
        rest = wrap(" ".join(lines[1:]), max(20, width - self.indent)) if len(lines) > 1 else []
        t = Text(self.prefix, style=self.prefix_style)
        t.append(lines[0] if lines else "", style=self.style)
        _line(out, t)
        for ln in rest:
            _line(out, Text(" " * self.indent + ln, style=self.style))
        return _done(out)

    def __rich_console__(self, console, options):  # noqa: ANN001 - rich protocol
        yield self.render(options.max_width)
