"""Typed records of a launch: the run record (run.json), preflight checks, the engine's
start-up facts and the supervisor's settings. JSON is `model_dump(mode="json")`; docs/launch.md
documents the fields.

The run record is mutable on purpose: the supervisor and `servefit stop` update it in place
under a file lock (rundir.RunDir.update), always writing the whole file atomically.

Every record can be read back: no model accepts a non-finite float, on construction or on
assignment (pydantic would write nan and inf as null, which a float field then refuses), so a
value that could not be read back raises where it is set instead of in every later command.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

State = Literal[
    "starting", "loading_weights", "allocating", "capturing_graphs", "ready", "failed", "stopped"
]
# Start-up stages in the order an engine goes through them; a run never moves backwards.
STAGES: tuple[str, ...] = ("starting", "loading_weights", "allocating", "capturing_graphs", "ready")
TERMINAL: frozenset[str] = frozenset({"failed", "stopped"})
STATE_LABEL = {
    "starting": "starting",
    "loading_weights": "loading weights",
    "allocating": "allocating",
    "capturing_graphs": "capturing graphs",
    "ready": "ready",
    "failed": "failed",
    "stopped": "stopped",
}

CheckStatus = Literal["ok", "warn", "fail", "skip"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)


class Check(_Model):
    """One preflight check. `fail` refuses the launch unless --force."""

    name: str  # plan | gpu-memory | gpu-processes | port | exposure | visible-devices | nvml
    status: CheckStatus
    message: str
    detail: list[str] = Field(default_factory=list)


class SupervisorConfig(_Model):
    """How long to wait and how to probe; every value is a `servefit launch` option."""

    ready_timeout_s: float = 1800.0  # from spawn to ready (weights of a 27B model take minutes)
    probe_timeout_s: float = 5.0  # one /health or /v1/models request
    chat_timeout_s: float = 120.0  # the first chat completion (kernels may still JIT-compile)
    probe_interval_s: float = 1.0
    settle_s: float = 1.0  # after the first answer: the engine must still be alive and healthy
    health_path: Literal["/health", "/health_generate"] = "/health"
    health_interval_s: float = 10.0  # after ready
    unhealthy_after: int = 3  # failed health checks in a row that mean "stopped answering"
    grace_s: float = 15.0  # SIGTERM -> SIGKILL when servefit stops the engine itself
    keep_failed: bool = False  # leave an engine that never became ready running
    # store what the start measured in the calibration store (docs/calibration.md); False:
    # `servefit launch --no-record`
    record_calibration: bool = True


class EngineFacts(_Model):
    """What the engine printed while starting (rank 0's lines; GiB as the engine prints them)."""

    avail_before_load_gib: float | None = None
    weights_gib: float | None = (
        None  # SGLang "Load weight end ... mem usage", vLLM "Model loading took"
    )
    avail_after_load_gib: float | None = None
    kv_tokens: int | None = None
    kv_gib: float | None = None  # SGLang K + V sizes, vLLM "Available KV cache memory"
    mamba_slots: int | None = None
    mamba_gib: float | None = None  # conv + ssm state
    spec_state_gib: float | None = None  # intermediate ssm + conv window (speculative)
    pool_end_avail_gib: float | None = None
    graph_s: float | None = None
    graph_gib: float | None = None
    max_running_requests: int | None = None
    capped_running_requests: int | None = None
    context_len: int | None = None
    max_concurrency: float | None = None  # vLLM "Maximum concurrency for N tokens per request"
    http_url: str | None = None
    engine_says_ready: bool = False  # "The server is fired up" / "Application startup complete."
    errors: list[str] = Field(default_factory=list)  # error lines, first few, verbatim


class Timings(_Model):
    """Epoch seconds at which each stage was entered."""

    created: float
    started: float | None = None
    loading_weights: float | None = None
    allocating: float | None = None
    capturing_graphs: float | None = None
    ready: float | None = None
    ended: float | None = None
    time_to_ready_s: float | None = None  # ready - started


class LaunchSpec(_Model):
    """What the supervisor executes, with the real values of every secret. Never written to
    the run directory (argv.json and env.json hold the redacted copies): `servefit launch`
    hands it to the detached supervisor through a pipe (supervisor.spawn_supervisor)."""

    argv: list[str]
    env: dict[str, str]  # only what servefit sets or changes, as env.json
    cwd: str
    api_key: str | None = None  # the key the readiness probes send
    api_key_source: str | None = None  # "--api-key" | "VLLM_API_KEY"


# StopInfo.by of the stops the supervisor makes itself, and the option that set its limit.
SUPERVISOR_STOPS = {
    "not ready in time": "--ready-timeout",
    "stopped answering after its first request": "--settle",
}


class StopInfo(_Model):
    requested_at: float
    by: str  # "servefit stop", "not ready in time", "interrupted", ...
    signals: list[str] = Field(default_factory=list)  # signals sent, in order
    grace_s: float
    escalated: bool = False  # SIGKILL was needed
    port_closed: bool | None = None
    gpu_released: bool | None = None  # None: not checked (no NVML)
    note: str | None = None


class RunRecord(_Model):
    """run.json."""

    schema_version: int = 1
    id: str
    engine: str
    command_line: str
    cwd: str
    host: str
    port: int
    url: str
    state: State = "starting"
    message: str | None = None  # why it failed or stopped
    pid: int | None = None
    pgid: int | None = None
    pid_start_ticks: int | None = None
    watcher_pid: int | None = None
    watcher_start_ticks: int | None = None  # the supervisor's start time (a pid is reused)
    exit_code: int | None = None
    exit_signal: str | None = None
    served_model: str | None = None
    timings: Timings
    facts: EngineFacts = Field(default_factory=EngineFacts)
    config: SupervisorConfig = Field(default_factory=SupervisorConfig)
    preflight: list[Check] = Field(default_factory=list)
    forced: bool = False
    plan_verdict: str | None = None
    plan_engine: str | None = None  # what the plan used, e.g. "sglang==0.5.9" (for the doctor)
    plan_gpu: str | None = None  # --gpu as given, or "local"
    plan_model: str | None = None
    stop_requested: bool = False
    stop: StopInfo | None = None
    leftover_pids: list[int] = Field(
        default_factory=list
    )  # group members alive after the leader exited
    diagnosis: str | None = None  # the doctor's summary; the full text is in diagnosis.txt
    calibration: str | None = None  # the calibration entry this start recorded (or had already)
    probe_key: str | None = None  # the key the probes send, redacted: "--api-key ***5e884898"
    # Why readiness stopped at /health: the server wants a key servefit does not know (or
    # refused the one it sent). The server runs; it is not failed, and not stopped for it.
    auth_note: str | None = None

    @property
    def time_to_ready_s(self) -> float | None:
        return self.timings.time_to_ready_s

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL
