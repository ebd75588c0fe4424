"""Bundled model configs: real HF config.json files (with provenance) usable offline by id.

`data/index.json` lists every file: id, file, kind and a one-line provenance. Kinds:
* "real": an official config.json copied byte for byte (see data/SOURCES.md);
* "derived": a real architecture re-serialized or edited (each says how);
* "defaults": transformers 5.24.0 library defaults, NOT a real model; listed only on request.

Data only: what the configs describe (architecture, layers, parameters) is read by
servefit.model and summarised by report/catalogs.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from servefit.errors import ConfigError
from servefit.frozen import frozen

DATA = Path(__file__).parent / "data"
KINDS = ("real", "derived", "defaults")


@frozen
class CatalogEntry:
    id: str
    file: str
    kind: str
    provenance: str

    @property
    def path(self) -> Path:
        return DATA / self.file


def _index() -> list[CatalogEntry]:
    try:
        rows = json.loads((DATA / "index.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:  # a broken install, not user input
        raise ConfigError(f"bundled catalog index is unreadable: {exc}") from None
    return [CatalogEntry(r["id"], r["file"], r["kind"], r["provenance"]) for r in rows]


def _norm(ref: str) -> str:
    ref = ref.strip().lower()
    ref = ref.removeprefix("catalog:")
    if ref.endswith(".json"):
        ref = ref[: -len(".json")]
    return ref.replace("__", "/")


def find_entry(ref: str) -> CatalogEntry | None:
    """The entry whose id matches ref, case-insensitively; the file-name form
    ("Qwen__Qwen3.6-27B", with or without .json) is accepted too."""
    if not isinstance(ref, str):
        return None
    want = _norm(ref)
    for entry in _index():
        if want in (entry.id.lower(), _norm(entry.file)):
            return entry
    return None


def find(ref: str) -> Path | None:
    """Path of the bundled config for ref, or None."""
    entry = find_entry(ref)
    return entry.path if entry is not None else None


def entries(kinds: tuple[str, ...] = ("real", "derived")) -> list[CatalogEntry]:
    """The bundled configs of these kinds, in index order."""
    return [e for e in _index() if e.kind in kinds]
