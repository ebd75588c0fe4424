"""The contract every engine profile implements.

An engine profile mirrors one released engine version. It is a pure function of its inputs:

    resolve_args(model, gpus, user_args, env) -> ResolvedArgs     # the engine's ServerArgs post-init
    size_pools(model, gpus, resolved, memory) -> Sizing            # the engine's memory profiling

`planner.plan()` glues them together and builds the immutable `Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.plan.schema import Change, Consumer, PerRank, Pools

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class Flag:
    """One engine CLI flag: its spellings, destination attribute and value type."""

    names: tuple[str, ...]
    dest: str
    kind: str = "str"  # "str" | "int" | "float" | "bool" (store_true) | "bool_false" (store_false) | "json" | "list"
    choices: tuple[str, ...] | None = None
    help: str = ""


@dataclass(frozen=True)
class ResolvedArgs:
    """Server args after the engine's own resolution, plus what it changed and why."""

    values: dict[str, Any]
    changes: tuple[Change, ...] = ()
    warnings: tuple[str, ...] = ()
    log_lines: tuple[str, ...] = ()  # warnings the engine prints while resolving, verbatim
    error: str | None = None  # an arg-resolution error the engine raises (exact text)
    env: dict[str, str] = field(default_factory=dict)  # engine env vars that size memory

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


@dataclass(frozen=True)
class MemoryInputs:
    """Runtime memory figures, per rank, in GiB (the unit SGLang prints as GB).

    pre_load_free_gib: free memory after CUDA/NCCL init and before weights, min over ranks
    (SGLang's `pre_model_load_memory` / v0.5.9 `min_per_gpu_memory`).
    weights_gib: target weights resident on the most loaded rank.
    draft_weights_gib: speculative draft weights on that rank (MTP layers etc.).
    """

    total_gib: float
    pre_load_free_gib: float
    weights_gib: float
    draft_weights_gib: float = 0.0
    calibrated: bool = False


@dataclass(frozen=True)
class Sizing:
    """What an engine profile computes from memory: pools, per-rank breakdown, verdict."""

    pools: Pools
    per_rank: PerRank
    error: str | None = None
    error_consumer: str | None = None
    error_detail: str | None = None  # the numbers behind error_consumer
    consumers: tuple[Consumer, ...] = ()
    log_lines: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


class EngineProfile(Protocol):
    ENGINE: str
    VERSION: str
    FLAGS: tuple[Flag, ...]

    def resolve_args(
        self, model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str]
    ) -> ResolvedArgs: ...

    def size_pools(
        self, model: ModelSpec, gpus: GPUSet, resolved: ResolvedArgs, memory: MemoryInputs
    ) -> Sizing: ...
