"""Fold the events of one launch into facts, keeping only bounded aggregates (never lines).

Event kinds come from the rules in doctor.sglang / doctor.vllm / doctor.rules. Each rank keeps
the first value it reported (the target model's); a second weight load on a rank after its
pools exist is the speculative draft (SGLang 0.5.x builds a second ModelRunner for it, which
prints "Init torch distributed", "Load weight", "KV Cache is allocated" and "Memory pool end"
again: sglang/srt/speculative/eagle_worker.py).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servefit.doctor.argdump import args_from_command, parse_dict_repr, parse_server_args
from servefit.doctor.facts import (
    AutoChange,
    EngineFacts,
    ErrorFact,
    GraphFacts,
    LaunchFacts,
    LineRef,
    PoolFacts,
    RankFacts,
    SpecFacts,
    TrafficFacts,
)
from servefit.doctor.reader import Hit
from servefit.doctor.rules import Event, EventKind
from servefit.doctor.sglang import ARG_ERROR_MARKERS
from servefit.engines import registry
from servefit.engines.base import LogFeature
from servefit.verify.detectors import first_loop

PHASES = ("none", "args", "distributed", "weights", "pools", "graphs", "ready", "serving")
K = EventKind
# The start-up phase (index into PHASES) each kind of line shows the launch reached; None for
# the lines that say nothing about it (errors, exceptions, the exit).
PHASE_OF: dict[EventKind, int | None] = {
    **dict.fromkeys(
        (
            K.COMMAND,
            K.ARGS_DUMP,
            K.VERSION,
            K.ARGS_NONDEFAULT,
            K.ENGINE_CONFIG,
            K.ARCH,
            K.DEVICE_NAME,
            K.MAX_MODEL_LEN,
            K.BATCHED_TOKENS,
            K.BLOCK_SIZE,
            K.MAMBA_PADDING,
            K.CHANGE,
        ),
        1,
    ),
    **dict.fromkeys((K.DIST_BEGIN, K.DIST_END), 2),
    **dict.fromkeys((K.WEIGHTS_BEGIN, K.WEIGHTS_END, K.KV_DTYPE), 3),
    **dict.fromkeys(
        (
            K.MAMBA_POOL,
            K.KV_POOL,
            K.SWA_SPLIT,
            K.POOL_END,
            K.MM_RESERVE,
            K.KV_AVAILABLE,
            K.CG_ESTIMATE,
            K.KV_TOKENS,
            K.CONCURRENCY,
            K.GPU_BLOCKS,
            K.V0_PROFILE,
            K.PADDING_LAYERS,
            K.FINAL,
            K.CAP,
        ),
        4,
    ),
    **dict.fromkeys((K.GRAPH_BEGIN, K.GRAPH_BS, K.GRAPH_END), 5),
    **dict.fromkeys((K.READY, K.ENGINE_READY, K.SERVER_UP), 6),
    **dict.fromkeys((K.DECODE, K.PREFILL, K.HTTP, K.THROUGHPUT, K.SPEC, K.FINISH_TEXT), 7),
    **dict.fromkeys((K.EXCEPTION_START, K.ERROR, K.ERROR_DETAIL, K.EXCEPTION, K.EXIT), None),
}
MAX_ERRORS = 20
_MAX_PENDING = 16  # argument lines held unread per launch
MAX_CHANGES = 40
_COMPLETIONS = (
    "/v1/chat/completions",
    "/v1/completions",
    "/generate",
    "/v1/responses",
    "/v1/messages",
)


def ref(hit: Hit) -> LineRef:
    t = hit.line.text.strip()
    return LineRef(
        line=hit.line.no, rank=hit.line.rank, text=t if len(t) <= 300 else t[:297] + "..."
    )


@dataclass
class RankAcc:
    values: dict[str, float] = field(default_factory=dict)
    phase: int = 0
    draft: bool = False  # this rank is loading / sizing the speculative draft model

    def first(self, key: str, value: float | None) -> None:
        if value is not None and key not in self.values:
            self.values[key] = value


@dataclass
class Stat:
    n: int = 0
    total: float = 0.0
    lo: float | None = None
    hi: float | None = None
    last: float | None = None

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        self.lo = x if self.lo is None else min(self.lo, x)
        self.hi = x if self.hi is None else max(self.hi, x)
        self.last = x

    def extend(self, values: list[float]) -> None:
        """add() of each value, in order (the same float sums)."""
        if not values:
            return
        total = self.total
        for x in values:
            total += x
        self.n += len(values)
        self.total = total
        lo, hi = min(values), max(values)
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        self.last = values[-1]

    @property
    def mean(self) -> float | None:
        return round(self.total / self.n, 4) if self.n else None


class LaunchAcc:
    """Mutable state of one launch while its lines stream by."""

    def __init__(self, index: int):
        self.index = index
        self.first_line: int | None = None
        self.last_line = 0
        self.start_time: str | None = None
        self.end_time: str | None = None
        self.engine: str | None = None
        self.version: str | None = None
        self.version_source: str | None = None
        self._args: dict[str, Any] = {}
        self._pending: list[tuple[Callable[[str], None], str]] = []
        self.args_source: str | None = None
        self.command: str | None = None
        self._model: str | None = None
        self.architecture: str | None = None
        self.gpu: str | None = None
        self.ranks: dict[str, RankAcc] = {}
        self.pools: dict[str, Any] = {}
        self.changes: list[AutoChange] = []
        self.graph_bs: list[int] = []
        self.graph_mem: float | None = None
        self.graph_secs: float | None = None
        self.ready_line: int | None = None
        self.errors: list[ErrorFact] = []
        self.exit: LineRef | None = None
        self.in_traceback = False
        self.accept_len = Stat()
        self.accept_rate = Stat()
        self.traffic: dict[str, Any] = {
            "http_requests": 0,
            "http_errors": 0,
            "prefill_batches": 0,
            "new_sequences": 0,
            "decode_logs": 0,
            "outputs_logged": 0,
            "repeated_outputs": 0,
        }
        self.throughput = Stat()
        self.max_phase = 0
        self.kinds: set[str] = set()
        self.last_event: str | None = None
        self.format_hints: set[LogFeature] = set()  # line-format traits seen (release tells)

    # ------------------------------------------------------------------ state used by splitting
    @property
    def empty(self) -> bool:
        return self.first_line is None

    @property
    def outcome(self) -> str:
        # asked for at every line while splitting launches: most launches have no error
        if self.errors and any(e.kind != "exception" or e.phase == "startup" for e in self.errors):
            return "failed"
        if self.exit is not None:
            return "exited"
        return "ready" if self.ready_line is not None else "incomplete"

    @property
    def spec_evidence(self) -> bool:
        algo = self.args.get("speculative_algorithm") or self.args.get("speculative_config")
        return (
            (algo not in (None, "None", ""))
            or "intermediate_ssm_gib" in self.pools
            or any(c.arg == "max_running_requests" and "speculative" in c.why for c in self.changes)
            or bool(self.command and "--speculative" in self.command)
        )

    def rank(self, label: str) -> RankAcc:
        if label not in self.ranks:
            self.ranks[label] = RankAcc()
        return self.ranks[label]

    # ------------------------------------------------------------------ applying events
    def apply(self, hit: Hit) -> None:
        ev, line = hit.event, hit.line
        kind = ev["kind"]
        if type(kind) is not EventKind:
            kind = EventKind(kind)
        engine = hit.rule.engine if hit.rule is not None else None
        r = self.note(kind, line.no, line.ts, line.rank, engine)
        HANDLERS[kind](self, ev, hit, r)

    def note(
        self, kind: EventKind, no: int, ts: str | None, rank: str, engine: str | None
    ) -> RankAcc:
        """What every recognised line tells, whatever its kind: where the launch is, when, on
        which rank, in which phase. Returns the rank's accumulator."""
        if self.first_line is None:
            self.first_line = no
        self.last_line = no
        if ts:
            self.start_time = self.start_time or ts
            self.end_time = ts
        if engine and self.engine is None:
            self.engine = engine
        self.kinds.add(kind)
        self.last_event = kind.value
        phase = PHASE_OF.get(kind)
        r = self.rank(rank)
        if phase is not None:
            if phase < 6:
                r.phase = max(r.phase, phase)
            self.max_phase = max(self.max_phase, phase)
        return r

    # The arguments (a server_args dump, a non-default dict, a launch command) are read only
    # when something asks for them: a log may hold 100,000 launches, and only the last
    # MAX_KEPT are ever reported. The lines are kept, in order, and read in that order.
    @property
    def args(self) -> dict[str, Any]:
        self._settle()
        return self._args

    @args.setter
    def args(self, value: dict[str, Any]) -> None:
        self._settle()
        self._args = value

    @property
    def model(self) -> Any:
        self._settle()
        return self._model

    @model.setter
    def model(self, value: Any) -> None:
        self._settle()
        self._model = value

    def _defer(self, read: Callable[[str], None], text: str) -> None:
        self._pending.append((read, text))
        if len(self._pending) > _MAX_PENDING:
            self._settle()

    def _settle(self) -> None:
        while self._pending:
            read, text = self._pending.pop(0)
            read(text)

    def _read_command(self, text: str) -> None:
        if not self._args:
            args = args_from_command(text)
            if args:
                self._args, self.args_source = args, "launch command in log"
                self._model = self._model or args.get("model_path") or args.get("model")

    def _read_args_dump(self, body: str) -> None:
        self._args = parse_server_args(body)
        self.args_source = "server_args dump"
        self._model = self._args.get("model_path") or self._model
        if "mamba_radix_cache_strategy" in self._args:
            self.format_hints.add(LogFeature.ARGS_MAMBA_RADIX_CACHE_STRATEGY)
        elif "mamba_scheduler_strategy" in self._args:
            self.format_hints.add(LogFeature.ARGS_MAMBA_SCHEDULER_STRATEGY)

    def _read_args_nondefault(self, body: str) -> None:
        self._args = parse_dict_repr(body)
        self.args_source = "non-default args"
        self._model = self._args.get("model") or self._args.get("model_tag") or self._model

    def _on_command(self, ev, hit, r):
        self.command = ev["text"]
        if self.engine is None:
            self.engine = "vllm" if "vllm" in ev["text"] else "sglang"
        self._defer(self._read_command, ev["text"])

    def _on_args_dump(self, ev, hit, r):
        self._defer(self._read_args_dump, ev["body"])

    def _on_args_nondefault(self, ev, hit, r):
        self._defer(self._read_args_nondefault, ev["body"])

    def _on_version(self, ev, hit, r):
        self.version = self.version or str(ev["version"])
        self.version_source = self.version_source or f"printed: line {hit.line.no}"

    def _on_engine_config(self, ev, hit, r):
        if ev.get("version"):
            self.version = str(ev["version"])
            self.version_source = f"printed: line {hit.line.no}"
        self.model = self.model or ev.get("model")
        for key in (
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "data_parallel_size",
            "kv_cache_dtype",
            "enable_prefix_caching",
            "quantization",
        ):
            if key in ev and key not in self.args:
                self.args[key] = ev[key]
        if ev.get("max_model_len"):
            self.pools.setdefault("max_model_len", ev["max_model_len"])

    def _on_arch(self, ev, hit, r):
        self.architecture = ev["arch"]

    def _on_device_name(self, ev, hit, r):
        # the file-name form of torch's device name (vllm/utils/platform_utils.py:
        # get_device_name_as_file_name: whitespace and "/" -> "_"), as the GPU's NVML name
        if self.gpu is None:
            self.gpu = str(ev["device"]).replace("_", " ")

    def _on_max_model_len(self, ev, hit, r):
        self.pools["max_model_len"] = ev["n"]

    def _on_batched_tokens(self, ev, hit, r):
        self.pools["max_num_batched_tokens"] = ev["n"]

    def _on_block_size(self, ev, hit, r):
        self.pools["attention_block_size"] = ev["n"]

    def _on_mamba_padding(self, ev, hit, r):
        self.pools["mamba_page_padding_pct"] = ev["pct"]

    def _on_padding_layers(self, ev, hit, r):
        self.pools["padding_layers"] = ev["n"]

    def _on_dist_end(self, ev, hit, r):
        if not r.draft:
            r.first("init_mem_usage_gib", ev.get("usage_gib"))

    def _on_dist_begin(self, ev, hit, r):
        self._maybe_draft(r)

    def _maybe_draft(self, r: RankAcc) -> None:
        if r.phase >= 3 and "weights_gib" in r.values and ("pools_seen" in r.values or r.draft):
            r.draft = True

    def _on_weights_begin(self, ev, hit, r):
        self._maybe_draft(r)
        if not r.draft:
            r.first("free_before_weights_gib", ev["avail_gib"])

    def _on_weights_end(self, ev, hit, r):
        self._maybe_draft(r)
        if r.draft:
            r.first("draft_weights_gib", ev["usage_gib"])
            return
        r.first("weights_gib", ev["usage_gib"])
        if "avail_gib" in ev:
            r.first("free_after_weights_gib", ev["avail_gib"])
            r.first("free_before_weights_gib", round(ev["avail_gib"] + ev["usage_gib"], 2))
        if ev.get("arch"):
            self.architecture = self.architecture or ev["arch"]
        if ev.get("elapsed_s") is None:
            self.format_hints.add(LogFeature.LOAD_END_NO_ELAPSED)
        elif "dtype" in ev:
            self.format_hints.add(LogFeature.LOAD_END_DTYPE)
        else:
            self.format_hints.add(LogFeature.LOAD_END_QUANT)

    def _on_kv_dtype(self, ev, hit, r):
        self.pools.setdefault("kv_dtype", ev["dtype"])

    def _on_mamba_pool(self, ev, hit, r):
        if r.draft:
            return
        r.values["pools_seen"] = 1
        for src, dst in (
            ("size", "max_mamba_cache_size"),
            ("conv_gib", "conv_state_gib"),
            ("ssm_gib", "ssm_state_gib"),
            ("iss_gib", "intermediate_ssm_gib"),
            ("icw_gib", "intermediate_conv_gib"),
        ):
            if src in ev:
                self.pools.setdefault(dst, ev[src])

    def _on_swa_split(self, ev, hit, r):
        if not r.draft:
            self.pools["swa_kv_tokens"] = ev["swa"]
            r.values["swa_full_tokens"] = ev["full"]

    def _on_kv_pool(self, ev, hit, r):
        kv = ev.get("kv_gib")
        if kv is None and "k_gib" in ev:
            kv = round(ev["k_gib"] + ev["v_gib"], 2)
        # hybrid SWA: newer releases label the two pools; older ones print them unlabeled after the split
        # line, the SWA pool first (mem_cache/swa_memory_pool.py:SWAKVPool.__init__)
        swa = ev.get("label") == "SWA" or (
            ev.get("label") is None
            and not r.draft
            and "swa_kv_tokens" in self.pools
            and ev["tokens"] == self.pools["swa_kv_tokens"]
            and ev["tokens"] != r.values.get("swa_full_tokens")
            and not r.values.get("swa_kv_seen")
        )
        if swa and not r.draft:
            r.values["swa_kv_seen"] = 1
            self.pools["swa_kv_tokens"] = ev["tokens"]
            self.pools["swa_kv_size_gib"] = kv
            return
        if r.draft or r.values.get("kv_seen"):
            self.pools.setdefault("draft_kv_tokens", ev["tokens"])
            self.pools.setdefault("draft_kv_size_gib", kv)
            return
        r.values["kv_seen"] = 1
        r.values["pools_seen"] = 1
        if "dtype" in ev:
            self.format_hints.add(LogFeature.KV_ALLOCATED_DTYPE)
            self.pools.setdefault("kv_dtype", ev["dtype"])
        tokens = ev["tokens"]
        if "kv_tokens" not in self.pools or tokens < self.pools["kv_tokens"]:
            self.pools["kv_tokens"] = tokens
            self.pools["k_size_gib"] = ev.get("k_gib")
            self.pools["v_size_gib"] = ev.get("v_gib")
            self.pools["kv_size_gib"] = kv

    def _on_pool_end(self, ev, hit, r):
        if not r.draft:
            r.values["pools_seen"] = 1
            r.first("free_after_pools_gib", ev["avail_gib"])

    def _on_mm_reserve(self, ev, hit, r):
        self.pools["mm_reserve_gib"] = ev["gib"]

    def _on_graph_begin(self, ev, hit, r):
        pass  # the phase is all it says

    def _on_graph_bs(self, ev, hit, r):
        if not r.draft and not self.graph_bs:
            self.graph_bs = ev["bs"]

    def _on_graph_end(self, ev, hit, r):
        role = str(ev.get("role") or "").strip()
        if r.draft or role.startswith("draft"):
            return
        usage = ev.get("usage_gib", ev.get("usage2_gib"))
        if usage is not None:
            r.first("graph_mem_gib", usage)
            self.graph_mem = max(self.graph_mem or 0.0, usage)
        r.first("free_after_graphs_gib", ev.get("avail_gib"))
        secs = ev.get("elapsed_s", ev.get("elapsed2_s", ev.get("secs")))
        if secs is not None:
            self.graph_secs = secs
        self.kinds.add("graphs_captured")

    def _on_final(self, ev, hit, r):
        for k in (
            "max_total_num_tokens",
            "chunked_prefill_size",
            "max_prefill_tokens",
            "max_running_requests",
            "context_len",
            "available_gpu_mem_gib",
        ):
            if k in ev:
                self.pools[k] = ev[k]

    def _on_kv_available(self, ev, hit, r):
        r.first("kv_available_gib", ev["gib"])
        if ev.get("device") == "cpu":
            self.pools["cpu_node_memory_gib"] = ev["node_total_gib"]
            self.pools["cpu_node"] = ev["node"]

    def _on_cg_estimate(self, ev, hit, r):
        self.pools["cudagraph_estimate_gib"] = ev["gib"]

    def _on_kv_tokens(self, ev, hit, r):
        self.pools.setdefault("gpu_kv_cache_tokens", ev["tokens"])
        if "x" in ev:
            self.pools.setdefault("max_concurrency", ev["x"])
            self.pools.setdefault("concurrency_len", ev["len"])

    def _on_concurrency(self, ev, hit, r):
        self.pools.setdefault("max_concurrency", ev["x"])
        self.pools.setdefault("concurrency_len", ev["len"])

    def _on_gpu_blocks(self, ev, hit, r):
        self.pools.setdefault("num_gpu_blocks", ev["n"])

    def _on_v0_profile(self, ev, hit, r):
        self.pools["profile_total_gpu_gib"] = ev["total_gib"]
        self.pools["profile_kv_cache_gib"] = ev["kv_gib"]
        self.pools["gpu_memory_utilization"] = ev["util"]

    def _on_change(self, ev, hit, r):
        self._change(ev, hit)

    def _on_cap(self, ev, hit, r):
        why = ev["why"]
        if ev.get("K") is not None:
            why += f" (max_mamba_cache_size={ev['K']}, {ev['ratio']} state slots per request)"
        self._change({**ev, "why": why}, hit)

    def _change(self, ev: dict[str, Any], hit: Hit) -> None:
        if len(self.changes) >= MAX_CHANGES:
            return
        if any(c.arg == ev["arg"] and c.new == ev.get("new") for c in self.changes):
            return  # printed once per rank
        self.changes.append(
            AutoChange(
                arg=ev["arg"], new=ev.get("new"), old=ev.get("old"), why=ev["why"], at=ref(hit)
            )
        )

    def _on_ready(self, ev, hit, r):
        if self.ready_line is None:
            self.ready_line = hit.line.no

    def _on_engine_ready(self, ev, hit, r):
        self._on_ready(ev, hit, r)

    def _on_server_up(self, ev, hit, r):
        # vLLM is ready once uvicorn is up; SGLang still runs its warm-up request after it
        # (entrypoints/http_server.py:_wait_and_warmup) and says "fired up" when done.
        if self.engine != "sglang":
            self._on_ready(ev, hit, r)

    def _first_request(self, hit: Hit) -> None:
        self.traffic.setdefault("first_request_line", hit.line.no)

    def _on_decode(self, ev, hit, r):
        self.decode(ev, hit.line.no)

    def decode(self, ev: Event, no: int) -> None:
        """SGLang's decode stats line (also read by doctor/serving.py's fast path)."""
        if self.ready_line is None:
            return  # the engine's own warm-up
        t = self.traffic
        t["decode_logs"] += 1
        t.setdefault("first_request_line", no)
        t["max_running"] = max(t.get("max_running", 0), ev["running"])
        t["max_queue"] = max(t.get("max_queue", 0), ev["queue"])
        self.throughput.add(ev["throughput"])
        if "usage" in ev:
            t["max_token_usage"] = max(t.get("max_token_usage", 0.0), ev["usage"])
        if "accept_len" in ev:
            self.accept_len.add(ev["accept_len"])
            self.accept_rate.add(ev["accept_rate"])

    def _on_prefill(self, ev, hit, r):
        self.prefill(ev, hit.line.no)

    def prefill(self, ev: Event, no: int) -> None:
        if self.ready_line is None:
            return
        self.traffic["prefill_batches"] += 1
        self.traffic["new_sequences"] += ev["new_seq"]
        self.traffic.setdefault("first_request_line", no)

    def _on_http(self, ev, hit, r):
        self.http(ev, hit.line.no)

    def http(self, ev: Event, no: int, times: int = 1) -> None:
        """An access line (`times` alike: doctor/serving.py counts a run's lines at once)."""
        if self.ready_line is None:
            return
        if ev["method"] == "POST" and any(ev["path"].startswith(p) for p in _COMPLETIONS):
            self.traffic["http_requests"] += times
            if ev["status"] >= 400:
                self.traffic["http_errors"] += times
            self.traffic.setdefault("first_request_line", no)

    def _on_throughput(self, ev, hit, r):
        t = self.traffic
        t["decode_logs"] += 1
        self.throughput.add(ev["throughput"])
        t["max_running"] = max(t.get("max_running", 0), ev["running"])
        t["max_queue"] = max(t.get("max_queue", 0), ev["queue"])
        if "usage_pct" in ev:
            t["max_token_usage"] = max(t.get("max_token_usage", 0.0), ev["usage_pct"] / 100)
        if ev["running"] or ev["throughput"]:
            self._first_request(hit)

    def _on_spec(self, ev, hit, r):
        if "accept_len" in ev:
            self.accept_len.add(ev["accept_len"])
        if "accept_rate" in ev:
            self.accept_rate.add(ev["accept_rate"])

    def _on_finish_text(self, ev, hit, r):
        self.traffic["outputs_logged"] += 1
        try:
            text = ast.literal_eval(ev["text"])
        except (ValueError, SyntaxError):
            return
        unit = repeated_unit(str(text))
        if unit is not None:
            self.traffic["repeated_outputs"] += 1
            self.traffic.setdefault("repeated_unit", unit)

    def _on_exception_start(self, ev, hit, r):
        self.in_traceback = True

    def _on_error(self, ev, hit, r):
        if ev.get("which") == "cpu_kv_memory":  # the CPU node's figures, as the worker read them
            r.first("kv_available_gib", ev["kv_gib"])
            self.pools["cpu_node_memory_gib"] = ev["node_total_gib"]
            self.pools["cpu_node"] = ev["node"]
            self.pools["cpu_node_available_gib"] = ev["node_available_gib"]
        numbers = {
            k: v for k, v in ev.items() if k not in ("kind", "error", "text") and v is not None
        }
        self._error(ev["error"], ev.get("text") or hit.line.text, hit, numbers)

    def _on_error_detail(self, ev, hit, r):
        numbers = {k: v for k, v in ev.items() if k != "kind"}
        if self.errors:
            last = self.errors[-1]
            self.errors[-1] = last.model_copy(update={"numbers": {**last.numbers, **numbers}})

    def _on_exception(self, ev, hit, r):
        text = ev["text"]
        if ev["exc"].endswith("KeyboardInterrupt"):
            self.exit = self.exit or ref(hit)
            return
        if any(m in text for m in ARG_ERROR_MARKERS):
            self._error("arg_error", text, hit, {})
        elif self.in_traceback or self.ready_line is None:
            self._error("scheduler_exception" if self.in_traceback else "exception", text, hit, {})
        else:
            self._error("exception", text, hit, {})

    def _error(self, kind: str, text: str, hit: Hit, numbers: dict[str, Any]) -> None:
        phase = "runtime" if self.ready_line is not None else "startup"
        for i, e in enumerate(self.errors):
            if e.message == text or (
                e.kind == kind and kind != "exception" and _same_numbers(e.numbers, numbers)
            ):
                if numbers and not e.numbers:
                    self.errors[i] = e.model_copy(update={"numbers": numbers})
                return  # every rank prints it
        if len(self.errors) >= MAX_ERRORS:
            return
        self.errors.append(
            ErrorFact(
                kind=kind,
                message=text.strip()[:2000],
                at=ref(hit),
                phase=phase,
                numbers={k: v for k, v in numbers.items() if isinstance(v, (int, float, str))},
            )
        )

    def _on_exit(self, ev, hit, r):
        if self.exit is None:
            self.exit = ref(hit)

    # ------------------------------------------------------------------ freezing
    def freeze(self) -> LaunchFacts:
        self._settle()  # the arguments first: they tell the release's log format
        ranks = [
            RankFacts(
                rank=label, **{k: v for k, v in acc.values.items() if k in RankFacts.model_fields}
            )
            for label, acc in sorted(self.ranks.items())
            if any(k in RankFacts.model_fields for k in acc.values)
        ]
        t = dict(self.traffic)
        if self.throughput.n:
            t["gen_throughput_max"] = self.throughput.hi
            t["gen_throughput_last"] = self.throughput.last
        spec = SpecFacts(
            samples=max(self.accept_len.n, self.accept_rate.n),
            accept_len_mean=self.accept_len.mean,
            accept_len_min=self.accept_len.lo,
            accept_len_max=self.accept_len.hi,
            accept_rate_mean=self.accept_rate.mean,
            accept_rate_max=self.accept_rate.hi,
        )
        engine = EngineFacts(
            name=self.engine,  # type: ignore[arg-type]
            version=self.version,
            version_source=self.version_source,
            format_family=_family(self.engine, self.format_hints),
        )
        return LaunchFacts(
            index=self.index,
            first_line=self.first_line or 0,
            last_line=self.last_line,
            start_time=self.start_time,
            end_time=self.end_time,
            engine=engine,
            args=self.args,
            args_source=self.args_source,
            command=self.command,
            model=str(self.model) if self.model is not None else None,
            architecture=self.architecture,
            gpu=self.gpu,
            ranks=ranks,
            pools=PoolFacts(**{k: v for k, v in self.pools.items() if v is not None}),
            changes=self.changes,
            graphs=GraphFacts(
                captured="graphs_captured" in self.kinds,
                batch_sizes=self.graph_bs,
                mem_gib=self.graph_mem,
                seconds=self.graph_secs,
            ),
            ready=self.ready_line is not None,
            ready_line=self.ready_line,
            errors=self.errors,
            exit=self.exit,
            spec=spec,
            traffic=TrafficFacts(**t),
            outcome=self.outcome,  # type: ignore[arg-type]
            phase=PHASES[min(self.max_phase, len(PHASES) - 1)],
            last_event=self.last_event,
        )


Handler = Callable[[LaunchAcc, Event, Hit, RankAcc], None]
# every kind of line -> what it records (LaunchAcc._on_<kind>)
HANDLERS: dict[EventKind, Handler] = {
    kind: getattr(LaunchAcc, f"_on_{kind.value}") for kind in EventKind
}


def _same_numbers(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a) and a == b


def _family(engine: str | None, hints: set[LogFeature]) -> str | None:
    """Which mirrored wheel's line formats this launch printed (SGLang does not print its
    version): the traits seen, matched against those each profile declares (registry)."""
    if engine != "sglang":
        return None
    match = registry.match_log(engine, hints)
    return match.family if match else None


def repeated_unit(text: str) -> str | None:
    """The repeating piece when a finished output loops, else None: the detector `servefit
    verify` runs on generated text (verify/detectors.py:first_loop); when the loop is n-gram
    reuse rather than an exact period, its description."""
    finding = first_loop(text)
    if not finding.degenerate:
        return None
    return finding.tail.unit if finding.tail is not None else finding.reason
