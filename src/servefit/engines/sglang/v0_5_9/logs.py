"""SGLang 0.5.9 start-up log lines (the engine's f-strings) and the memory consumers.

f-strings from: model_runner.py:ModelRunner.load_model ("Load weight begin/end"),
configure_kv_cache_dtype ("Using KV cache dtype"), mem_cache/memory_pool.py:MambaPool.__init__
("Mamba Cache is allocated", no space before GB, trailing space),
KVCache._finalize_allocation_log ("KV Cache is allocated. #tokens"),
model_runner_kv_cache_mixin.py:init_memory_pool ("Memory pool end"), managers/scheduler.py
(final max_total_num_tokens line, printed after CUDA graphs: servefit can only bound it).
"""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Consumer
from servefit.engines.base import MemoryInputs
from servefit.engines.sglang import common
from servefit.engines.sglang.common import f2, gib
from servefit.engines.sglang.v0_5_9.sized import Sized
from servefit.model.spec import ModelSpec


def log_lines(s: Sized, model: ModelSpec, v: dict[str, Any], memory: MemoryInputs) -> list[str]:
    out = [
        f"Load weight begin. avail mem={f2(s.pre)} GB",
        f"Load weight end. elapsed=… s, type={model.architecture}, dtype=torch.{model.dtype}, "
        f"avail mem={f2(s.avail)} GB, mem usage={f2(memory.weights_gib)} GB.",
        f"Using KV cache dtype: {common.KV_DTYPES[s.kv_dtype][0]}",
    ]
    if s.error and s.tokens <= 0:
        return out + [s.error]
    if s.cost is not None:
        line = (
            f"Mamba Cache is allocated. max_mamba_cache_size: {s.K}, "
            f"conv_state size: {f2(gib((s.slots + 1) * s.cost.conv_bytes))}GB, "
            f"ssm_state size: {f2(gib((s.slots + 1) * s.cost.ssm_bytes))}GB "
        )
        if s.spec_bytes:
            slots = (s.max_num_reqs + 1) * s.D
            line += (
                f"intermediate_ssm_state_cache size: {f2(gib(slots * s.cost.ssm_bytes))}GB "
                f"intermediate_conv_window_cache size: {f2(gib(slots * s.cost.conv_bytes))}GB "
            )
        out.append(line)
    if s.swa_tokens is not None:  # model_runner_kv_cache_mixin.py:set_num_tokens_hybrid_swa
        out.append(
            f"Use sliding window memory pool. full_layer_tokens={s.tokens}, "
            f"swa_layer_tokens={s.swa_tokens}"
        )
    attn = model.first_attention()
    if attn is not None and attn.kind == "mla":
        out.append(f"KV Cache is allocated. #tokens: {s.tokens}, KV size: {f2(gib(s.kv_bytes))} GB")
    else:
        half = f2(gib(s.kv_bytes) / 2)
        out.append(
            f"KV Cache is allocated. #tokens: {s.tokens}, K size: {half} GB, V size: {half} GB"
        )
    out.append(f"Memory pool end. avail mem={f2(s.pool_end)} GB")
    if s.draft_kv_bytes:
        half = f2(gib(s.draft_kv_bytes) / 2)
        out.append(
            f"KV Cache is allocated. #tokens: {s.tokens}, K size: {half} GB, V size: {half} GB"
        )
    if s.error:
        return out + [s.error]
    out.append(
        f"max_total_num_tokens={s.tokens}, chunked_prefill_size={v['chunked_prefill_size']}, "
        f"max_prefill_tokens={v['max_prefill_tokens']}, max_running_requests={s.eff}, "
        f"context_len={v['context_len']}, available_gpu_mem=≤{f2(max(s.free_after, 0))} GB"
    )
    return out


def consumers(s: Sized, v: dict[str, Any], memory: MemoryInputs) -> list[Consumer]:
    f = v["mem_fraction_static"]
    out = common.static_consumers(memory.weights_gib, s.reserved, s.pre, f)
    R, D, per_req = s.max_num_reqs, s.D, s.per_req
    if s.cost is not None:
        out.append(
            Consumer(
                name="mamba state pool",
                gib=gib(s.mamba_bytes),
                formula=f"({s.K} slots + 1 padding) x {per_req:,} B/request ({s.cost.layers} layers, "
                f"conv {s.cost.conv_dtype}, ssm {s.cost.ssm_dtype}); sized by {s.sizing}",
                flags=[
                    "--max-running-requests",
                    "--mamba-full-memory-ratio",
                    "--max-mamba-cache-size",
                    "--mamba-ssm-dtype",
                    "--disable-radix-cache",
                ],
            )
        )
        if D:
            mrr = v["max_running_requests"]
            out.append(
                Consumer(
                    name="speculative mamba state",
                    gib=gib(s.spec_bytes),
                    formula=f"reserved {mrr} requests x {D} draft tokens x {per_req:,} B = {s.spec_reserved:.2f} GiB"
                    f" (allocated over {R} + 1 slots)",
                    flags=[
                        "--max-running-requests",
                        "--speculative-num-draft-tokens",
                        "--speculative-num-steps",
                    ],
                )
            )
    out.append(
        Consumer(
            name="kv cache",
            gib=gib(s.kv_bytes),
            formula=(
                f"({s.tokens:,} tokens + {v['page_size']} page) x {s.cell:,} B/token"
                if s.tokens > 0
                else f"not allocated: {s.rest:.2f} GiB left for it at {s.cell:,} B/token"
            ),
            flags=["--mem-fraction-static", "--kv-cache-dtype", "--max-total-tokens"],
        )
    )
    if s.draft_kv_bytes or memory.draft_weights_gib:
        out.append(
            Consumer(
                name="draft model (weights + KV)",
                gib=memory.draft_weights_gib + gib(s.draft_kv_bytes),
                formula="MTP/EAGLE draft layers, loaded after the target pool (from the reserve)",
                flags=["--speculative-algorithm"],
            )
        )
    out.append(
        Consumer(
            name="req_to_token pool",
            gib=gib(s.req_to_token_bytes),
            formula=f"{R} requests x ({v['context_len']} + {4 + D}) x 4 B",
            flags=["--max-running-requests", "--context-length"],
        )
    )
    return sorted(out, key=lambda c: -c.gib)
