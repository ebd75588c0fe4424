"""Available KV memory, blocks, concurrency, start-up errors and log lines, for both mirrored
vLLM releases; what differs between them comes from the version's `PlanningRules`.

Mirrors (the same in every release unless its rules say otherwise):
  vllm/v1/worker/utils.py:request_memory: requested = ceil(total x gpu_memory_utilization), and
      the start-up error when the free memory is below it
  vllm/v1/worker/gpu_worker.py:Worker.determine_available_memory: available = requested -
      non-KV memory - the CUDA-graph estimate (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default
      1); the non-KV memory is measured by the engine and modelled by servefit
      (servefit/engines/vllm/profiling.py); --kv-cache-memory-bytes skips all of it
  vllm/v1/core/kv_cache_utils.py (0.24.0) / kv_cache_planning.py (0.33.0):
      get_kv_cache_configs (checks, then num_blocks = available // bytes_per_block),
      _check_enough_kv_cache_memory, _estimate_max_model_len_from_groups,
      _auto_fit_max_model_len; kv_cache_utils.py:get_max_concurrency_for_kv_cache_config and
      get_kv_cache_capacity (tokens = int(concurrency x max_model_len))
  vllm/config/compilation.py:resolve_cudagraph_mode_and_sizes (Mamba blocks vs max_num_seqs,
      raised when the KV cache is initialized, after the capacity lines are logged)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servefit._plan.schema import Consumer, PerRank, Pools
from servefit.engines.base import MemoryInputs, ResolvedArgs, Sizing
from servefit.engines.vllm import common, cpu_platform, profiling
from servefit.engines.vllm.common import cdiv, format_gib
from servefit.engines.vllm.device import is_cpu
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.units import GiB

if TYPE_CHECKING:
    pass


# One release's rules object (v0_10_0/rules.py:Rules or a subclass): every hook asked here is
# defined there.
PlanningRules = Any


def blocks_per_request(v: dict[str, Any], layout: Any, max_len: int, rules: Any) -> int:
    """Blocks one request at `max_len` takes from the shared pool, summed over groups
    (get_max_concurrency_for_kv_cache_config): FullAttentionSpec cdiv(len, block) per attention
    group; MambaSpec.max_memory_usage_bytes / page per Mamba group (the release's count; "all"
    mode grows with the length)."""
    g = layout.grouping
    attn = g.attention_groups * cdiv(max_len, layout.block_size)
    attn += sum(b.groups * window_blocks(v, layout, b.window, max_len) for b in g.sliding)
    if not g.mamba_groups:
        return attn
    return attn + g.mamba_groups * mamba_blocks(v, layout, max_len, rules)


def window_blocks(v: dict[str, Any], layout: Any, window: int, max_len: int) -> int:
    """One sliding-window group's blocks per request (common.sliding_blocks); the window's
    block is the attention block (attention.py:Attention.get_kv_cache_spec,
    _largest_kernel_block_within, 0.25.0 on: the backends' MultipleOf(16) / MultipleOf(32) sizes
    hold the primary block)."""
    return common.sliding_blocks(window, v["_sliding_in_flight"], max_len, layout.block_size)


def mamba_blocks(v: dict[str, Any], layout: Any, max_len: int, rules: Any) -> int:
    """MambaSpec.max_memory_usage_bytes / page of one Mamba group at `max_len`."""
    if v["mamba_cache_mode"] == "all":
        k = v["num_speculative_tokens"] if rules.MAMBA_ALL_COUNTS_SPEC else 0
        return cdiv(max_len, layout.mamba_block_size) + k
    return layout.mamba_blocks_per_request


def one_request_bytes(
    model: ModelSpec, v: dict[str, Any], layout: Any, rules: Any
) -> Callable[[int], int]:
    """The need the release's one-request check compares with the available memory, as a
    function of the length (rules.ONE_REQUEST_NEED):
    "groups": bytes_per_block x the blocks summed over groups (_max_memory_usage_bytes_from_
    groups, 0.19.0 on); "first_group": bytes_per_block x the first group's blocks (0.14.0 -
    0.18.1: `any_spec = kv_cache_groups[0]`, whose spec is the first layer's); "layers": the
    sum of every layer's own max_memory_usage_bytes (kv_cache_utils.py:max_memory_usage_bytes,
    up to 0.13.0: padding layers not counted)."""
    bpb = layout.bytes_per_block
    g = layout.grouping
    if rules.ONE_REQUEST_NEED == "groups" or g.num_groups <= 1:
        return lambda n: bpb * blocks_per_request(v, layout, n, rules)
    if rules.ONE_REQUEST_NEED == "first_group":  # the first group holds layer 0's spec
        first = _first_window(model, g)
        if first:
            return lambda n: bpb * window_blocks(v, layout, first, n)
        if common.attention_registered_first(model):
            return lambda n: bpb * cdiv(n, layout.block_size)
        return lambda n: bpb * mamba_blocks(v, layout, n, rules)
    page = layout.page_bytes
    return lambda n: (
        page
        * (
            g.attention_layers * cdiv(n, layout.block_size)
            + sum(b.layers * window_blocks(v, layout, b.window, n) for b in g.sliding)
            + g.mamba_layers * (mamba_blocks(v, layout, n, rules) if g.mamba_layers else 0)
        )
    )


def _first_window(model: ModelSpec, g: Any) -> int | None:
    """The window of layer 0 when it is a sliding-window layer with its own groups."""
    if not g.sliding:
        return None
    for window, ids in common.sliding_buckets(model):
        if ids and ids[0] == 0:
            return window
    return None


@dataclass
class _Run:
    """What `size` works out for one worker, in the engine's order; _sizing reads it."""

    nonkv: profiling.NonKV
    cg_on: bool  # the CUDA-graph memory estimate is subtracted
    requested: int  # bytes: gpu_memory_utilization x total
    logs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    available: int = 0  # bytes for the KV cache
    num_blocks: int = 0
    per_req: int = 0  # blocks one max_model_len request needs
    concurrency: float = 0.0
    tokens: int = 0
    error: str | None = None
    consumer: str | None = None
    detail: str | None = None


