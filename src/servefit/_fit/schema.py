"""Typed, immutable results of `servefit fit` (JSON: `FitResult.model_dump(mode="json")`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from servefit._explain.schema import Outcome


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeCommand(_Frozen):
    node_rank: int
    argv: list[str]  # the engine argv, entry point included
    shell: str  # ready to paste (POSIX-quoted, one flag per line)


class FitCandidate(_Frozen):
    rank: int  # 1 = best; 0 = the baseline the user gave
    tp_size: int
    pp_size: int
    nodes: int
    gpus_per_node: int
    args: dict[str, Any]  # engine args (dest -> value) of the launch
    changed_flags: list[str]  # tuning flags beyond model, parallelism, context and speculation
    ineffective_flags: list[str] = Field(default_factory=list)  # removing them changes nothing
    outcome: Outcome
    meets_concurrency: bool | None = None  # max_running_requests >= --concurrency (None: not asked)
    stranded_state_slots: int = 0  # state slots no running request can use
    stranded_kv_tokens: int = 0  # KV tokens beyond max_running_requests x context
    commands: list[NodeCommand] = Field(default_factory=list)


class LayoutNote(_Frozen):
    tp_size: int
    pp_size: int
    evaluated: int
    starting: int
    rejected: str | None = None  # why servefit or the engine rejects the layout outright


class Sweep(_Frozen):
    """Effective concurrency of the best candidate's family as one lever moves."""

    lever: str
    flag: str
    x: list[Any]
    effective_concurrency: list[float]
    kv_tokens: list[int]
    starts: list[bool]  # starts with the required headroom
    running: list[int] = Field(default_factory=list)  # the engine's max running requests
    meets_concurrency: list[bool] = Field(default_factory=list)  # running >= --concurrency


class FitResult(_Frozen):
    model: str
    gpu: str
    engine: str
    profile: str
    gpus_per_node: int
    nodes: int
    context: int
    concurrency: int | None = None
    spec: str
    min_free_gib: float
    allow_lossy: bool = False
    allow_no_radix: bool = False
    candidates_evaluated: int
    candidates_starting: int
    elapsed_s: float
    candidates_per_s: float
    layouts: list[LayoutNote] = Field(default_factory=list)
    best: list[FitCandidate] = Field(default_factory=list)
    baseline: FitCandidate | None = None
    beats_baseline: bool | None = None  # best >= baseline in effective concurrency and KV tokens
    sweeps: list[Sweep] = Field(default_factory=list)
    note: str | None = None
    gpus_note: str | None = None  # how the GPU count was picked when --num-gpus was not given
    ranking: str = ""  # how the candidates are ordered (_fit/rank.py:RANKING), one line
