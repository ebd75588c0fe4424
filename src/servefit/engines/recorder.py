"""Records the server args an engine changes by itself while resolving them."""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Change


class Recorder:
    """Applies one resolution step and records it as a Change (+ the engine's own log line)."""

    def __init__(self, v: dict[str, Any]):
        self.v = v
        self.changes: list[Change] = []
        self.logs: list[str] = []

    def set(self, arg: str, new: Any, reason: str, log: str | None = None) -> None:
        old = self.v.get(arg)
        self.v[arg] = new
        if old != new:
            self.changes.append(Change(arg=arg, old=old, new=new, reason=reason, log=log))
        if log:
            self.logs.append(log)

    def log(self, line: str) -> None:
        self.logs.append(line)
