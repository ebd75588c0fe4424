"""One live engine at a time, shared by the tests that ask for the same case."""

from __future__ import annotations

from pathlib import Path

from tools import engine_env
from tools.engine_cases import CASES, EngineCase
from tools.engine_server import EngineServer, Outcome, ServeSpec


class EnginePool:
    """At most one live server; a server is shared by every test that asks for its case."""

    def __init__(self, models: Path, logs: Path) -> None:
        self.models = models
        self.logs = logs
        self.current: tuple[str, EngineServer] | None = None
        self.finished: dict[str, EngineServer] = {}

    def spec(self, case: EngineCase, extra: tuple[str, ...] = ()) -> ServeSpec:
        return ServeSpec(bin_dir=engine_env.venv_bin(case.release),
                         model=self.models / case.model, flags=(*case.flags, *extra),
                         env=dict(case.env))

    def serve(self, name: str, extra: tuple[str, ...] = ()) -> EngineServer:
        """The started server of a case (ready, or exited for a failure case)."""
        key = name + "".join(extra)
        if self.current and self.current[0] == key:
            return self.current[1]
        if key in self.finished:
            return self.finished[key]
        self.release()
        case = CASES[name]
        server = EngineServer(self.spec(case, extra), self.logs / f"{name}.log")
        outcome: Outcome = server.start(ready_timeout=900)
        if outcome.state == "ready":
            self.current = (key, server)
        else:
            server.stop()
            self.finished[key] = server
        return server

    def adopt(self, name: str, log_path: Path, state: str) -> None:
        """A start made elsewhere (by `servefit launch`) whose log the other tests share."""
        server = EngineServer(self.spec(CASES[name]), log_path)
        server.outcome = Outcome(state, 0.0)
        self.finished[name] = server

    def release(self) -> None:
        if self.current is not None:
            key, server = self.current
            left = server.stop()
            assert not left, f"processes {left} of {key} survived the stop"
            self.finished[key] = server
            self.current = None