def size(
    model: ModelSpec,
    gpus: GPUSet,
    resolved: ResolvedArgs,
    memory: MemoryInputs,
    rules: PlanningRules,
) -> Sizing:
    v = resolved.values
    layout = v["_layout"]
    util = v["gpu_memory_utilization"]
    total_b = memory.total_gib * GiB
    free_b = memory.pre_load_free_gib * GiB
    cpu = is_cpu(gpus.gpu)

    nonkv, notes = profiling.estimate(
        model,
        weights_gib=memory.weights_gib + memory.draft_weights_gib,
        tp=v["tensor_parallel_size"],
        max_num_batched_tokens=v["max_num_batched_tokens"],
        max_num_seqs=v["max_num_seqs"],
        encoder_profiled=v["_encoder_profiled"],
        sampler_rank=True,
        graphs_per_mode=v["_graphs"],
        correction_gib=memory.nonkv_correction_gib,
    )
    run = _Run(
        nonkv,
        cg_on=v["_estimate_cudagraphs"] and bool(v["_graphs"]),
        requested=rules.requested_memory(total_b, util),
        warnings=list(notes),
    )
    if not cpu and free_b < run.requested:
        run.error = rules.free_memory_error(free_b, total_b, util, run.requested)
        run.consumer = "memory in use before vLLM starts"
        run.detail = (
            f"{memory.pre_load_free_gib:.2f} GiB free at start-up < {util} x "
            f"{memory.total_gib:.2f} GiB requested"
        )
    else:
        _kv_memory(run, model, gpus, v, memory, cpu, rules)
    mml = v["max_model_len"]  # after the auto-fit
    run.per_req = blocks_per_request(v, layout, mml, rules)
    if run.error is None:
        _capacity(run, model, v, layout, rules)
    if run.error:
        run.logs.append(run.error)
    return _sizing(model, v, memory, layout, run)


