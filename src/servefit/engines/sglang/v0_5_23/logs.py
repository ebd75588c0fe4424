"""SGLang 0.5.23 start-up log lines (the engine's f-strings), consumers and the failing culprit.

f-strings from: model_runner.py:load_model ("Load weight end"), kv_cache_configurator.py
(mm reservation, mamba cap), memory_pool.py:MambaPool.__init__ ("Mamba Cache is allocated",
no space before GB, trailing space), memory_pool.py:KVCache._finalize_allocation_log
("KV Cache is allocated. dtype: ..."), KVCacheConfigurator.configure ("Memory pool end"),
managers/scheduler.py (final max_total_num_tokens line). See docs/engines/sglang-0.5.23.md §5.7.
"""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Consumer
from servefit.engines.base import MemoryInputs
from servefit.engines.sglang import common
from servefit.engines.sglang.common import f2, gib
from servefit.engines.sglang.v0_5_23.budget import Budget
from servefit.model.spec import ModelSpec


def quant_log_str(model: ModelSpec) -> str | None:
    """configs/model_config.py:get_quantization_config_log_str: "quant=fp8, fmt=e4m3"."""
    raw = model.quant.raw or {}
    if not raw:
        return None
    out = f"quant={raw.get('quant_method', 'quantized')}"
    for key in ("bits", "quant_algo", "fmt", "requantization_method"):
        if key in raw:
            out += f", {key}={raw[key]}"
    return out


def log_lines(
    model: ModelSpec,
    v: dict[str, Any],
    memory: MemoryInputs,
    b: Budget,
    cost: Any,
    alloc: dict[str, int],
    tokens: int,
    R: int,
    D: int,
    kv_dtype: str,
    pool_end: float,
    draft_kv: int,
    free_after: float,
    pre_logs: list[str],
    error: str | None,
    kv_lines: tuple[list[str], list[str]] | None = None,
) -> list[str]:
    """kv_lines: a hybrid SWA model's (target, draft) SWAKVPool lines (swa.py:kv_lines)."""
    quant = quant_log_str(model)
    out = [
        f"Load weight begin. avail mem={f2(b.P)} GB",
        f"Load weight end. elapsed=… s, type={model.architecture}, {quant + ', ' if quant else ''}"
        f"avail mem={f2(b.P - memory.weights_gib)} GB, mem usage={f2(memory.weights_gib)} GB.",
    ]
    if b.mm_gib > 0:
        out.append(
            f"Reserving {b.mm_gib:.2f} GB of the KV budget for post-sizing multimodal allocations "
            "(feature-transport pools + embedding cache)."
        )
    if error and tokens <= 0:
        return out + pre_logs + [error]
    out += [line for line in pre_logs if not line.startswith("KV pool holds")]
    if error:
        return out + [error]
    dtype = common.KV_DTYPES[kv_dtype][0]
    if cost is not None:
        line = (
            f"Mamba Cache is allocated. max_mamba_cache_size: {b.K}, conv_state size: {f2(gib(alloc['conv']))}GB, "
            f"ssm_state size: {f2(gib(alloc['ssm']))}GB "
        )
        if alloc["iss"] or alloc["icw"]:
            line += (
                f"intermediate_ssm_state_cache size: {f2(gib(alloc['iss']))}GB "
                f"intermediate_conv_window_cache size: {f2(gib(alloc['icw']))}GB "
            )
        out.append(line)
    if kv_lines is not None:
        out += kv_lines[0]
    elif alloc["k"]:
        out.append(
            f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, K size: {f2(gib(alloc['k']))} GB, "
            f"V size: {f2(gib(alloc['v']))} GB"
        )
    else:
        out.append(
            f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, KV size: {f2(gib(alloc['kv']))} GB"
        )
    out.append(f"Memory pool end. avail mem={f2(pool_end)} GB")
    if draft_kv:
        half = f2(gib(draft_kv) / 2)
        if kv_lines is not None and kv_lines[1]:
            out += kv_lines[1]
        else:
            out.append(
                f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, K size: {half} GB, V size: {half} GB"
            )
        out.append(f"Memory pool end. avail mem={f2(free_after)} GB")
    out += [line for line in pre_logs if line.startswith("KV pool holds")]
    out.append(
        f"max_total_num_tokens={tokens}, chunked_prefill_size={v['chunked_prefill_size']}, "
        f"max_prefill_tokens={v['max_prefill_tokens']}, max_running_requests={R}, context_len={v['context_len']}, "
        f"available_gpu_mem=≤{f2(max(free_after, 0))} GB"
    )
    return out


