"""plan(): inputs -> ModelSpec -> engine profile -> Plan.

The profile (engines/base.py:Profile) the registry selects for the request's engine release
does every engine-specific step: parallel layout, the checks before memory profiling,
resolve_args, memory_inputs, size_pools. An engine-side rejection (EngineRejection) anywhere
in them is a plan predicted to fail, never bad input.
"""

from __future__ import annotations

import math
from dataclasses import field, replace
from functools import lru_cache
from typing import Any

from servefit._plan import invariants
from servefit._plan.schema import (
    CalibrationRef,
    CpuNodeRef,
    HardwareRef,
    ModelRef,
    PerRank,
    Plan,
    Pools,
)
from servefit.engines.base import Measured, MemoryInputs, Profile, ResolvedArgs, Sizing
from servefit.engines.registry import select
from servefit.errors import ArgumentError, EngineRejection, HardwareError
from servefit.evolve import evolve
from servefit.frozen import frozen
from servefit.hardware.spec import GPUSet, GPUSpec
from servefit.model.cache import by_identity
from servefit.model.quant import unknown_method_warning
from servefit.model.spec import ModelSpec
from servefit.validate import MAX_GPUS, MAX_MIB, bounded_int, finite_float


@frozen
class PlanRequest:
    """Everything a plan depends on. `args` uses the engine's own dest names (tp_size, ...)."""

    model: str | ModelSpec
    gpu: str | GPUSpec
    engine: str = "sglang"
    args: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    num_gpus: int | None = None
    gpu_mem_mib: int | None = None
    free_gib: float | None = None  # free memory before weights, per GPU (overrides the model)
    measured_free_before_gib: float | None = (
        None  # calibrated: the log's "Load weight begin avail mem"
    )
    measured_weights_gib: float | None = (
        None  # calibrated: the log's "Load weight end ... mem usage"
    )
    # calibrated (vLLM): measured minus modelled non-KV memory (engines/base.py:Measured)
    measured_nonkv_correction_gib: float | None = None
    calibration: CalibrationRef | None = None  # where the measured figures came from
    warnings: tuple[str, ...] = ()
    # False: the plan without the display text its profile can skip (engines/base.py:SizePools;
    # SGLang: the sizing's log lines and the consumers, which its outcomes never read); every
    # figure, the verdict and the error are the same. fit's candidates and the fix search
    # compare the outcomes of thousands of plans and show none of them.
    text: bool = True


def resolve_model(ref: str | ModelSpec) -> ModelSpec:
    if isinstance(ref, ModelSpec):
        return ref
    from servefit.model.inventory import load_model

    return load_model(ref)


def resolve_gpu(ref: str | GPUSpec, gpu_mem_mib: int | None) -> tuple[GPUSpec, str]:
    source = "catalog"
    if isinstance(ref, GPUSpec):
        gpu = ref
    elif str(ref).lower() == "local":
        from servefit.hardware.nvml import gpu_spec_from_local, local_gpus

        found = local_gpus()
        if not found.devices:
            raise HardwareError(
                f"--gpu local: no GPU visible ({found.reason}); name one with --gpu, e.g. --gpu A6000"
            )
        gpu, source = gpu_spec_from_local(found.devices[0]), "nvml"
    elif str(ref).lower() == "cpu":  # the engine's CPU platform on this machine
        from servefit.hardware.cpu import local_cpu

        gpu, source = local_cpu(), "cpu"
    else:
        from servefit.hardware.catalog import get_gpu

        gpu = get_gpu(str(ref))
    if gpu_mem_mib is not None:
        gpu, source = gpu.with_memory(int(gpu_mem_mib)), "override"
    return gpu, source


def _cpu_node_ref(node: Any) -> CpuNodeRef | None:
    """The node memory a CPU-platform plan was sized from (cpu_platform.NodeMemory)."""
    if node is None:
        return None
    return CpuNodeRef(node=node.node, total_bytes=node.total, available_bytes=node.available)


