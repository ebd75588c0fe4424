"""SGLang start-up log lines (the engine's f-strings), consumers and the failing culprit.

f-strings from (0.5.23): model_runner.py:load_model ("Load weight end"), kv_cache_configurator.py
(mm reservation, mamba cap), memory_pool.py:MambaPool.__init__ ("Mamba Cache is allocated",
no space before GB, trailing space), memory_pool.py:KVCache._finalize_allocation_log
("KV Cache is allocated. dtype: ..."), KVCacheConfigurator.configure ("Memory pool end"),
managers/scheduler.py (final max_total_num_tokens line). See docs/engines/sglang-0.5.23.md §5.7.
"""

from __future__ import annotations

from servefit._plan.schema import Consumer
from servefit.engines.base import LogFeature
from servefit.engines.sglang import common
from servefit.engines.sglang.common import f2, gib
from servefit.engines.sglang.flow.records import Budget, Pass
from servefit.engines.sglang.flow.rules import Rules
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


def log_lines(p: Pass, rules: Rules) -> list[str]:
    """What the engine prints from loading the weights to the scheduler's summary line."""
    b, m, model = p.b, p.memory, p.model
    quant = quant_log_str(model)
    out = [
        f"Load weight begin. avail mem={f2(b.P)} GB",
        f"Load weight end. elapsed=… s, type={model.architecture}, {quant + ', ' if quant else ''}"
        f"avail mem={f2(b.P - m.weights_gib)} GB, mem usage={f2(m.weights_gib)} GB.",
    ]
    if b.mm_gib > 0:
        out.append(
            f"Reserving {b.mm_gib:.2f} GB of the KV budget for post-sizing multimodal allocations "
            "(feature-transport pools + embedding cache)."
        )
    if p.error and p.tokens <= 0:
        return out + list(p.notes) + [p.error]
    out += [line for line in p.notes if not line.startswith("KV pool holds")]
    if p.error:
        return out + [p.error]
    out += _pool_lines(p, rules)
    out += [line for line in p.notes if line.startswith("KV pool holds")]
    out.append(
        f"max_total_num_tokens={p.tokens}, chunked_prefill_size={p.v['chunked_prefill_size']}, "
        f"max_prefill_tokens={p.v['max_prefill_tokens']}, max_running_requests={p.R}, "
        f"context_len={p.v['context_len']}, available_gpu_mem=≤{f2(max(p.free_after, 0))} GB"
    )
    return out


def _pool_lines(p: Pass, rules: Rules) -> list[str]:
    """MambaPool / KV pool allocation lines, "Memory pool end", and the draft's pool."""
    a, b, tokens = p.alloc, p.b, p.tokens
    # KVCache._finalize_allocation_log names the dtype where the release prints it
    named = LogFeature.KV_ALLOCATED_DTYPE in rules.log_format
    dtype = f"dtype: {common.KV_DTYPES[p.lay.kv_dtype][0]}, " if named else ""
    out = []
    if p.lay.cost is not None:
        line = (
            f"Mamba Cache is allocated. max_mamba_cache_size: {b.K}, conv_state size: {f2(gib(a.conv))}GB, "
            f"ssm_state size: {f2(gib(a.ssm))}GB "
        )
        if a.iss or a.icw:
            line += (
                f"intermediate_ssm_state_cache size: {f2(gib(a.iss))}GB "
                f"intermediate_conv_window_cache size: {f2(gib(a.icw))}GB "
            )
        out.append(line)
    if a.kv_lines is not None:
        out += a.kv_lines[0]
    elif a.k:
        out.append(
            f"KV Cache is allocated. {dtype}#tokens: {tokens}, K size: {f2(gib(a.k))} GB, "
            f"V size: {f2(gib(a.v))} GB"
        )
    else:
        out.append(f"KV Cache is allocated. {dtype}#tokens: {tokens}, KV size: {f2(gib(a.kv))} GB")
    out.append(f"Memory pool end. avail mem={f2(p.pool_end)} GB")
    if a.draft_kv:
        half = f2(gib(a.draft_kv) / 2)
        if a.kv_lines is not None and a.kv_lines[1]:
            out += a.kv_lines[1]
        else:
            out.append(
                f"KV Cache is allocated. {dtype}#tokens: {tokens}, K size: {half} GB, V size: {half} GB"
            )
        out.append(f"Memory pool end. avail mem={f2(p.free_after)} GB")
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


def consumers(p: Pass) -> list[Consumer]:
    """Who takes the rank's memory, largest first, each with its formula and its levers."""
    b, m, v = p.b, p.memory, p.v
    f = v["mem_fraction_static"]
    out = common.static_consumers(m.weights_gib, b.slack, b.P, f)
    if b.mm_gib:
        out.append(
            Consumer(
                name="multimodal reservation",
                gib=b.mm_gib,
                formula="SGLANG_VLM_CACHE_SIZE_MB (+ SGLANG_MM_FEATURE_CACHE_MB for GPU transports)",
                flags=["--mm-feature-transport", "--language-model-only"],
            )
        )
    out += _state_consumers(p)
    out += _kv_consumers(p)
    return sorted(out, key=lambda c: -c.gib)


def _state_consumers(p: Pass) -> list[Consumer]:
    b, a, cost = p.b, p.alloc, p.lay.cost
    if cost is None or b.K is None:
        return []
    out = [
        Consumer(
            name="mamba state pool",
            gib=gib(a.mamba) if a.mamba else b.mamba_reserved,
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
    ]
    if b.spec_reserved:
        out.append(
            Consumer(
                name="speculative mamba state",
                gib=gib(a.iss + a.icw) or b.spec_reserved,
                formula=f"reserved {b.spec_reserved:.2f} GiB = per_req x (capped requests + 1) x "
                f"{p.lay.D} draft tokens; allocated over {p.R}+1 slots (conv window deduplicated)",
                flags=[
                    "--max-running-requests",
                    "--speculative-num-draft-tokens",
                    "--speculative-num-steps",
                ],
            )
        )
    return out


def _kv_consumers(p: Pass) -> list[Consumer]:
    a, m, lay = p.alloc, p.memory, p.lay
    cell, target_cell = p.tok.cell, lay.target_cell
    draft_note = f" (incl. {cell - target_cell} B/token draft KV)" if cell != target_cell else ""
    out = [
        Consumer(
            name="kv cache",
            gib=gib(a.kv),
            formula=a.kv_formula
            or f"({p.tokens:,} tokens + {p.v['page_size']} page) x {target_cell:,} B/token; budget at "
            f"{cell:,} B/token{draft_note}",
            flags=["--mem-fraction-static", "--kv-cache-dtype", "--max-total-tokens"],
        )
    ]
    if a.draft_kv or m.draft_weights_gib:
        split = p.tok.split
        inside = cell != target_cell if split is None else bool(split.draft_full or split.draft_swa)
        where = "inside the budget" if inside else "outside the budget (from the reserve)"
        out.append(
            Consumer(
                name="draft model (weights + KV)",
                gib=m.draft_weights_gib + gib(a.draft_kv),
                formula=f"draft weights load before the pools (counted); draft KV {where}",
                flags=["--speculative-algorithm", "--speculative-draft-model-path"],
            )
        )
    out.append(
        Consumer(
            name="req_to_token pool",
            gib=gib(a.req_to_token),
            formula=f"({p.R} + 1) requests x ({lay.ctx} + extra) x 4 B",
            flags=["--max-running-requests", "--context-length"],
        )
    )
    return out
