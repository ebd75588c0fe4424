"""The bandwidth-bound single-stream decode rate: what a GPU could do at best.

Decoding one stream is memory-bound: every step reads, on each TP rank, the rank's weights
(for a MoE only the routed experts the token picks), the KV cache of the whole context, and
reads + writes the recurrent state of hybrid layers. A speculative verify step reads all of
that once and yields `accept_length` tokens. So

    tokens/s <= accept_length * bandwidth / bytes read per step

It is an upper bound on purpose: it leaves out what only slows decoding down (kernel launch
gaps, the TP all-reduce, the draft model's own reads, sampling), so a measured rate can only be
below it; far below means something else limits the deployment, above means the inputs (GPU,
TP, model, quantization) do not describe it.
"""

from __future__ import annotations

from servefit.frozen import frozen
from servefit.hardware.spec import GPUSpec
from servefit.model.spec import ModelSpec
from servefit.units import DTYPE_BYTES, GiB


@frozen
class DecodeBound:
    """The bound and the bytes behind it (per TP rank, per decode/verify step)."""

    tokens_per_s: float
    step_bytes: int
    weight_bytes: int
    kv_bytes: int
    state_bytes: int
    bandwidth_gbs: float
    tp: int
    accept_length: float
    context_tokens: int
    gpu: str
    model: str

    def describe(self) -> str:
        gib = GiB
        return (
            f"{self.tokens_per_s:,.0f} tok/s = {self.accept_length:.2f} tokens/step x "
            f"{self.bandwidth_gbs:,.0f} GB/s ({self.gpu}) / {self.step_bytes / gib:.2f} GiB per step "
            f"(weights {self.weight_bytes / gib:.2f}, KV {self.kv_bytes / gib:.3f} at "
            f"{self.context_tokens:,} tokens, state {self.state_bytes / gib:.3f}; TP {self.tp})"
        )


def weight_bytes_read(model: ModelSpec, tp: int) -> int:
    """Weight bytes one rank reads per decode step of a single stream."""
    from servefit.model.weights import weights_per_rank

    parts = weights_per_rank(model, tp=tp).parts
    read = sum(parts.values())
    read -= parts.get("vision", 0)  # the vision tower does not run during text decoding
    if not model.tie_word_embeddings:
        # The embedding lookup reads one row; a tied embedding is also the LM head, read whole.
        read -= parts.get("embedding", 0)
    moe = next((lyr.ffn for lyr in model.layers if getattr(lyr.ffn, "kind", "") == "moe"), None)
    if moe is not None and moe.num_experts > 0:
        # One token activates experts_per_token of the routed experts in each MoE layer.
        active = min(1.0, moe.experts_per_token / moe.num_experts)
        read -= round(parts.get("experts", 0) * (1.0 - active))
    return max(read, 0)


def kv_bytes_read(model: ModelSpec, tp: int, context_tokens: int) -> int:
    """KV bytes one rank reads per step: every attention layer over the whole context."""
    per_elem = 1 if model.quant.kv_cache_fp8 else DTYPE_BYTES.get(model.dtype, 2)
    total = 0
    for lyr in model.layers:
        for mixer in lyr.mixers:
            if not getattr(mixer, "has_kv", False):
                continue
            window = getattr(mixer, "window", 0) or 0
            tokens = min(context_tokens, window) if window > 0 else context_tokens
            total += mixer.kv_elems_per_token(tp) * per_elem * tokens
    return total


def state_bytes_touched(model: ModelSpec, tp: int) -> int:
    """Recurrent state one rank reads and writes back per step (zero for pure attention)."""
    from servefit.engines.sglang.common import state_cost

    cost = state_cost(model, tp, None, {})
    return 2 * cost.per_req if cost is not None else 0


def decode_bound(
    model: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int = 1,
    context_tokens: int = 512,
    accept_length: float = 1.0,
) -> DecodeBound:
    """The bandwidth-bound decode rate of one stream (see the module docstring)."""
    weights = weight_bytes_read(model, tp)
    kv = kv_bytes_read(model, tp, context_tokens)
    state = state_bytes_touched(model, tp)
    step = weights + kv + state
    rate = max(accept_length, 1.0) * gpu.bandwidth_gbs * 1e9 / step if step else 0.0
    return DecodeBound(
        tokens_per_s=rate,
        step_bytes=step,
        weight_bytes=weights,
        kv_bytes=kv,
        state_bytes=state,
        bandwidth_gbs=gpu.bandwidth_gbs,
        tp=tp,
        accept_length=max(accept_length, 1.0),
        context_tokens=context_tokens,
        gpu=gpu.name,
        model=model.name,
    )