def _check_request(request: PlanRequest) -> None:
    """The request's numbers at the API edge (the CLI's click types apply the same rules)."""
    if request.num_gpus is not None:
        bounded_int(request.num_gpus, "num_gpus", low=1, high=MAX_GPUS)
    if request.gpu_mem_mib is not None:
        bounded_int(request.gpu_mem_mib, "--gpu-mem-mib", low=1, high=MAX_MIB, error=HardwareError)
    for dest, value in request.args.items():
        # the engines' argparse reads float("nan") and float("inf"); no plan can use them
        if isinstance(value, float) and not math.isfinite(value):
            finite_float(value, "--" + dest.replace("_", "-"))  # raises, naming the flag


def plan(request: PlanRequest) -> Plan:
    """The plan of one launch; what the engine itself refuses is a plan that fails."""
    return _plan(request, rejections_fail=True)


def plan_or_reject(request: PlanRequest) -> Plan:
    """plan(), with what the engine refuses outright raised (EngineRejection) instead: explain
    and fit try values the user did not ask for, and report a refused value as refused."""
    return _plan(request, rejections_fail=False)


def _plan(request: PlanRequest, *, rejections_fail: bool) -> Plan:
    _check_request(request)
    profile, engine_ref = select(request.engine)
    model = resolve_model(request.model)
    gpu, gpu_source = resolve_gpu(request.gpu, request.gpu_mem_mib)
    args = dict(request.args)
    sizes = profile.parallel_sizes(args)
    num_gpus = request.num_gpus or sizes.world
    if num_gpus < sizes.world:
        raise ArgumentError(
            f"TP {sizes.tp} x PP {sizes.pp} x DP {sizes.dp} needs {sizes.world} GPUs, "
            f"only {num_gpus} given"
        )
    gpus = GPUSet(gpu=gpu, count=num_gpus, free_gib_override=request.free_gib, source=gpu_source)
    measured = Measured(
        free_gib=request.free_gib,
        free_before_gib=request.measured_free_before_gib,
        weights_gib=request.measured_weights_gib,
        nonkv_correction_gib=request.measured_nonkv_correction_gib,
    )
    measured.check()
    try:
        profile.check_model(model, sizes)  # the config first: model/readers.py
        resolved = profile.resolve_args(model, gpus, args, dict(request.env))
    except EngineRejection as exc:  # the engine stops before it loads anything
        if not rejections_fail:
            raise
        resolved = ResolvedArgs(
            values=args, error=str(exc), env=dict(request.env), log_lines=exc.logs
        )
        memory = MemoryInputs(
            total_gib=gpu.memory_mib / 1024, pre_load_free_gib=0.0, weights_gib=0.0
        )
    else:
        memory = profile.memory_inputs(model, gpus, resolved.values, measured)
    # An engine that stops while resolving its args never profiles memory: nothing to size.
    if resolved.error:
        sizing = _unsized(profile, memory, resolved)
    else:
        sizing = invariants.possible(
            _sized(profile, model, gpus, resolved, memory, rejections_fail, text=request.text),
            memory,
            gpu,
        )
    per_rank, pools = invariants.clamp(sizing.per_rank, sizing.pools)

    error = resolved.error or sizing.error
    warnings = list(request.warnings) + list(resolved.warnings) + list(sizing.warnings)
    warnings = _front_warnings(request, gpu_source, engine_ref.note) + warnings
    warnings += by_identity(model, ("warnings",), lambda: tuple(_model_warnings(model)))
    return Plan(
        engine=engine_ref,
        model=_model_ref(model),
        hardware=HardwareRef(
            gpu=gpu.name,
            num_gpus=num_gpus,
            memory_mib=gpu.memory_mib,
            tp_size=sizes.tp,
            pp_size=sizes.pp,
            dp_size=sizes.dp,
            ep_size=sizes.ep,
            source=gpu_source,
            cpu_node=_cpu_node_ref(resolved.values.get("_cpu_node")),
        ),
        verdict="fail" if error else "ok",
        error=error,
        error_consumer=None if resolved.error else sizing.error_consumer,
        error_detail=None if resolved.error else sizing.error_detail,
        calibrated=memory.calibrated,
        calibration=request.calibration if memory.calibrated else None,
        resolved_args=_public_args(profile, resolved.values),
        user_args=args,
        changes=list(resolved.changes),
        per_rank=per_rank,
        pools=pools,
        consumers=list(sizing.consumers),
        log_lines=list(resolved.log_lines) + list(sizing.log_lines),
        warnings=warnings,
    )


