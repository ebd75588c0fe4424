"""Typed facts read from an engine log: one `LaunchFacts` per launch, `LogFacts` for the file.

Everything here is what the log itself printed (GiB as the engine printed it: SGLang's "GB" is
GiB, vLLM prints GiB), never a prediction. Predictions live in `doctor.schema.Replay`.
Models are frozen pydantic objects so `servefit doctor --format json` is `model_dump_json`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LineRef(_Frozen):
    """Where a fact was printed: 1-based line number, the rank prefix and the line itself."""

    line: int
    rank: str = ""
    text: str = ""  # the line, shortened to 300 characters


class EngineFacts(_Frozen):
    name: Literal["sglang", "vllm"] | None = None
    version: str | None = None  # as printed ("0.20.2rc1.dev9+g01d4d1ad3"), or inferred
    version_source: str | None = None  # "printed: ..." | "inferred: ..." | "--engine"
    format_family: str | None = None  # e.g. "sglang-0.5.9" (line formats of that wheel)


class RankFacts(_Frozen):
    """Memory one rank reported, GiB. SGLang prints local (not min-reduced) free memory."""

    rank: str  # "TP0", "DP0 TP1", "TP1", "" when the log has no rank prefix
    free_before_weights_gib: float | None = None  # "Load weight begin. avail mem"
    weights_gib: float | None = None  # "Load weight end ... mem usage" / "Model loading took"
    free_after_weights_gib: float | None = None  # "Load weight end ... avail mem"
    free_after_pools_gib: float | None = None  # first "Memory pool end. avail mem"
    graph_mem_gib: float | None = None  # CUDA-graph capture "mem usage" (target)
    free_after_graphs_gib: float | None = None
    draft_weights_gib: float | None = None  # a second weight load on the rank (spec draft)
    kv_available_gib: float | None = None  # vLLM "Available KV cache memory"
    init_mem_usage_gib: float | None = None  # "Init torch distributed ends ... mem usage"


class PoolFacts(_Frozen):
    """Pool sizes as logged (per rank; the target model's, draft pools separately)."""

    kv_tokens: int | None = None  # SGLang "KV Cache is allocated. #tokens"
    kv_dtype: str | None = None
    k_size_gib: float | None = None
    v_size_gib: float | None = None
    kv_size_gib: float | None = None  # K+V, or the MLA "KV size"
    max_mamba_cache_size: int | None = None
    conv_state_gib: float | None = None
    ssm_state_gib: float | None = None
    intermediate_ssm_gib: float | None = None
    intermediate_conv_gib: float | None = None
    draft_kv_tokens: int | None = None
    draft_kv_size_gib: float | None = None
    swa_kv_tokens: int | None = None  # hybrid SWA models: the sliding-window layers' pool
    swa_kv_size_gib: float | None = None
    mm_reserve_gib: float | None = None
    # the scheduler's summary line (SGLang "max_total_num_tokens=...")
    max_total_num_tokens: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    available_gpu_mem_gib: float | None = None
    # vLLM
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    attention_block_size: int | None = None
    mamba_page_padding_pct: float | None = None
    padding_layers: int | None = None
    gpu_kv_cache_tokens: int | None = None  # "GPU KV cache size: N tokens"
    max_concurrency: float | None = None  # "Maximum concurrency for L tokens per request: Cx"
    concurrency_len: int | None = None
    num_gpu_blocks: int | None = None
    cudagraph_estimate_gib: float | None = None
    profile_total_gpu_gib: float | None = None  # V0 "Memory profiling results: total_gpu_memory"
    profile_kv_cache_gib: float | None = None
    gpu_memory_utilization: float | None = None
    # vLLM's CPU platform: "Explicitly set (kv/node_total) GiB for KV cache on node N." (the KV
    # memory is the rank's kv_available_gib)
    cpu_node_memory_gib: float | None = None
    cpu_node: int | None = None  # "... on node N"
    # the node's available memory after the weights, from the CPU worker's KV refusal
    cpu_node_available_gib: float | None = None


class AutoChange(_Frozen):
    """A setting the engine changed by itself (or a silent cap), with its own words."""

    arg: str
    new: Any = None
    old: Any = None
    why: str
    at: LineRef


class ErrorFact(_Frozen):
    kind: str  # see doctor.classify.KINDS
    message: str  # the engine's line (the exception text when there is one)
    at: LineRef
    phase: str = "startup"  # "startup" | "runtime" (after the server was ready)
    numbers: dict[str, float | int | str] = Field(default_factory=dict)


class SpecFacts(_Frozen):
    """Speculative-decoding acceptance as the engine logged it in its periodic stats."""

    samples: int = 0
    accept_len_mean: float | None = None
    accept_len_min: float | None = None
    accept_len_max: float | None = None
    accept_rate_mean: float | None = None  # 0..1 (vLLM's percentage divided by 100)
    accept_rate_max: float | None = None


class TrafficFacts(_Frozen):
    """Requests and throughput seen after start-up."""

    http_requests: int = 0  # completion-type HTTP requests (uvicorn access lines)
    http_errors: int = 0  # of which status >= 400
    prefill_batches: int = 0
    new_sequences: int = 0  # SGLang "Prefill batch ... #new-seq" summed
    decode_logs: int = 0
    max_running: int | None = None
    max_queue: int | None = None
    gen_throughput_max: float | None = None  # tokens/s
    gen_throughput_last: float | None = None
    max_token_usage: float | None = None  # 0..1
    first_request_line: int | None = None
    outputs_logged: int = 0  # request outputs printed (SGLang --log-requests "Finish:")
    repeated_outputs: int = 0
    repeated_unit: str | None = None  # the repeating piece of one such output


class GraphFacts(_Frozen):
    captured: bool = False
    batch_sizes: list[int] = Field(default_factory=list)
    mem_gib: float | None = None  # target capture "mem usage" / vLLM "took X GiB"
    seconds: float | None = None


# Which error explains a failed launch when it printed several: memory first, then the
# collective and argument errors, the generic exception and the dead-engine notice last.
ERROR_PRIORITY = {
    "startup_memory": 0,
    "cuda_oom": 1,
    "illegal_memory_access": 2,
    "nccl": 3,
    "arg_error": 4,
    "scheduler_exception": 5,
    "exception": 6,
    "engine_dead": 7,
}


class LaunchFacts(_Frozen):
    index: int  # 1-based position among the launches in the file
    first_line: int
    last_line: int
    start_time: str | None = None  # the first timestamp, as printed
    end_time: str | None = None
    engine: EngineFacts = Field(default_factory=EngineFacts)
    args: dict[str, Any] = Field(default_factory=dict)  # engine dest names -> values
    args_source: str | None = (
        None  # "server_args dump" | "non-default args" | "launch command in log"
    )
    command: str | None = None  # a launch command line found in the file before this launch
    model: str | None = None
    architecture: str | None = None
    gpu: str | None = None
    ranks: list[RankFacts] = Field(default_factory=list)
    pools: PoolFacts = Field(default_factory=PoolFacts)
    changes: list[AutoChange] = Field(default_factory=list)
    graphs: GraphFacts = Field(default_factory=GraphFacts)
    ready: bool = False
    ready_line: int | None = None
    errors: list[ErrorFact] = Field(default_factory=list)
    exit: LineRef | None = None  # an exit / shutdown line
    spec: SpecFacts = Field(default_factory=SpecFacts)
    traffic: TrafficFacts = Field(default_factory=TrafficFacts)
    outcome: Literal["ready", "failed", "exited", "incomplete"] = "incomplete"
    phase: str = "none"  # the furthest start-up phase reached
    last_event: str | None = None  # kind of the last recognised line

    @property
    def primary_error(self) -> ErrorFact | None:
        """The error that stopped the launch: the most telling kind, the earliest on a tie."""
        if not self.errors:
            return None
        return min(self.errors, key=lambda e: (ERROR_PRIORITY.get(e.kind, 9), e.at.line))


class LogFacts(_Frozen):
    path: str
    size_bytes: int | None = None
    modified: str | None = None  # file mtime, ISO, local time
    lines: int = 0
    ends_mid_line: bool = False  # no newline at the end: the file may have been cut
    launches_total: int = 0
    launches: list[LaunchFacts] = Field(default_factory=list)  # the most recent ones (bounded)
    dropped_launches: int = 0  # older launches not kept (bounded memory)
    skipped_lines: int = 0  # recognised lines whose values could not be read (torn, corrupted)
    first_skipped_line: int | None = None
    read_notes: list[str] = Field(default_factory=list)  # how it was read: a guess, a cut, a cap
