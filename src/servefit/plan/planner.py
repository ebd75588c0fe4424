"""plan(): inputs -> ModelSpec -> engine profile (resolve_args -> size_pools) -> Plan."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from servefit.engines.base import MemoryInputs, Sizing
from servefit.errors import ArgumentError, HardwareError
from servefit.hardware.spec import GPUSet, GPUSpec
from servefit.model.spec import ModelSpec
from servefit.plan.schema import HardwareRef, ModelRef, PerRank, Plan, Pools


@dataclass(frozen=True)
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
    warnings: tuple[str, ...] = ()


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
    else:
        from servefit.hardware.catalog import get_gpu

        gpu = get_gpu(str(ref))
    if gpu_mem_mib is not None:
        if gpu_mem_mib <= 0:
            raise HardwareError(f"--gpu-mem-mib must be positive, got {gpu_mem_mib}")
        gpu, source = gpu.with_memory(int(gpu_mem_mib)), "override"
    return gpu, source


def plan(request: PlanRequest) -> Plan:
    from servefit.engines.registry import select

    profile, engine_ref = select(request.engine)
    model = resolve_model(request.model)
    gpu, gpu_source = resolve_gpu(request.gpu, request.gpu_mem_mib)
    args = dict(request.args)
    # Engines whose flags name parallelism differently (vLLM: --tensor-parallel-size, ...) say
    # how to read it; the SGLang path below is the default.
    engine_sizes = getattr(profile, "parallel_sizes", None)
    if engine_sizes is not None:
        tp, pp, dp, ep = engine_sizes(args)
        world = tp * pp * dp
    else:
        tp, pp, dp, ep = (
            int(1 if args.get(k) is None else args[k])
            for k in ("tp_size", "pp_size", "dp_size", "ep_size")
        )
        for name, val in (("tp-size", tp), ("pp-size", pp), ("dp-size", dp), ("ep-size", ep)):
            if val <= 0:
                raise ArgumentError(f"--{name} must be a positive integer, got {val}")
        _validate_args(args)
        world = tp * pp * (1 if args.get("enable_dp_attention") else dp)
    num_gpus = request.num_gpus or world
    if num_gpus < world:
        raise ArgumentError(
            f"TP {tp} x PP {pp} x DP {dp} needs {world} GPUs, only {num_gpus} given"
        )
    gpus = GPUSet(gpu=gpu, count=num_gpus, free_gib_override=request.free_gib, source=gpu_source)

    if engine_sizes is not None:
        profile.check_heads_divisible(model, tp)
    else:
        from servefit.engines.sglang.common import check_heads_divisible

        attn_tp = tp // dp if args.get("enable_dp_attention") else tp
        check_heads_divisible(model, attn_tp)
    resolved = profile.resolve_args(model, gpus, args, dict(request.env))
    engine_memory = getattr(profile, "memory_inputs", None)  # vLLM: CUDA total, init snapshot
    if engine_memory is not None:
        memory = engine_memory(model, gpus, resolved.values, request)
    else:
        memory = memory_inputs(model, gpus, resolved.values, request)
    # An engine that stops while resolving its args never profiles memory: nothing to size.
    sizing = (
        _unsized(memory, resolved)
        if resolved.error
        else profile.size_pools(model, gpus, resolved, memory)
    )

    error = resolved.error or sizing.error
    warnings = list(request.warnings) + list(resolved.warnings) + list(sizing.warnings)
    if engine_ref.note:
        warnings.insert(0, engine_ref.note)
    warnings += _model_warnings(model)
    return Plan(
        engine=engine_ref,
        model=_model_ref(model),
        hardware=HardwareRef(
            gpu=gpu.name,
            num_gpus=num_gpus,
            memory_mib=gpu.memory_mib,
            tp_size=tp,
            pp_size=pp,
            dp_size=dp,
            ep_size=ep,
            source=gpu_source,
        ),
        verdict="fail" if error else "ok",
        error=error,
        error_consumer=None if resolved.error else sizing.error_consumer,
        error_detail=None if resolved.error else sizing.error_detail,
        calibrated=memory.calibrated,
        resolved_args=_public_args(resolved.values),
        user_args=args,
        changes=list(resolved.changes),
        per_rank=sizing.per_rank,
        pools=sizing.pools,
        consumers=list(sizing.consumers),
        log_lines=list(resolved.log_lines) + list(sizing.log_lines),
        warnings=warnings,
    )


_QUANT_NAME_TAGS = ("fp8", "fp4", "nvfp4", "awq", "gptq", "int4", "int8", "w4a16", "w8a8", "mxfp4")


def _model_warnings(model: ModelSpec) -> list[str]:
    """A checkpoint named as quantized whose config carries no quantization_config is sized as
    its dtype: say so, since the weights may then be overestimated by 2-4x."""
    name = model.name.lower().replace("_", "-")
    tags = [t for t in _QUANT_NAME_TAGS if f"-{t}" in name]
    if tags and model.quant.method == "none":
        return [
            f"{model.name} is named {tags[0].upper()} but its config has no quantization_config: "
            f"weights are sized as {model.dtype}; pass the checkpoint's own config.json or directory"
        ]
    return []


def _unsized(memory: MemoryInputs, resolved) -> Sizing:
    """The Sizing of a launch that fails before memory profiling: weights only, empty pools."""
    v = resolved.values
    pools = Pools(
        budget_gib=0.0,
        kv_budget_gib=0.0,
        kv_bytes_per_token=0,
        max_total_num_tokens=0,
        page_size=int(v.get("page_size") or v.get("block_size") or 1),
        context_len=int(v.get("context_len") or v.get("max_model_len") or 0),
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


def memory_inputs(
    model: ModelSpec, gpus: GPUSet, v: dict[str, Any], request: PlanRequest
) -> MemoryInputs:
    """Pre-load free memory and weights per rank: measured (calibrated) or modelled."""
    tp, pp = int(v.get("tp_size") or 1), int(v.get("pp_size") or 1)
    ep = int(v.get("ep_size") or 1)
    w = _weights(model, tp, pp, ep)
    spec = v.get("speculative_algorithm") in ("EAGLE", "EAGLE3", "STANDALONE")
    draft = w.draft_gib if spec and not v.get("speculative_draft_model_path") else 0.0
    total = gpus.gpu.memory_mib / 1024
    if request.measured_free_before_gib is not None:
        pre = request.measured_free_before_gib
    elif gpus.free_gib_override is not None:
        pre = gpus.free_gib_override
    else:
        from servefit.hardware.preload import pre_load_free_gib

        pre = pre_load_free_gib(gpus.gpu, world_size=tp * pp, tp=tp, engine="sglang")
    weights = (
        request.measured_weights_gib if request.measured_weights_gib is not None else w.target_gib
    )
    for name, val in (
        ("--measured-free-before-gib", request.measured_free_before_gib),
        ("--free-gib", request.free_gib),
        ("--measured-weights-gib", request.measured_weights_gib),
    ):
        if val is not None and val <= 0:
            raise HardwareError(f"{name} must be positive, got {val}")
    if pre > total + 1e-6:
        raise HardwareError(
            f"free memory before weights ({pre:.2f} GiB) exceeds the GPU's {total:.2f} GiB"
        )
    calibrated = (
        request.measured_free_before_gib is not None and request.measured_weights_gib is not None
    )
    return MemoryInputs(
        total_gib=total,
        pre_load_free_gib=pre,
        weights_gib=weights,
        draft_weights_gib=draft,
        calibrated=calibrated,
    )


# (dest, flag, lowest allowed, highest allowed): values the engine would accept but that make no
# physical sense, or that it would reject later with a traceback.
_RANGES = (
    ("mem_fraction_static", "--mem-fraction-static", 1e-9, 1.0),
    ("max_running_requests", "--max-running-requests", 1, None),
    ("max_total_tokens", "--max-total-tokens", 1, None),
    ("context_length", "--context-length", 1, None),
    ("page_size", "--page-size", 1, None),
    ("max_mamba_cache_size", "--max-mamba-cache-size", 1, None),
    ("mamba_full_memory_ratio", "--mamba-full-memory-ratio", 1e-9, None),
    ("speculative_num_steps", "--speculative-num-steps", 1, None),
    ("speculative_eagle_topk", "--speculative-eagle-topk", 1, None),
    ("speculative_num_draft_tokens", "--speculative-num-draft-tokens", 1, None),
    ("cuda_graph_max_bs", "--cuda-graph-max-bs", 1, None),
    ("max_prefill_tokens", "--max-prefill-tokens", 1, None),
)


def _validate_args(args: dict[str, Any]) -> None:
    for dest, flag, lo, hi in _RANGES:
        val = args.get(dest)
        if val is None or isinstance(val, bool) or not isinstance(val, (int, float)):
            continue
        if val != val or val < lo or (hi is not None and val > hi):
            bound = f"in (0, {hi}]" if hi is not None else f">= {lo}" if lo >= 1 else "> 0"
            raise ArgumentError(f"{flag} must be {bound}, got {val}")
    cps = args.get("chunked_prefill_size")
    if isinstance(cps, int) and not isinstance(cps, bool) and cps == 0:
        raise ArgumentError(
            "--chunked-prefill-size must be positive, or -1 to disable chunked prefill"
        )


@lru_cache(maxsize=256)
def _weights_by_value(model: ModelSpec, tp: int, pp: int, ep: int):
    from servefit.model.weights import weights_per_rank

    return weights_per_rank(model, tp=tp, pp=pp, ep=ep, include_mtp=True)


# explain and fit re-plan one ModelSpec object thousands of times: look it up by identity first
# (hashing a ModelSpec walks every layer), keeping the object so its id cannot be reused.
_BY_ID: dict[tuple, tuple[ModelSpec, Any]] = {}


def _by_identity(model: ModelSpec, key: tuple, make):
    hit = _BY_ID.get((id(model), *key))
    if hit is not None and hit[0] is model:
        return hit[1]
    if len(_BY_ID) > 512:
        _BY_ID.clear()
    value = make()
    _BY_ID[(id(model), *key)] = (model, value)
    return value


def _weights(model: ModelSpec, tp: int, pp: int, ep: int):
    """weights_per_rank is a pure function of these; fit re-plans the same model many times."""
    return _by_identity(model, ("w", tp, pp, ep), lambda: _weights_by_value(model, tp, pp, ep))


def _model_ref(model: ModelSpec) -> ModelRef:
    return _by_identity(
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


_HIDDEN = {"cuda_graph_bs"}


def _public_args(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sorted(values.items()) if k not in _HIDDEN and not k.startswith("_")}


def with_args(request: PlanRequest, **changes: Any) -> PlanRequest:
    """A copy of `request` with some engine args replaced (None removes the arg)."""
    args = dict(request.args)
    for k, v in changes.items():
        if v is None:
            args.pop(k, None)
        else:
            args[k] = v
    return replace(request, args=args)
