"""One live engine at a time, shared by the tests that ask for the same case.

Every start of the suite adds `--enforce-eager`: without it the CPU build compiles the model with
torch.compile first (1-3 minutes per start on two cores), and the memory it sizes is the same
either way (the CPU platform captures no CUDA graphs; the recorded logs in tests/data/engine-logs,
started without the flag, show the same figures).
"""

from __future__ import annotations

from pathlib import Path

from tests.engine.machine import NodeSampler
from tools import engine_env
from tools.engine_cases import CASES, EngineCase
from tools.engine_server import EngineServer, Outcome, ServeSpec

EAGER = ("--enforce-eager",)


class EnginePool:
    """At most one live server; a case is started once and its server (or, once stopped, its
    log) is shared by every test that asks for it."""

    def __init__(self, models: Path, logs: Path, sampler: NodeSampler) -> None:
        self.models = models
        self.logs = logs
        self.sampler = sampler  # the node memory the machine showed while the engines ran
        self.current: tuple[str, EngineServer] | None = None
        self.finished: dict[str, EngineServer] = {}

    def model(self, name: str) -> Path:
        return self.models / CASES[name].model

    def spec(self, case: EngineCase, extra: tuple[str, ...] = EAGER) -> ServeSpec:
        return ServeSpec(bin_dir=engine_env.venv_bin(case.release),
                         model=self.models / case.model, flags=(*case.flags, *extra),
                         env=dict(case.env))

    def flags(self, name: str) -> tuple[str, ...]:
        """The engine flags the case's server was started with (after the model)."""
        server = self.serve(name)
        return server.spec.flags

    def serve(self, name: str) -> EngineServer:
        """The started server of a case (ready, or exited for a failure case)."""
        if self.current and self.current[0] == name:
            return self.current[1]
        if name in self.finished:
            return self.finished[name]
        self.release()
        server = EngineServer(self.spec(CASES[name]), self.logs / f"{name}.log")
        outcome: Outcome = server.start(ready_timeout=900)
        if outcome.state == "ready":
            self.current = (name, server)
        else:
            server.stop()
            self.finished[name] = server
        return server

    def adopt(self, name: str, log_path: Path, state: str, extra: tuple[str, ...]) -> None:
        """A start made elsewhere (by `servefit launch`) whose log the other tests share."""
        server = EngineServer(self.spec(CASES[name], extra), log_path)
        server.outcome = Outcome(state, 0.0)
        self.finished[name] = server

    def release(self) -> None:
        if self.current is not None:
            name, server = self.current
            left = server.stop()
            assert not left, f"processes {left} of {name} survived the stop"
            self.finished[name] = server
            self.current = None
