"""What a log's launch measured, as the planner takes it, and the calibration entry it makes.

The engine sizes with the most constrained rank (SGLang min-reduces the free memory over the
ranks, model_runner.py:init_memory_pool via get_available_gpu_memory(distributed=True); vLLM's
workers each profile and the engine core takes the smallest KV size, kv_cache_utils.py), so
each term is the min over the ranks that printed it (the weights: the largest).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from servefit.calibration.entry import Entry, Measurements, fingerprint
from servefit.doctor.facts import LaunchFacts

if TYPE_CHECKING:
    from servefit._plan.planner import PlanRequest
    from servefit._plan.schema import Plan


def measured(launch: LaunchFacts) -> tuple[float | None, float | None]:
    """(free before weights, weights) per rank as the engine sizes them: min over ranks."""
    before = [
        r.free_before_weights_gib for r in launch.ranks if r.free_before_weights_gib is not None
    ]
    after = [r.free_after_weights_gib for r in launch.ranks if r.free_after_weights_gib is not None]
    weights = [r.weights_gib for r in launch.ranks if r.weights_gib is not None]
    P = min(before) if before else None
    if P is not None and after:
        return P, round(P - min(after), 4)
    return P, (max(weights) if weights else None)


def kv_memory_set(launch: LaunchFacts, args: dict[str, Any]) -> bool:
    """The start's KV memory was set, not measured: vLLM's CPU platform ("Explicitly set ...
    GiB for KV cache", cpu_worker.py) or --kv-cache-memory-bytes. Nothing to learn from it."""
    return launch.pools.cpu_node_memory_gib is not None or bool(args.get("kv_cache_memory_bytes"))


def measurements(launch: LaunchFacts) -> Measurements:
    """The terms a log printed (calibration/entry.py:Measurements)."""
    P, W = measured(launch)
    kv = [r.kv_available_gib for r in launch.ranks if r.kv_available_gib is not None]
    if (
        not kv
    ):  # vLLM's max-model-len refusal quotes it: "... the available KV cache memory (X GiB)"
        kv = [
            float(e.numbers["available_gib"])
            for e in launch.errors
            if isinstance(e.numbers.get("available_gib"), (int, float))
        ]
    pools = launch.pools
    return Measurements(
        free_before_weights_gib=P,
        weights_gib=W,
        kv_available_gib=min(kv) if kv else None,
        kv_tokens=pools.gpu_kv_cache_tokens or pools.kv_tokens,
        cudagraph_estimate_gib=pools.cudagraph_estimate_gib,
    )


def entry_of(
    launch: LaunchFacts,
    request: PlanRequest,
    plan: Plan,
    *,
    source: str,
    kind: str,
    now: datetime | None = None,
) -> Entry | None:
    """The calibration entry of a replayed launch; None when it measured nothing a plan can take
    (a CPU-platform start, a start that stopped before its figures, a model not read)."""
    from servefit.calibration.record import new_entry, safe_args

    if (
        plan.hardware.source == "cpu"
        or not hasattr(request.model, "layers")
        or kv_memory_set(launch, dict(request.args))
    ):
        return None
    h = plan.hardware
    return new_entry(
        {
            "source": os.path.abspath(source) if source not in ("-", "/dev/stdin") else "stdin",
            "source_kind": kind,
            "launch_index": launch.index,
            "engine": plan.engine.name,
            "profile": plan.engine.profile,
            "engine_version": launch.engine.version,
            "gpu": h.gpu,
            "gpu_memory_mib": h.memory_mib,
            "num_gpus": h.num_gpus,
            "model": plan.model.name,
            "model_fingerprint": fingerprint(request.model),  # type: ignore[arg-type]
            "tp": h.tp_size,
            "pp": h.pp_size,
            "dp": h.dp_size,
            "ep": h.ep_size,
            "args": safe_args(plan.engine.name, dict(request.args)),
            "args_source": launch.args_source or "launch command in log",
            "outcome": launch.outcome,
        },
        measurements(launch),
        now,
    )