def culprit(b: Budget, kind: str | None) -> tuple[str, str]:
    """Name what left the KV pool (or the state pool) no memory, with the numbers."""
    if b.budget <= 0:
        return "weights", (
            f"after the weights load only {b.budget:.2f} GiB is left under --mem-fraction-static "
            f"(free {b.avail:.2f} - reserve {b.slack:.2f} - multimodal {b.mm_gib:.2f} GiB)"
        )
    if kind == "mamba" and b.K is not None and b.K > 0:
        return "mamba state pool", (
            f"{b.K} state slots // {b.ratio} per request leave no running request"
        )
    parts = {"speculative mamba state": b.spec_reserved, "mamba state pool": b.mamba_reserved}
    if not any(parts.values()):
        return "kv cache", f"{b.budget:.2f} GiB budget holds less than one page of KV cache"
    name = max(parts, key=lambda k: parts[k])
    return name, (
        f"{name} takes {parts[name]:.2f} GiB: speculative state {b.spec_reserved:.2f} + state pool "
        f"{b.mamba_reserved:.2f} GiB of the {b.budget:.2f} GiB budget leave nothing for the KV cache"
    )


def consumers(
    memory: MemoryInputs,
    v: dict[str, Any],
    b: Budget,
    cost: Any,
    alloc: dict[str, int],
    tokens: int,
    R: int,
    D: int,
    cell: int,
    target_cell: int,
    draft_kv: int,
    ctx: int,
    kv_formula: str | None = None,
    draft_in_budget: bool | None = None,
) -> list[Consumer]:
    """kv_formula / draft_in_budget: a hybrid SWA model's pool formula (swa.py:kv_formula)."""
    f = v["mem_fraction_static"]
    out = [
        Consumer(
            name="weights",
            gib=memory.weights_gib,
            formula="target weights on this rank",
            flags=["--tp-size", "--pp-size", "--quantization"],
        ),
        Consumer(
            name="reserved (outside the static fraction)",
            gib=b.slack,
            formula=f"pre-load free {b.P:.2f} GiB x (1 - mem_fraction_static {f:.4g})",
            flags=["--mem-fraction-static"],
        ),
    ]
    if b.mm_gib:
        out.append(
            Consumer(
                name="multimodal reservation",
                gib=b.mm_gib,
                formula="SGLANG_VLM_CACHE_SIZE_MB (+ SGLANG_MM_FEATURE_CACHE_MB for GPU transports)",
                flags=["--mm-feature-transport", "--language-model-only"],
            )
        )
    if cost is not None and b.K is not None:
        out.append(
            Consumer(
                name="mamba state pool",
                gib=gib(alloc["mamba"]) if alloc["mamba"] else b.mamba_reserved,
                formula=f"({b.K} slots + 1 padding) x {b.per_req:,} B/request ({cost.layers} layers, conv "
                f"{cost.conv_dtype}, ssm {cost.ssm_dtype}); {b.sizing}",
                flags=[
                    "--max-running-requests",
                    "--mamba-full-memory-ratio",
                    "--max-mamba-cache-size",
                    "--mamba-ssm-dtype",
                    "--disable-radix-cache",
                ],
            )
        )
        if b.spec_reserved:
            out.append(
                Consumer(
                    name="speculative mamba state",
                    gib=gib(alloc["iss"] + alloc["icw"]) or b.spec_reserved,
                    formula=f"reserved {b.spec_reserved:.2f} GiB = per_req x (capped requests + 1) x {D} draft tokens; "
                    f"allocated over {R}+1 slots (conv window deduplicated)",
                    flags=[
                        "--max-running-requests",
                        "--speculative-num-draft-tokens",
                        "--speculative-num-steps",
                    ],
                )
            )
    draft_note = f" (incl. {cell - target_cell} B/token draft KV)" if cell != target_cell else ""
    out.append(
        Consumer(
            name="kv cache",
            gib=gib(alloc["kv"]),
            formula=kv_formula
            or f"({tokens:,} tokens + {v['page_size']} page) x {target_cell:,} B/token; budget at "
            f"{cell:,} B/token{draft_note}",
            flags=["--mem-fraction-static", "--kv-cache-dtype", "--max-total-tokens"],
        )
    )
    if draft_kv or memory.draft_weights_gib:
        inside = cell != target_cell if draft_in_budget is None else draft_in_budget
        where = "inside the budget" if inside else "outside the budget (from the reserve)"
        out.append(
            Consumer(
                name="draft model (weights + KV)",
                gib=memory.draft_weights_gib + gib(draft_kv),
                formula=f"draft weights load before the pools (counted); draft KV {where}",
                flags=["--speculative-algorithm", "--speculative-draft-model-path"],
            )
        )
    out.append(
        Consumer(
            name="req_to_token pool",
            gib=gib(alloc["req_to_token"]),
            formula=f"({R} + 1) requests x ({ctx} + extra) x 4 B",
            flags=["--max-running-requests", "--context-length"],
        )
    )
    return sorted(out, key=lambda c: -c.gib)