def _kv_memory(
    run: _Run,
    model: ModelSpec,
    gpus: GPUSet,
    v: dict[str, Any],
    memory: MemoryInputs,
    cpu: bool,
    rules: PlanningRules,
) -> None:
    """The KV memory after the weights load and the profile run, and the checks on it
    (kv_cache_utils.py:get_kv_cache_configs / _check_enough_kv_cache_memory)."""
    layout, logs = v["_layout"], run.logs
    bpb = layout.bytes_per_block
    mml = v["max_model_len"]
    needed = one_request_bytes(model, v, layout, rules)
    if not _load(run, model, gpus, v, memory, rules, _block_lines(layout)):
        return
    layout_line = rules.kv_layout_log(model, gpus)  # the engine core, before the workers profile
    if layout_line:
        logs.append(layout_line)
    if cpu:
        refused = _cpu_kv_refusal(v, memory)
        if refused is not None:
            run.error, run.consumer, run.detail = refused
            return
    available, budget_logs = _available(v, memory, run.nonkv, run.cg_on, run.requested, cpu, rules)
    logs += budget_logs
    if v.get("_hma_warning"):  # get_kv_cache_groups, after the memory is known
        logs.append(v["_hma_warning"])
    logs += list(layout.grouping.padding_logs)
    draft_line = rules.draft_group_log(model, v)
    if draft_line:
        logs.append(draft_line)
    if v.get("num_gpu_blocks_override") is not None:
        logs.append(
            f"Overriding num_gpu_blocks={max(available, 0) // bpb} with "
            f"num_gpu_blocks_override={v['num_gpu_blocks_override']}"
        )
        available = v["num_gpu_blocks_override"] * bpb
    run.available = available
    check = available - bpb if rules.NULL_BLOCK_IN_CHECK else available
    error = consumer = detail = None
    if v["_auto_fit_max_model_len"]:  # runs before the checks (get_kv_cache_configs)
        fit = common.estimate_max_model_len(needed, check, mml)
        if fit <= 0:
            error = (
                "ValueError: Cannot auto-fit max_model_len: not enough GPU memory available "
                "to serve even a single token. Try increasing `gpu_memory_utilization`."
            )
        elif fit < mml:
            logs.append(
                f"Auto-fit max_model_len: reduced from {mml} to {fit} to fit in "
                f"available GPU memory ({format_gib(available)} GiB available for KV cache)"
            )
            mml = v["max_model_len"] = fit
        else:
            logs.append(
                f"Auto-fit max_model_len: full model context length {mml} fits in "
                "available GPU memory"
            )
    if error is None and check <= 0:
        error = rules.no_memory_error()
    elif error is None and needed(mml) > check:
        est = common.estimate_max_model_len(needed, check, mml)
        error = rules.max_seq_len_error(mml, needed(mml), check, est)
        consumer = "KV cache of one request at max_model_len"
        detail = (
            f"{needed(mml) / GiB:.2f} GiB for one {mml:,}-token request > "
            f"{check / GiB:.2f} GiB available; longest that fits: {est:,} tokens"
        )
    if error == rules.no_memory_error() or (error and consumer is None and "auto-fit" in error):
        consumer, detail = _largest_consumer(run.nonkv, run.cg_on, run.requested)
    run.error, run.consumer, run.detail = error, consumer, detail


def _capacity(
    run: _Run, model: ModelSpec, v: dict[str, Any], layout: Any, rules: PlanningRules
) -> None:
    """Blocks, concurrency and token capacity of a start that fits, the lines the engine logs
    about them, and the Mamba max_num_seqs check."""
    mml = v["max_model_len"]
    num_blocks = run.available // layout.bytes_per_block
    if v.get("num_gpu_blocks_override") is not None:
        num_blocks = v["num_gpu_blocks_override"]
    run.num_blocks = num_blocks
    run.concurrency = num_blocks / run.per_req
    run.tokens = rules.capacity_tokens(
        num_blocks, layout.grouping.num_groups, _min_block(v, layout), run.concurrency, mml
    )
    workers = v["tensor_parallel_size"] * v["pipeline_parallel_size"]
    run.logs += rules.capacity_logs(run.tokens, mml, run.concurrency, v["_device"], workers)
    run.logs += rules.group_block_logs(_group_block_sizes(model, v, layout))
    run.error, run.consumer, run.detail, seq_logs = _mamba_seqs_check(
        model, v, num_blocks, layout.bytes_per_block, rules
    )
    run.logs += seq_logs
    if run.error is None and v.get("_cpu_attn_error"):
        # vllm/v1/attention/backends/cpu_attn.py:_get_attn_isa, when the attention builders are made for the sized cache
        run.error = v["_cpu_attn_error"]


