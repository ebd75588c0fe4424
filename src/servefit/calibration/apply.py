"""Plan with a stored calibration: the PlanRequest gains the entry's measured terms.

SGLang sizes its pools from two figures it measures, the free memory before the weights and
the weights (model_runner.py:init_memory_pool, profile_max_num_token); with both given, the
mirror is exact. vLLM measures its whole non-KV memory in the profiling run
(gpu_worker.py:Worker.determine_available_memory) and prints only the result, "Available KV
cache memory"; the recorded start is re-planned with servefit's model, and the difference
between the modelled and the logged figure becomes a correction of the non-KV memory
(engines/base.py:Measured.nonkv_correction_gib). The same launch then gets the logged figure
back; a nearby one (another utilization, context or request cap) moves by what servefit models
between the two starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servefit.calibration import match, store
from servefit.calibration.entry import Entry, fingerprint
from servefit.errors import ServefitError

if TYPE_CHECKING:
    from servefit._plan.planner import PlanRequest
    from servefit._plan.schema import CalibrationRef


def key_for(request: PlanRequest) -> tuple[match.Key, Any, Any] | None:
    """(key, model, GPU) of a request; None where no calibration applies (the CPU platform
    sizes nothing it measures; a GPU given by memory alone is not a machine one can match)."""
    from servefit._plan.planner import resolve_gpu, resolve_model
    from servefit.engines.registry import select

    profile, ref = select(request.engine)
    gpu, _ = resolve_gpu(request.gpu, request.gpu_mem_mib)
    if gpu.vendor == "cpu":
        return None
    model = resolve_model(request.model)
    sizes = profile.parallel_sizes(dict(request.args))
    key = match.Key(
        engine=ref.name,
        profile=ref.profile,
        gpu=gpu.name,
        gpu_memory_mib=gpu.memory_mib,
        model_fingerprint=fingerprint(model),
        tp=sizes.tp,
        pp=sizes.pp,
        dp=sizes.dp,
        ep=sizes.ep,
    )
    return key, model, gpu


def calibrate(request: PlanRequest, where: Path | None = None) -> tuple[PlanRequest, list[str]]:
    """The request with the best entry's measurements, and notes for the plan's first lines
    (what was used, what was not and why). A request that already carries measured figures
    (--measured-*, --free-gib) is the user's calibration and is left as it is."""
    if _measured_given(request):
        return request, []
    entries, notes = store.load(where)
    out, more = calibrate_with(request, entries)
    return out, notes + more


def calibrate_with(request: PlanRequest, entries: Sequence[Entry]) -> tuple[PlanRequest, list[str]]:
    """calibrate() with the entries given (newest first), the store not read: fit matches one
    loaded store to each layout it searches."""
    notes: list[str] = []
    if not entries or _measured_given(request):
        return request, notes
    found = key_for(request)
    if found is None:
        return request, notes
    key, model, gpu = found
    hit = match.best(entries, key, request.args)
    if hit is None:
        return request, notes
    try:
        calibrated = with_entry(request, hit.entry, model, gpu)
        differs = hit.differs
        if hit.entry.args_source == match.RESOLVED:  # compare resolved with resolved
            differs = _resolved_differences(hit.entry, calibrated)
    except ServefitError as exc:
        return request, notes + [f"calibration {hit.entry.id} not used: {exc}"]
    return replace(calibrated, calibration=ref(hit.entry, differs, calibrated)), notes


def _resolved_differences(entry: Entry, request: PlanRequest) -> tuple[str, ...]:
    from servefit._plan.planner import plan

    resolved = plan(replace(request, text=False)).resolved_args
    return match.differences(entry.args, resolved, resolved=True)


def _measured_given(request: PlanRequest) -> bool:
    return (
        request.measured_free_before_gib is not None
        or request.measured_weights_gib is not None
        or request.measured_nonkv_correction_gib is not None
        or request.free_gib is not None
    )


def with_entry(request: PlanRequest, entry: Entry, model: Any, gpu: Any) -> PlanRequest:
    m = entry.measured
    if entry.engine == "sglang":
        return replace(
            request,
            model=model,
            gpu=gpu,
            measured_free_before_gib=m.free_before_weights_gib,
            measured_weights_gib=m.weights_gib,
        )
    correction = nonkv_correction(entry, model, gpu)
    return replace(
        request,
        model=model,
        gpu=gpu,
        measured_weights_gib=m.weights_gib,
        measured_nonkv_correction_gib=correction,
    )


def nonkv_correction(entry: Entry, model: Any, gpu: Any) -> float:
    """vLLM: the recorded start's modelled available KV memory minus the logged one, GiB."""
    from servefit._plan.planner import PlanRequest

    assert entry.measured.kv_available_gib is not None  # match.usable
    recorded = PlanRequest(
        model=model,
        gpu=gpu,
        engine=f"vllm=={entry.profile}",
        args=dict(entry.args),
        num_gpus=entry.num_gpus,
        measured_weights_gib=entry.measured.weights_gib,
    )
    return correction_of(recorded, entry.measured.kv_available_gib)


def correction_of(recorded: PlanRequest, logged_kv_gib: float) -> float:
    """The non-KV correction of a vLLM start (> 0: the engine measured more than servefit
    models): `recorded` planned cold, its available KV memory minus the logged one. Shared by
    the store (above) and the doctor's replay of a log. ServefitError when the plan of the
    recorded launch does not reach the KV sizing (nothing to compare)."""
    from servefit._plan.planner import plan

    cold = plan(replace(recorded, text=False))
    if cold.resolved_args.get("kv_cache_memory_bytes"):
        raise ServefitError("its recorded launch fixed the KV memory (--kv-cache-memory-bytes)")
    if cold.pools.budget_gib <= 0:  # stopped before the profiling run, or weights too large
        raise ServefitError(
            f"its recorded launch does not reach the KV sizing here: {cold.error or 'no memory'}"
        )
    return round(cold.pools.budget_gib - logged_kv_gib, 6)


def ref(entry: Entry, differs: tuple[str, ...], request: PlanRequest) -> CalibrationRef:
    from servefit._plan.schema import CalibrationRef

    terms = []
    if request.measured_free_before_gib is not None:
        terms.append(f"free memory before the weights {request.measured_free_before_gib:g} GiB")
    if request.measured_weights_gib is not None:
        terms.append(f"weights {request.measured_weights_gib:g} GiB")
    if request.measured_nonkv_correction_gib is not None:
        terms.append(
            f"available KV memory {entry.measured.kv_available_gib:g} GiB "
            f"(non-KV memory {request.measured_nonkv_correction_gib:+.3f} GiB vs the model)"
        )
    src = entry.source + (f" (launch {entry.launch_index})" if entry.launch_index > 1 else "")
    return CalibrationRef(
        id=entry.id,
        source=src,
        recorded=entry.recorded,
        terms=terms,
        differs=list(differs),
    )
