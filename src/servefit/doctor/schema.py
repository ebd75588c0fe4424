"""What `servefit doctor` concludes: the report object (JSON: docs/doctor-json.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from servefit.doctor.facts import ErrorFact, LaunchFacts, LineRef


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Finding(_Frozen):
    code: str  # stable identifier, e.g. "stale_log", "silent_cap", "planner_gap"
    severity: Literal["error", "warning", "info"]
    title: str
    detail: str
    at: LineRef | None = None
    numbers: dict[str, Any] = Field(default_factory=dict)


class PoolCheck(_Frozen):
    """One pool figure: what the log printed against what the planner predicts from it."""

    name: str
    unit: str  # "tokens" | "slots" | "requests" | "GiB"
    logged: float
    predicted: float
    gap_pct: float  # (predicted - logged) / logged x 100
    flagged: bool  # beyond 1 % (and beyond the log's 2-decimal rounding for GiB)


class Replay(_Frozen):
    """The planner re-run with the log's measured free memory and weights."""

    engine: str  # the profile used, e.g. "sglang==0.5.9"
    engine_note: str | None = None
    model: str
    gpu: str
    measured_free_before_gib: float | None = None
    measured_weights_gib: float | None = None
    # vLLM: the log's non-KV memory minus servefit's model of it (calibration/apply.py)
    measured_nonkv_correction_gib: float | None = None
    calibrated: bool = False
    args: dict[str, Any] = Field(default_factory=dict)  # what the replay passed as engine args
    verdict: Literal["ok", "fail"]
    error: str | None = None
    error_consumer: str | None = None
    error_detail: str | None = None
    kv_tokens: int | None = None
    max_mamba_cache_size: int | None = None
    mamba_slots_per_request: int | None = None
    mamba_sizing: str | None = None  # which branch sized the state pool
    effective_max_running_requests: int | None = None
    free_after_pools_gib: float | None = None
    checks: list[PoolCheck] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class FixChange(_Frozen):
    arg: str  # engine dest name
    flag: str  # the flag to pass
    old: Any = None
    new: Any = None


class FixOption(_Frozen):
    changes: list[FixChange]
    kv_tokens: int | None = None
    max_running_requests: int | None = None
    free_after_pools_gib: float | None = None
    why: str


class Fix(_Frozen):
    """The proposed change, re-planned on this machine's measured figures."""

    best: FixOption
    alternatives: list[FixOption] = Field(default_factory=list)
    command: str | None = None  # the fixed launch command, when one is known
    source: str  # "replay" (planner on measured figures) | "log" (the engine's own estimate)


class RootCause(_Frozen):
    kind: str  # startup_memory | cuda_oom | illegal_memory_access | nccl | arg_error | ...
    summary: str
    error: ErrorFact | None = None
    memory: str | None = None  # which memory ran out / which pool
    consumer: str | None = None  # the memory consumer behind it (from the replay when available)
    flags: list[str] = Field(default_factory=list)  # flags that control that consumer
    detail: str | None = None


class LaunchSummary(_Frozen):
    index: int
    first_line: int
    last_line: int
    start_time: str | None = None
    engine: str | None = None
    outcome: str


class DoctorReport(_Frozen):
    path: str
    lines: int
    launches: list[LaunchSummary] = Field(default_factory=list)
    launches_total: int = 0
    diagnosed: int | None = None  # index of the launch diagnosed
    status: Literal["failed", "warning", "ok", "incomplete", "no-launch"]
    notes: list[str] = Field(default_factory=list)
    root_cause: RootCause | None = None
    fix: Fix | None = None
    findings: list[Finding] = Field(default_factory=list)
    replay: Replay | None = None
    launch: LaunchFacts | None = None
    # the calibration entry of this launch (calibration/entry.py, docs/calibration.md): stored
    # by `servefit doctor` unless --no-record
    calibration: dict[str, Any] | None = None