def _block_lines(layout: Any) -> list[str]:
    """The hybrid alignment's two log lines (HybridAttentionMambaModelConfig up to 0.19.1,
    Platform._align_hybrid_block_size from 0.20.0)."""
    lines = [layout.block_log] if layout.block_log else []
    if layout.padding_pct is not None:
        lines.append(
            f"Padding mamba page size by {layout.padding_pct:.2f}% to ensure that mamba page "
            "size and attention page size are exactly equal."
        )
    return lines


def _group_block_sizes(model: ModelSpec, v: dict[str, Any], layout: Any) -> list[int]:
    """Each KV cache group's block size, in the engine's group order (the buckets follow the
    order the layers register: a model whose first layer is a Mamba layer lists its Mamba
    groups first; common.attention_registered_first)."""
    g = layout.grouping
    attn = [layout.block_size] * (g.attention_groups + sum(b.groups for b in g.sliding))
    mamba = [layout.mamba_block_size or layout.block_size] * g.mamba_groups
    first_attn = common.attention_registered_first(model)
    return mamba + attn if g.mamba_groups and not first_attn else attn + mamba


def _min_block(v: dict[str, Any], layout: Any) -> int:
    """The smallest block size over the KV cache groups (the old capacity figure's unit): the
    Mamba groups' block is max_model_len without prefix caching, the attention block with it."""
    if layout.grouping.mamba_groups and layout.mamba_block_size:
        return min(layout.block_size, layout.mamba_block_size)
    return layout.block_size


def _available(
    v: dict[str, Any],
    memory: MemoryInputs,
    nonkv: profiling.NonKV,
    cg_on: bool,
    requested: float,
    cpu: bool,
    rules: Any,
) -> tuple[int, list[str]]:
    """The KV memory of one worker and the lines the worker logs about it
    (gpu_worker.py:Worker.determine_available_memory; cpu_worker.py:CPUWorker's)."""
    fixed = v.get("kv_cache_memory_bytes")
    if cpu:  # set on the CPU platform: cpu_platform.apply refuses a start without it
        cpu_kv = int(v["kv_cache_memory_bytes"])
        return cpu_kv, [cpu_platform.explicit_kv_log(cpu_kv, v["_cpu_node"])]
    if fixed:
        line = rules.kv_bytes_log(memory.pre_load_free_gib * GiB, int(fixed))
        return int(fixed), [line] if line else []
    logs: list[str] = []
    if v["_v1_runner"] and v["_profiles_cudagraphs"]:
        logs += _graph_logs(v, nonkv)
    available = int(requested - nonkv.total(cg_on) * GiB)
    logs.append(rules.available_memory_log(available))
    if cg_on and nonkv.cudagraph > 0:
        util = v["gpu_memory_utilization"]
        delta = nonkv.cudagraph / memory.total_gib
        logs.append(
            "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
            f"--gpu-memory-utilization={util:.4f} is equivalent to "
            f"--gpu-memory-utilization={round(util - delta, 4):.4f} without CUDA graph "
            "memory profiling. To maintain the same effective KV cache size as before, "
            f"increase --gpu-memory-utilization to {min(round(util + delta, 4), 1.0):.4f}. "
            "To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
        )
    return available, logs


def _load(
    run: _Run,
    model: ModelSpec,
    gpus: GPUSet,
    v: dict[str, Any],
    memory: MemoryInputs,
    rules: PlanningRules,
    block_lines: list[str],
) -> bool:
    """The model built and its weights loaded (gpu_model_runner.py / cpu_model_runner.py:
    load_model), with the lines logged on the way; False where the CPU build stops there: the
    causal-conv weight packing after load, the warm-up forward before the KV cache is sized."""
    logs, cpu = run.logs, is_cpu(gpus.gpu)
    if not rules.BLOCK_LINES_AFTER_LOAD:  # config time, before the weights load
        logs += block_lines
    backend_line = rules.attn_backend_log(model, gpus)  # the model's attention layers are built
    if backend_line:
        logs.append(backend_line)
    packed = rules.cpu_conv_pack_error(model, gpus, v) if cpu else None
    if packed is not None:  # the weights' post-load processing
        run.error, run.consumer = packed, "the CPU kernel's causal-conv weight packing"
        run.detail = "the model's convolution weights, packed once they are loaded"
        return False
    # gpu_model_runner.py:load_model, then (0.20.0 on) update_block_size_for_backend
    logs.append(rules.model_loading_log((memory.weights_gib + memory.draft_weights_gib) * GiB))
    if rules.BLOCK_LINES_AFTER_LOAD:
        logs += block_lines
    stopped = rules.cpu_warmup_error(model, gpus, v) if cpu else None
    if stopped is not None:  # cpu_worker.py:determine_available_memory's warm-up forward
        run.error, run.consumer = stopped, "the CPU warm-up forward (fused MoE's torch path)"
        run.detail = "CPUWorker.determine_available_memory runs the model before sizing"
        return False
    return True


