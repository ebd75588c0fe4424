"""Available KV memory, blocks, concurrency, start-up errors and log lines, for both mirrored
vLLM releases; what differs between them comes from the version's `PlanningRules`.

Mirrors (the same in 0.24.0 and 0.33.0 unless the rules say otherwise):
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

import math
from typing import TYPE_CHECKING, Any, Protocol

from servefit._plan.schema import Consumer, PerRank, Pools
from servefit.engines.base import MemoryInputs, ResolvedArgs, Sizing
from servefit.engines.vllm import common, profiling
from servefit.engines.vllm.common import cdiv, format_gib
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.units import GiB

if TYPE_CHECKING:
    from servefit.engines.vllm.resolve import KVLayout


class PlanningRules(Protocol):
    """The planning differences of one release (v0_*/planning_rules.py)."""

    # 0.33.0 checks against available - one block (the null block), 0.24.0 against available
    NULL_BLOCK_IN_CHECK: bool
    # the V1 runner logs "Profiling CUDA graph memory" / "Estimated CUDA graph memory"
    V1_GRAPH_LOGS: bool

    def capacity_logs(self, tokens: int, max_model_len: int, concurrency: float) -> list[str]: ...


def blocks_per_request(v: dict[str, Any], layout: Any, max_len: int) -> int:
    """Blocks one request at `max_len` takes from the shared pool, summed over groups
    (_max_memory_usage_bytes_from_groups / get_max_concurrency_for_kv_cache_config):
    FullAttentionSpec cdiv(len, block) per attention group; MambaSpec.max_memory_usage_bytes /
    page per Mamba group (the version's count; "all" mode grows with the length)."""
    g = layout.grouping
    attn = g.attention_groups * cdiv(max_len, layout.block_size)
    if not g.mamba_groups:
        return attn
    per = layout.mamba_blocks_per_request
    if v["mamba_cache_mode"] == "all":
        per = cdiv(max_len, layout.mamba_block_size) + v["num_speculative_tokens"]
    return attn + g.mamba_groups * per


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
    requested = math.ceil(total_b * util)
    free_b = memory.pre_load_free_gib * GiB
    logs: list[str] = []
    warnings: list[str] = []

    nonkv, notes = profiling.estimate(
        model,
        weights_gib=memory.weights_gib + memory.draft_weights_gib,
        tp=v["tensor_parallel_size"],
        max_num_batched_tokens=v["max_num_batched_tokens"],
        max_num_seqs=v["max_num_seqs"],
        encoder_profiled=v["_encoder_profiled"],
        sampler_rank=True,
        graphs_per_mode=v["_graphs"],
    )
    warnings += notes
    cg_on = v["_estimate_cudagraphs"] and bool(v["_graphs"])
    bpb = layout.bytes_per_block
    mml = v["max_model_len"]

    def needed(length: int) -> int:
        return bpb * blocks_per_request(v, layout, length)

    error = consumer = detail = None
    num_blocks = 0
    available = 0
    if free_b < requested:
        error = common.free_memory_error(free_b, total_b, util, requested)
        consumer = "memory in use before vLLM starts"
        detail = (
            f"{memory.pre_load_free_gib:.2f} GiB free at start-up < {util} x "
            f"{memory.total_gib:.2f} GiB requested"
        )
    else:
        # gpu_model_runner.py:load_model, then Platform.update_block_size_for_backend
        logs.append(
            f"Model loading took {format_gib((memory.weights_gib + memory.draft_weights_gib) * GiB)} "
            "GiB memory and … seconds"
        )
        if layout.block_log:
            logs.append(layout.block_log)
        if layout.padding_pct is not None:
            logs.append(
                f"Padding mamba page size by {layout.padding_pct:.2f}% to ensure that mamba page "
                "size and attention page size are exactly equal."
            )
        if v.get("kv_cache_memory_bytes"):
            available = int(v["kv_cache_memory_bytes"])
            logs.append(
                f"Initial free memory {format_gib(free_b)} GiB, reserved {format_gib(available)} GiB "
                "memory for KV Cache as specified by kv_cache_memory_bytes config and skipped "
                "memory profiling. This does not respect the gpu_memory_utilization config. Only "
                "use kv_cache_memory_bytes config when you want manual control of KV cache memory "
                "size. If OOM'ed, check the difference of initial free memory between the current "
                "run and the previous run where kv_cache_memory_bytes is suggested and update it "
                "correspondingly."
            )
        else:
            if rules.V1_GRAPH_LOGS:
                logs += _graph_logs(v, nonkv)
            available = int(requested - nonkv.total(cg_on) * GiB)
            logs.append(f"Available KV cache memory: {format_gib(available)} GiB")
            if cg_on and nonkv.cudagraph > 0:
                delta = nonkv.cudagraph / memory.total_gib
                logs.append(
                    "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
                    f"--gpu-memory-utilization={util:.4f} is equivalent to "
                    f"--gpu-memory-utilization={round(util - delta, 4):.4f} without CUDA graph "
                    "memory profiling. To maintain the same effective KV cache size as before, "
                    f"increase --gpu-memory-utilization to {min(round(util + delta, 4), 1.0):.4f}. "
                    "To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
                )
        logs += list(layout.grouping.padding_logs)
        if v.get("num_gpu_blocks_override") is not None:
            logs.append(
                f"Overriding num_gpu_blocks={max(available, 0) // bpb} with "
                f"num_gpu_blocks_override={v['num_gpu_blocks_override']}"
            )
            available = v["num_gpu_blocks_override"] * bpb
        check = available - bpb if rules.NULL_BLOCK_IN_CHECK else available
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
            error = common.NO_MEMORY
        elif error is None and needed(mml) > check:
            est = common.estimate_max_model_len(needed, check, mml)
            error = common.max_seq_len_error(mml, needed(mml), check, est)
            consumer = "KV cache of one request at max_model_len"
            detail = (
                f"{needed(mml) / GiB:.2f} GiB for one {mml:,}-token request > "
                f"{check / GiB:.2f} GiB available; longest that fits: {est:,} tokens"
            )
        if error == common.NO_MEMORY or (error and consumer is None and "auto-fit" in error):
            consumer, detail = _largest_consumer(nonkv, cg_on, requested)
    per_req = blocks_per_request(v, layout, mml)
    concurrency = 0.0
    tokens = 0
    if error is None:
        num_blocks = available // bpb
        if v.get("num_gpu_blocks_override") is not None:
            num_blocks = v["num_gpu_blocks_override"]
        concurrency = num_blocks / per_req
        tokens = int(concurrency * mml)
        logs += rules.capacity_logs(tokens, mml, concurrency)
        full_graphs = v["cudagraph_mode"] in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL")
        if model.is_hybrid and full_graphs and v["max_num_seqs"] > num_blocks:
            error = common.mamba_blocks_error(v["max_num_seqs"], num_blocks)
            consumer = "max_num_seqs above the Mamba cache blocks"
            detail = (
                f"FULL decode CUDA graphs need one Mamba block per sequence: max_num_seqs "
                f"{v['max_num_seqs']} > {num_blocks} blocks of {bpb / (1 << 20):.1f} MiB"
            )
    if error:
        logs.append(error)
    return _sizing(
        model,
        v,
        memory,
        layout,
        nonkv,
        cg_on,
        requested,
        available,
        num_blocks,
        per_req,
        concurrency,
        tokens,
        logs,
        warnings,
        error,
        consumer,
        detail,
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
    model: ModelSpec,
    v: dict[str, Any],
    memory: MemoryInputs,
    layout: KVLayout,
    nonkv: profiling.NonKV,
    cg_on: bool,
    requested: int,
    available: int,
    num_blocks: int,
    per_req: int,
    concurrency: float,
    tokens: int,
    logs: list[str],
    warnings: list[str],
    error: str | None,
    consumer: str | None,
    detail: str | None,
) -> Sizing:
    """The `Sizing` of what `size` worked out: pools, per-rank memory, consumers, verdict."""
    g = layout.grouping
    bpb = layout.bytes_per_block
    pool = num_blocks * bpb
    attn_share = (
        (g.attention_groups * cdiv(v["max_model_len"], layout.block_size)) / per_req
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
        reserved_gib=nonkv.activation + nonkv.non_torch + (nonkv.cudagraph if cg_on else 0.0),
        free_gib=free_after,
    )
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
    pools = Pools(
        budget_gib=available / GiB,
        kv_budget_gib=available / GiB,
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
    consumers = [
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
    return Sizing(
        pools=pools,
        per_rank=per_rank,
        error=error,
        error_consumer=consumer if error else None,
        error_detail=detail if error else None,
        consumers=tuple(sorted(consumers, key=lambda c: -c.gib)),
        log_lines=tuple(logs),
        warnings=tuple(warnings),
        extra={
            "requested_gib": requested / GiB,
            "bytes_per_block": bpb,
            "blocks_per_request": per_req,
            "non_kv_gib": nonkv.total(cg_on),
            "activation_phase": nonkv.activation_phase,
        },
    )
