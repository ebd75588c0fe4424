"""Bundled model configs: real HF config.json files (with provenance) usable offline by id.

`data/index.json` lists every file: id, file, kind and a one-line provenance. Kinds:
* "real": an official config.json copied byte for byte (see data/SOURCES.md);
* "derived": a real architecture re-serialized or edited (each says how);
* "defaults": transformers 5.24.0 library defaults, NOT a real model; listed only on request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from servefit.errors import ConfigError, ServefitError

DATA = Path(__file__).parent / "data"
KINDS = ("real", "derived", "defaults")


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    file: str
    kind: str
    provenance: str
    # summary, filled by list_entries()
    architecture: str = ""
    layers: dict[str, int] = field(default_factory=dict, compare=False, hash=False)
    params_b: float = 0.0
    error: str = ""  # why the summary could not be built (should stay empty for bundled files)

    @property
    def path(self) -> Path:
        return DATA / self.file

    @property
    def summary(self) -> str:
        if self.error:
            return f"{self.id}: {self.error}"
        kinds = ", ".join(f"{n} {k}" for k, n in self.layers.items())
        return f"{self.architecture}, {self.params_b:.1f}B params, layers: {kinds}"


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


def list_entries(kinds: tuple[str, ...] = ("real", "derived")) -> list[CatalogEntry]:
    """Bundled configs with a summary (architecture, layers by kind, parameters in billions)."""
    from servefit.model.config import read_json
    from servefit.model.inventory import build_model_spec

    out = []
    for e in _index():
        if e.kind not in kinds:
            continue
        try:
            spec = build_model_spec(read_json(e.path), name=e.id, source=f"catalog:{e.id}")
        except ServefitError as exc:
            out.append(CatalogEntry(e.id, e.file, e.kind, e.provenance, error=str(exc)))
            continue
        out.append(
            CatalogEntry(
                e.id,
                e.file,
                e.kind,
                e.provenance,
                spec.architecture,
                spec.kind_counts(),
                round(spec.params.total / 1e9, 2),
            )
        )
    return out