def _cpu_kv_refusal(v: dict[str, Any], memory: MemoryInputs) -> tuple[str, str, str] | None:
    """cpu_worker.py:CPUWorker.determine_available_memory refuses an explicit KV size above the
    node's available memory, which it reads once the engine's processes are up and this worker
    loaded its weights: servefit takes the node's available memory now, less the weights and
    the engine's measured resident memory (cpu_platform.ENGINE_RESIDENT_BYTES). A node whose
    available memory is unknown (a device known by its total) is checked against the total."""
    kv = int(v["kv_cache_memory_bytes"])
    node = v["_cpu_node"]
    weights = (memory.weights_gib + memory.draft_weights_gib) * GiB
    before = node.available if node.available is not None else node.total
    after_load = max(0.0, min(before, node.total) - weights - cpu_platform.ENGINE_RESIDENT_BYTES)
    if node.available_after_load is not None:  # the worker's own measurement
        after_load = node.available_after_load
    if kv <= after_load:
        return None
    return (
        cpu_platform.explicit_kv_error(kv, after_load, node),
        "KV cache memory (--kv-cache-memory-bytes / VLLM_CPU_KVCACHE_SPACE)",
        f"{kv / GiB:.2f} GiB asked > {after_load / GiB:.2f} GiB available on node {node.node} "
        f"once the weights and vLLM's processes are in ({node.total / GiB:.2f} GiB node; "
        f"{cpu_platform.ENGINE_RESIDENT_BYTES / GiB:.2f} GiB for the processes, measured)",
    )


def _mamba_seqs_check(
    model: ModelSpec, v: dict[str, Any], num_blocks: int, bpb: int, rules: Any
) -> tuple[str | None, str | None, str | None, list[str]]:
    """FULL decode CUDA graphs with more sequences than Mamba blocks (rules.MAMBA_SEQS_CHECK):
    0.18.x - 0.19.x cap the capture sizes with a warning
    (compilation.py:adjust_cudagraph_sizes_for_mamba_cache); 0.20.0 on raise
    (resolve_cudagraph_mode_and_sizes), after the capacity lines are logged."""
    full = v["cudagraph_mode"] in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL")
    check = rules.MAMBA_SEQS_CHECK
    if not (model.is_hybrid and full and check):
        return None, None, None, []
    if check == "cap":
        sizes = common.capture_sizes(v, 512)
        if not sizes or num_blocks >= sizes[-1]:
            return None, None, None, []
        capped = [s for s in sizes if s <= num_blocks]
        if not capped:
            return (
                None,
                None,
                None,
                [
                    f"No valid cudagraph capture sizes remain after capping to Mamba cache blocks "
                    f"({num_blocks}). The smallest capture size was {sizes[0]}. Disabling cudagraph "
                    "capture. Consider reducing max_num_seqs or increasing available GPU memory."
                ],
            )
        return (
            None,
            None,
            None,
            [
                f"Capping cudagraph capture sizes from max {sizes[-1]} to {capped[-1]} to fit Mamba "
                f"cache blocks ({num_blocks} blocks available). This limits the maximum batch size "
                "that can use CUDA graphs. To increase this limit, reduce max_num_seqs or increase "
                "available GPU memory."
            ],
        )
    if v["max_num_seqs"] <= num_blocks:
        return None, None, None, []
    return (
        common.mamba_blocks_error(v["max_num_seqs"], num_blocks),
        "max_num_seqs above the Mamba cache blocks",
        f"FULL decode CUDA graphs need one Mamba block per sequence: max_num_seqs "
        f"{v['max_num_seqs']} > {num_blocks} blocks of {bpb / (1 << 20):.1f} MiB",
        [],
    )