def _front_warnings(request: PlanRequest, gpu_source: str, note: str | None) -> list[str]:
    """What the plan says first: the nearest-profile note, a GPU name several cards go by."""
    out = [note] if note else []
    if gpu_source == "catalog" and isinstance(request.gpu, str):
        from servefit.hardware.catalog import ambiguity_warning

        ambiguous = ambiguity_warning(request.gpu)
        if ambiguous:
            out.append(ambiguous)
    return out


def _sized(
    profile: Profile,
    model: ModelSpec,
    gpus: GPUSet,
    resolved: ResolvedArgs,
    memory: MemoryInputs,
    rejections_fail: bool,
    *,
    text: bool,
) -> Sizing:
    """The engine's memory profiling; an engine-side rejection there is a failing start."""
    try:
        return profile.size_pools(model, gpus, resolved, memory, text=text)
    except EngineRejection as exc:
        if not rejections_fail:
            raise
        return replace(_unsized(profile, memory, resolved), error=str(exc))


_QUANT_NAME_TAGS = ("fp8", "fp4", "nvfp4", "awq", "gptq", "int4", "int8", "w4a16", "w8a8", "mxfp4")


def _model_warnings(model: ModelSpec) -> list[str]:
    """A checkpoint named as quantized whose config carries no quantization_config is sized as
    its dtype: say so, since the weights may then be overestimated by 2-4x. Then what the
    engines' config readers make of the config's doubtful fields (ModelSpec.notes)."""
    name = model.name.lower().replace("_", "-")
    tags = [t for t in _QUANT_NAME_TAGS if f"-{t}" in name]
    if tags and model.quant.method == "none":
        return [
            f"{model.name} is named {tags[0].upper()} but its config has no quantization_config: "
            f"weights are sized as {model.dtype}; pass the checkpoint's own config.json or directory"
        ] + model.notes
    unknown = unknown_method_warning(model.quant, model.dtype)
    return ([unknown] if unknown else []) + model.notes


def _unsized(profile: Profile, memory: MemoryInputs, resolved: ResolvedArgs) -> Sizing:
    """The Sizing of a launch that fails before memory profiling: weights only, empty pools."""
    page, context = profile.pool_shape(resolved.values)
    pools = Pools(
        budget_gib=0.0,
        kv_budget_gib=0.0,
        kv_bytes_per_token=0,
        max_total_num_tokens=0,
        page_size=page,
        context_len=context,
        effective_max_running_requests=0,
        cap_reason="start-up error before memory profiling",
        max_concurrency_at_context=0.0,
    )
    per_rank = PerRank(
        total_gib=memory.total_gib,
        pre_load_free_gib=memory.pre_load_free_gib,
        weights_gib=memory.weights_gib,
        draft_weights_gib=memory.draft_weights_gib,
        reserved_gib=0.0,
        free_gib=memory.pre_load_free_gib - memory.weights_gib,
    )
    return Sizing(pools=pools, per_rank=per_rank)


def _model_ref(model: ModelSpec) -> ModelRef:
    return by_identity(
        model,
        ("ref",),
        lambda: ModelRef(
            name=model.name,
            architecture=model.architecture,
            source=model.source,
            layers=model.kind_counts(),
            dtype=model.dtype,
            quantization=model.quant.method,
            params_billion=round(model.params.total / 1e9, 3),
        ),
    )


def _public_args(profile: Profile, values: dict[str, Any]) -> dict[str, Any]:
    """The resolved args a plan shows, sorted: not the profile's hidden ones, not "_" ones."""
    return {k: values[k] for k in _public_keys(profile.hidden_args, tuple(values))}


@lru_cache(maxsize=256)  # fit's candidates resolve the same ~60 keys thousands of times
def _public_keys(hidden: frozenset[str], keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(k for k in keys if k not in hidden and not k.startswith("_")))


def with_args(request: PlanRequest, **changes: Any) -> PlanRequest:
    """A copy of `request` with some engine args replaced (None removes the arg)."""
    args = dict(request.args)
    for k, v in changes.items():
        if v is None:
            args.pop(k, None)
        else:
            args[k] = v
    return evolve(request, args=args)
