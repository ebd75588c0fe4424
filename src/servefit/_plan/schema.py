"""The Plan: a typed, immutable result of planning one launch. Renderers and consumers read it.

The JSON form (`servefit plan --format json`) is `Plan.model_dump(mode="json")`, documented in
docs/plan-json.md. Byte figures in `pools` are per rank; GiB figures use 1 GiB = 2**30 bytes,
the unit SGLang prints as "GB".

The records are frozen dataclasses (servefit/records.py says why not pydantic): nothing checks
or converts a value when one is made, so callers pass what the annotations say (mypy checks).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from servefit.frozen import frozen
from servefit.records import Record


@frozen(slots=True, kw_only=True)
class EngineRef(Record):
    name: str
    version: str  # the version asked for
    profile: str  # the mirrored release whose rules were applied
    note: str | None = None  # e.g. "sglang==0.5.18 has no profile; using the nearest, 0.5.23"


@frozen(slots=True, kw_only=True)
class ModelRef(Record):
    name: str
    architecture: str
    source: str
    layers: dict[str, int]  # layer kinds -> count
    dtype: str
    quantization: str
    params_billion: float


@frozen(slots=True, kw_only=True)
class CpuNodeRef(Record):
    """vLLM's CPU platform: the NUMA node the worker binds, as the release reads it
    (engines/vllm/cpu_platform.py:node_memory); bytes. available_bytes is None where unknown."""

    node: int
    total_bytes: int
    available_bytes: int | None


@frozen(slots=True, kw_only=True)
class HardwareRef(Record):
    gpu: str
    num_gpus: int
    memory_mib: int
    tp_size: int
    pp_size: int
    dp_size: int
    ep_size: int
    source: str  # catalog | nvml | override | cpu
    cpu_node: CpuNodeRef | None = None


@frozen(slots=True, kw_only=True)
class Change(Record):
    """A server arg the engine changes by itself, and why."""

    arg: str
    old: Any = None
    new: Any = None
    reason: str
    log: str | None = None  # the engine's own warning line, verbatim, if it prints one


@frozen(slots=True, kw_only=True)
class PerRank(Record):
    """Memory of the most loaded rank, GiB."""

    total_gib: float
    pre_load_free_gib: float  # free after CUDA/NCCL init, before weights (min over ranks)
    weights_gib: float
    draft_weights_gib: float = 0.0
    kv_cache_gib: float = 0.0
    mamba_state_gib: float = 0.0
    spec_state_gib: float = 0.0
    draft_kv_gib: float = 0.0
    req_to_token_gib: float = 0.0
    reserved_gib: float  # pre_load_free * (1 - mem_fraction_static): activations, graphs, slack
    free_gib: float  # predicted free after all pools (the engine's "Memory pool end avail mem")
    # vLLM's memory outside torch's pools that stays allocated (NCCL, cuBLAS workspaces) and its
    # CUDA graphs: with the allocations above, the CUDA context and free_gib they partition the
    # GPU. The activation peak is transient: its memory is free again at rest (inside free_gib).
    # 0 for SGLang, whose graphs and activations come out of free_gib.
    non_torch_gib: float = 0.0
    graphs_gib: float = 0.0
    activation_gib: float = 0.0


@frozen(slots=True, kw_only=True)
class Pools(Record):
    """Pool sizes on one rank. Bytes are per rank."""

    budget_gib: float  # memory the engine splits between state and KV ("rest_memory")
    kv_budget_gib: (
        float  # what is left of it for the KV pool after the state reservations (< 0: short)
    )
    kv_bytes_per_token: int
    max_total_num_tokens: int
    page_size: int
    context_len: int
    mamba_state_bytes_per_request: int = 0
    conv_state_bytes_per_request: int = 0
    ssm_state_bytes_per_request: int = 0
    mamba_layers: int = 0
    max_mamba_cache_size: int | None = None
    mamba_slots_per_request: int | None = None
    mamba_sizing: str | None = None  # which branch sized the state pool
    spec_state_slots: int | None = None
    effective_max_running_requests: int
    cap_reason: str
    max_concurrency_at_context: float  # full-context requests the KV pool can hold
    # vLLM's block pool (None for SGLang): tokens per block, blocks in the shared pool, the pool
    # size its "Mamba cache blocks" check compares max_num_seqs with, the exact concurrency.
    block_size: int | None = None
    num_blocks: int | None = None
    mamba_blocks: int | None = None
    max_concurrency: float | None = None


@frozen(slots=True, kw_only=True)
class Consumer(Record):
    """One memory consumer on a rank, with the formula that produced it."""

    name: str
    gib: float
    formula: str
    flags: list[str] = field(default_factory=list)


@frozen(slots=True, kw_only=True)
class CalibrationRef(Record):
    """The calibration entry whose measurements a plan used (servefit/calibration, docs/
    calibration.md): what the engine measured on a real start of this model on this GPU."""

    id: str
    source: str  # the log (doctor) or run directory (launch) it was recorded from
    recorded: str  # when, ISO 8601 UTC
    terms: list[str]  # the measured figures the plan took from it
    # settings in which this launch differs from the recorded one ("max_num_seqs: 256 -> 64"):
    # their effect on the measured terms is modelled, not measured
    differs: list[str] = field(default_factory=list)


@frozen(slots=True, kw_only=True)
class Band(Record):
    """A cold plan at the two edges of the measured terms it models (_plan/band.py), per rank."""

    kv_budget_gib: float  # the KV budget moves by up to this much either way
    kv_tokens_low: int
    kv_tokens_high: int
    verdict_low: str
    verdict_high: str
    error_low: str | None = None  # what the engine says at the low edge, when it fails there
    marginal: bool
    terms: list[str] = field(default_factory=list)  # each term's bound, and its logs


@frozen(slots=True, kw_only=True)
class Plan(Record):
    engine: EngineRef
    model: ModelRef
    hardware: HardwareRef
    verdict: Literal["ok", "fail"]
    error: str | None = None
    error_consumer: str | None = None  # the consumer that made it fail
    error_detail: str | None = None  # that consumer's numbers against the budget
    calibrated: bool = False  # pre-load and weights figures came from a log
    calibration: CalibrationRef | None = None  # the stored entry they came from, if any
    # a cold plan's edges (servefit/_plan/band.py): set by the commands, never by the planner
    band: Band | None = None
    resolved_args: dict[str, Any]
    user_args: dict[str, Any]
    changes: list[Change] = field(default_factory=list)
    per_rank: PerRank
    pools: Pools
    consumers: list[Consumer] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