def _graph_logs(v: dict[str, Any], nonkv: profiling.NonKV) -> list[str]:
    """gpu_model_runner.py:profile_cudagraph_memory (V1 runner, used for hybrids in 0.24.0)."""
    graphs = v["_graphs"]
    if not graphs:
        return []
    parts = []
    if graphs.get("PIECEWISE"):
        parts.append(f"PIECEWISE={graphs['PIECEWISE']} (largest={v['_piecewise_largest']})")
    if graphs.get("FULL"):
        parts.append(f"FULL={graphs['FULL']} (largest={v['_full_largest']})")
    return [
        f"Profiling CUDA graph memory: {', '.join(parts)}",
        f"Estimated CUDA graph memory: {nonkv.cudagraph:.2f} GiB total",
    ]


def _largest_consumer(nonkv: profiling.NonKV, cg_on: bool, requested: int) -> tuple[str, str]:
    parts = {
        "weights": nonkv.weights,
        f"activation peak ({nonkv.activation_phase} phase of the profiling run)": nonkv.activation,
        "CUDA-graph memory estimate": nonkv.cudagraph if cg_on else 0.0,
    }
    name = max(parts, key=lambda k: parts[k])
    return name, (
        f"{name} takes {parts[name]:.2f} GiB of the {requested / GiB:.2f} GiB budget "
        f"(non-KV total {nonkv.total(cg_on):.2f} GiB)"
    )


def _sizing(
    model: ModelSpec, v: dict[str, Any], memory: MemoryInputs, layout: Any, run: _Run
) -> Sizing:
    """The `Sizing` of what `size` worked out: pools, per-rank memory, consumers, verdict."""
    nonkv, cg_on, error = run.nonkv, run.cg_on, run.error
    num_blocks, per_req = run.num_blocks, run.per_req
    g = layout.grouping
    bpb = layout.bytes_per_block
    pool = num_blocks * bpb
    attn_share = (
        (
            g.attention_groups * cdiv(v["max_model_len"], layout.block_size)
            + sum(
                b.groups * window_blocks(v, layout, b.window, v["max_model_len"]) for b in g.sliding
            )
        )
        / per_req
        if per_req
        else 1.0
    )
    mamba_share = 1.0 - attn_share if g.mamba_groups else 0.0
    loaded = memory.weights_gib + memory.draft_weights_gib
    free_after = (
        memory.pre_load_free_gib
        - loaded
        - pool / GiB
        - nonkv.non_torch
        - (nonkv.cudagraph if v["_graphs"] else 0.0)
    )
    per_rank = PerRank(
        total_gib=memory.total_gib,
        pre_load_free_gib=memory.pre_load_free_gib,
        weights_gib=memory.weights_gib,
        draft_weights_gib=memory.draft_weights_gib,
        kv_cache_gib=pool * (1 - mamba_share) / GiB,
        mamba_state_gib=pool * mamba_share / GiB,
        reserved_gib=nonkv.activation
        + nonkv.non_torch
        + (nonkv.cudagraph if cg_on else 0.0)
        + nonkv.correction,
        free_gib=free_after,
        non_torch_gib=nonkv.non_torch,
        graphs_gib=nonkv.cudagraph if v["_graphs"] else 0.0,
        activation_gib=nonkv.activation,
    )
    pools = _pools(model, v, layout, run)
    consumers = _consumers(layout, nonkv, cg_on, loaded, num_blocks)
    return Sizing(
        pools=pools,
        per_rank=per_rank,
        error=error,
        error_consumer=run.consumer if error else None,
        error_detail=run.detail if error else None,
        consumers=tuple(sorted(consumers, key=lambda c: -c.gib)),
        log_lines=tuple(run.logs),
        warnings=tuple(run.warnings),
        extra={
            "requested_gib": run.requested / GiB,
            "bytes_per_block": bpb,
            "blocks_per_request": per_req,
            "non_kv_gib": nonkv.total(cg_on),
            "activation_phase": nonkv.activation_phase,
        },
    )


