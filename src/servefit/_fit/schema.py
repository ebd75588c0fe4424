"""Typed, immutable results of `servefit fit` (JSON: `FitResult.model_dump(mode="json")`)."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from servefit._explain.schema import Outcome
from servefit.frozen import frozen
from servefit.records import Record


@frozen(slots=True, kw_only=True)
class NodeCommand(Record):
    node_rank: int
    argv: list[str]  # the engine argv, entry point included
    shell: str  # ready to paste (POSIX-quoted, one flag per line)


@frozen(slots=True, kw_only=True)
class FitCandidate(Record):
    rank: int  # 1 = best; 0 = the baseline the user gave
    tp_size: int
    pp_size: int
    nodes: int
    gpus_per_node: int
    args: dict[str, Any]  # engine args (dest -> value) of the launch
    changed_flags: list[str]  # tuning flags beyond model, parallelism, context and speculation
    ineffective_flags: list[str] = field(default_factory=list)  # removing them changes nothing
    outcome: Outcome
    meets_concurrency: bool | None = None  # max_running_requests >= --concurrency (None: not asked)
    stranded_state_slots: int = 0  # state slots no running request can use
    stranded_kv_tokens: int = 0  # KV tokens beyond max_running_requests x context
    commands: list[NodeCommand] = field(default_factory=list)


@frozen(slots=True, kw_only=True)
class LayoutNote(Record):
    tp_size: int
    pp_size: int
    evaluated: int
    starting: int
    rejected: str | None = None  # why servefit or the engine rejects the layout outright
    # the recorded start this layout was sized with (servefit/calibration): "<source>, <date>"
    calibrated_from: str | None = None


@frozen(slots=True, kw_only=True)
class Sweep(Record):
    """Effective concurrency of the best candidate's family as one lever moves."""

    lever: str
    flag: str
    x: list[Any]
    effective_concurrency: list[float]
    kv_tokens: list[int]
    starts: list[bool]  # starts with the required headroom
    running: list[int] = field(default_factory=list)  # the engine's max running requests
    meets_concurrency: list[bool] = field(default_factory=list)  # running >= --concurrency


@frozen(slots=True, kw_only=True)
class FitResult(Record):
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
    layouts: list[LayoutNote] = field(default_factory=list)
    best: list[FitCandidate] = field(default_factory=list)
    baseline: FitCandidate | None = None
    beats_baseline: bool | None = None  # best >= baseline in effective concurrency and KV tokens
    sweeps: list[Sweep] = field(default_factory=list)
    note: str | None = None
    gpus_note: str | None = None  # how the GPU count was picked when --num-gpus was not given
    ranking: str = ""  # how the candidates are ordered (_fit/rank.py:RANKING), one line
