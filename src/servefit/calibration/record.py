"""A new calibration entry from what a start measured (doctor/calibration.py reads a log's).

Only what the engine printed goes in `measured`; the launch's engine arguments go in `args`
without any secret (engines/secretflags.py: the declared secret flags are dropped, the rest
masked), so the store never holds a key.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from servefit.calibration.entry import Entry, Measurements, entry_id

# a flag name that speaks of a secret is dropped even where no table declares it
_SECRET_WORD = re.compile(r"token|key|secret|password|credential", re.I)
# the model is the entry's fingerprint, not its path
_MODEL_KEYS = ("model", "model_tag", "model_path")


def safe_args(engine: str, args: dict[str, Any]) -> dict[str, Any]:
    from servefit.engines.secretflags import DECLARED, redactor
    from servefit.records import to_json

    kept = {
        k: v
        for k, v in args.items()
        if k not in DECLARED.get(engine, {})
        and not _SECRET_WORD.search(k)
        and k not in _MODEL_KEYS
        and v is not None
    }
    masked = redactor(engine).data(kept)
    out: dict[str, Any] = {}
    for k, v in masked.items():
        try:
            to_json(v)
        except (TypeError, ValueError):
            continue  # not a JSON value (an object the parser made): nothing sized reads it here
        out[k] = v
    return out


def new_entry(
    fields: dict[str, Any], measured: Measurements, now: datetime | None = None
) -> Entry | None:
    """The entry of `fields` (Entry's, less id, recorded and measured); None when `measured`
    lacks the figures its engine's plan takes (calibration/match.py:usable)."""
    from servefit.calibration import match

    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    blob = {**fields, "measured": measured.model_dump(mode="json")}
    entry = Entry(id=entry_id(blob), recorded=stamp, measured=measured, **fields)
    return entry if match.usable(entry) else None