def _pools(model: ModelSpec, v: dict[str, Any], layout: Any, run: _Run) -> Pools:
    """The pools of the plan: KV blocks, Mamba state per request and how it is counted."""
    g = layout.grouping
    num_blocks, error, concurrency = run.num_blocks, run.error, run.concurrency
    available, tokens = run.available, run.tokens
    mamba_layers = len(model.recurrent_layer_ids)
    k = v["num_speculative_tokens"]
    sizing = None
    if g.mamba_groups:
        per = layout.mamba_blocks_per_request
        sizing = {
            "none": f"mode none: 1 + {k} speculative block(s) per Mamba group per request",
            "align": f"mode align (prefix caching): 2 + {k} speculative block(s) per Mamba group",
            "all": f"mode all (prefix caching): a state every {layout.mamba_block_size} tokens",
        }[v["mamba_cache_mode"]]
        sizing += (
            f"; {g.mamba_groups} Mamba group(s) x {per}, {g.attention_groups} attention group(s)"
        )
    return Pools(
        budget_gib=available / GiB,
        kv_budget_gib=available / GiB,
        # full-attention layers only: a sliding-window layer's KV stops growing at its window
        kv_bytes_per_token=g.attention_groups * g.group_size * layout.attn_page_1_token,
        max_total_num_tokens=tokens,
        page_size=layout.block_size,
        context_len=v["max_model_len"],
        mamba_state_bytes_per_request=mamba_layers * layout.mamba_page_bytes,
        conv_state_bytes_per_request=mamba_layers * layout.conv_bytes,
        ssm_state_bytes_per_request=mamba_layers * layout.ssm_bytes,
        mamba_layers=mamba_layers,
        mamba_slots_per_request=layout.mamba_blocks_per_request if g.mamba_groups else None,
        mamba_sizing=sizing,
        spec_state_slots=k if (k and g.mamba_groups) else None,
        effective_max_running_requests=v["max_num_seqs"] if error is None else 0,
        cap_reason="max_num_seqs (vLLM's scheduler cap; requests beyond the KV pool wait)",
        max_concurrency_at_context=round(concurrency, 2),
        block_size=layout.block_size,
        num_blocks=num_blocks if error is None or num_blocks else None,
        mamba_blocks=num_blocks if (g.mamba_groups and num_blocks) else None,
        max_concurrency=concurrency if num_blocks else None,
    )


def _consumers(
    layout: Any, nonkv: profiling.NonKV, cg_on: bool, loaded: float, num_blocks: int
) -> list[Consumer]:
    """What takes the worker's memory, each with the flags that move it."""
    g, bpb = layout.grouping, layout.bytes_per_block
    pool = num_blocks * bpb
    calibration = (
        [
            Consumer(
                name="calibration correction",
                gib=nonkv.correction,
                formula="a real start's non-KV memory minus the model's at its flags",
            )
        ]
        if nonkv.correction
        else []
    )
    return calibration + [
        Consumer(name="weights", gib=loaded, formula="Model loading took (target + MTP layers)"),
        Consumer(
            name=f"activation peak ({nonkv.activation_phase})",
            gib=nonkv.activation,
            formula=(
                f"max(sampler {nonkv.sampler:.2f}, forward {nonkv.forward:.2f}, "
                f"encoder {nonkv.encoder:.2f}) GiB; fitted model"
            ),
            flags=["--max-num-seqs", "--max-num-batched-tokens", "--limit-mm-per-prompt"],
        ),
        Consumer(name="non-torch memory", gib=nonkv.non_torch, formula="fitted constant"),
        Consumer(
            name="CUDA-graph estimate",
            gib=nonkv.cudagraph if cg_on else 0.0,
            formula="first capture + 1 MiB per further graph; subtracted since 0.21",
            flags=["--enforce-eager", "--max-cudagraph-capture-size"],
        ),
        Consumer(
            name="KV cache pool",
            gib=pool / GiB,
            formula=f"{num_blocks} blocks x {bpb:,} B ({g.group_size} layers x {layout.page_bytes:,} B)",
            flags=["--gpu-memory-utilization", "--max-model-len", "--kv-cache-dtype"],
        ),
    ]
