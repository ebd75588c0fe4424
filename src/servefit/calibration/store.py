"""The calibration store: one JSON file per entry in a private directory.

$SERVEFIT_CALIBRATION_DIR, else $XDG_STATE_HOME/servefit/calibration
(~/.local/state/servefit/calibration). An entry is written once, under its id, with O_EXCL
through a temporary file: recording the same start again changes nothing, and no file the
user has is overwritten. A file that is not an entry is skipped with a note, never deleted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from servefit.calibration.entry import Entry, UnreadableEntry, from_dict
from servefit.errors import ArgumentError, ServefitError
from servefit.records import to_json
from servefit.statedir import state_dir

ENV = "SERVEFIT_CALIBRATION_DIR"
DIR_MODE = 0o700
FILE_MODE = 0o600


def root() -> Path:
    return state_dir(ENV, "calibration")


def path_of(entry_id: str, where: Path | None = None) -> Path:
    return (where or root()) / f"{entry_id}.json"


def save(entry: Entry, where: Path | None = None) -> tuple[Path, bool]:
    """(path, written): False when an entry of that id is already stored (the same start)."""
    base = where or root()
    target = path_of(entry.id, base)
    if target.exists():
        return target, False
    try:
        base.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        tmp = base / f".{entry.id}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(to_json(entry.to_dict(), indent=2) + "\n")
        try:
            os.link(tmp, target)  # fails if another process stored it meanwhile: theirs stays
        except FileExistsError:
            return target, False
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise ServefitError(
            f"cannot write the calibration store {base}: {exc.strerror or exc}"
            f" (set ${ENV} to another directory, or pass --no-record)"
        ) from None
    return target, True


def load(where: Path | None = None) -> tuple[list[Entry], list[str]]:
    """(entries, notes about files that could not be read), newest first."""
    base = where or root()
    try:
        files = sorted(p for p in base.iterdir() if p.suffix == ".json")
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"calibration store {base} unreadable: {exc.strerror or exc}; not used"]
    entries: list[Entry] = []
    notes: list[str] = []
    for p in files:
        try:
            entries.append(read(p))
        except UnreadableEntry as exc:
            notes.append(f"{exc}; skipped")
    entries.sort(key=lambda e: e.recorded, reverse=True)
    return entries, notes


def read(path: Path) -> Entry:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UnreadableEntry(f"{path}: not readable JSON ({exc})") from None
    return from_dict(data, str(path))


def find(prefix: str, where: Path | None = None) -> Entry:
    """The one entry whose id starts with `prefix` (ArgumentError for none or several)."""
    entries, _ = load(where)
    hits = [e for e in entries if e.id.startswith(prefix)] if prefix else []
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise ArgumentError(
            f"no calibration entry {prefix!r} in {where or root()} (see `servefit calibration list`)"
        )
    raise ArgumentError(
        f"calibration id {prefix!r} is ambiguous: {', '.join(e.id for e in hits[:5])}"
    )


def forget(entry: Entry, where: Path | None = None) -> Path:
    p = path_of(entry.id, where)
    try:
        p.unlink()
    except OSError as exc:
        raise ServefitError(f"cannot remove {p}: {exc.strerror or exc}") from None
    return p
