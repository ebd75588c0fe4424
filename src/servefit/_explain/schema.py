"""Typed, immutable results of `servefit explain`: outcomes, lever effects, the minimal fix.

The JSON form (`servefit explain --format json`) is `Explanation.model_dump(mode="json")`,
documented in docs/explain-fit.md. GiB figures are per rank (1 GiB = 2**30 bytes).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from servefit._plan.schema import Plan
from servefit.frozen import frozen
from servefit.records import Record


@frozen(slots=True, kw_only=True)
class Outcome(Record):
    """The numbers of one plan that explain and fit compare.

    effective_concurrency is min(max_running_requests, kv_tokens / target context): how many
    requests of the target context length can run at the same time. It is 0 when the plan fails.
    """

    verdict: Literal["ok", "fail"]
    error: str | None = None
    error_consumer: str | None = None
    kv_tokens: int
    max_running_requests: int  # the engine's effective max running requests
    context_len: int  # the context length the engine resolved
    target_context: int  # the context the concurrency is measured at
    full_context_requests: float  # kv_tokens / target_context
    effective_concurrency: float
    # predicted headroom after all pools: SGLang, what the activations and CUDA graphs get;
    # vLLM, what is left beyond its budget (which holds the activation peak and the graphs)
    free_gib: float
    state_slots: int | None = None  # max_mamba_cache_size
    state_slots_per_request: int | None = None
    state_sizing: str | None = None  # which branch sized the state pool
    cap_reason: str = ""
    memory_gib: dict[str, float] = field(default_factory=dict)  # per-rank consumer -> GiB


@frozen(slots=True, kw_only=True)
class RankedConsumer(Record):
    rank: int
    name: str
    gib: float
    bytes: int
    share_of_gpu: float  # percent of the GPU's total memory
    formula: str
    flags: list[str] = field(default_factory=list)


@frozen(slots=True, kw_only=True)
class LeverValue(Record):
    """One value of a lever, re-planned."""

    label: str  # how the value is shown, e.g. "0.9" or "TP 1 x PP 2"
    args: dict[str, Any]  # the engine args set (None = removed)
    outcome: Outcome | None = None  # None when servefit rejected the input (see `rejected`)
    rejected: str | None = None
    same_as_current: bool = False  # pools, verdict and concurrency identical to the current plan
    delta_gib: dict[str, float] = field(default_factory=dict)  # per-rank consumer change vs current
    note: str | None = None  # e.g. how the engine changed the value
    # "the fix" / "closest to what you asked" when the fix (Fix.best / Fix.minimal) is this value
    fix: str | None = None


@frozen(slots=True, kw_only=True)
class LeverEffect(Record):
    name: str  # catalogue name, e.g. "mamba_full_memory_ratio"
    title: str
    dest: str  # engine attribute
    flag: str  # the engine's CLI flag
    current: Any = None  # the resolved value in the current plan
    effect: Literal["changes", "no effect"]
    reason: str  # why it has no effect, or a one-line summary of what it changes
    values: list[LeverValue] = field(default_factory=list)


@frozen(slots=True, kw_only=True)
class FlagEffect(Record):
    """Whether a flag the user set mattered: the plan re-made without it (engine default)."""

    flag: str
    dest: str
    value: Any = None
    mattered: bool
    reason: str
    without: Outcome | None = None


@frozen(slots=True, kw_only=True)
class FixChange(Record):
    flag: str
    dest: str
    old: Any = None
    new: Any = None


@frozen(slots=True, kw_only=True)
class FixCandidate(Record):
    changes: list[FixChange]
    args: dict[str, Any]  # the full engine args of the fixed launch
    outcome: Outcome
    # how far the change moves from what the launch asked: |new - old| / |old| of each changed
    # numeric setting (the largest), 1 for a non-numeric one (a dtype, a strategy, a layout)
    distance: float
    user_flag: bool  # every changed setting is one the user set
    context_loss: int  # tokens of context given up
    command_flags: str  # the changed flags as CLI text


@frozen(slots=True, kw_only=True)
class GpusNeeded(Record):
    """More GPUs of the same kind: the smallest count, searched count by count over every
    TP x PP layout of it (not doubled), at which the weights alone fit, and at which a layout
    starts with the floors."""

    weights_gpus: int | None = None  # None: not even at max_gpus
    tp_size: int | None = None  # the smallest layout that starts (None: none up to max_gpus)
    pp_size: int | None = None
    num_gpus: int | None = None
    outcome: Outcome | None = None
    args: dict[str, Any] = field(default_factory=dict)  # the launch's args at that layout
    flags: str | None = None  # the flag change that layout needs as well (None: as asked)
    max_gpus: int
    tried: int


@frozen(slots=True, kw_only=True)
class Fix(Record):
    """What makes a failing (or degraded) launch start: the change closest to what the user
    asked (`minimal`) and the change with the best outcome (`best`), both single flags that
    start with the floors; `ranking` says how each was chosen, in one line."""

    found: bool
    minimal: FixCandidate | None = None
    best: FixCandidate | None = None
    alternatives: list[FixCandidate] = field(default_factory=list)
    before: Outcome
    tried: int  # plans evaluated
    min_free_gib: float
    min_running: int | None = None  # the user's --concurrency: running requests a fix keeps
    ranking: str = ""
    gpus: GpusNeeded | None = None
    note: str | None = None


@frozen(slots=True, kw_only=True)
class Explanation(Record):
    plan: Plan
    outcome: Outcome
    why: list[str]  # the failure, or what bounds concurrency, in plain sentences
    consumers: list[RankedConsumer]
    levers: list[LeverEffect]
    user_flags: list[FlagEffect] = field(default_factory=list)
    fix: Fix | None = None
    elapsed_s: float = 0.0
