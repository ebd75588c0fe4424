"""Weight bytes on the most loaded GPU rank, sharded the way SGLang shards them.

* TP: column-parallel linears split their output, row-parallel their input; norms, routers and
  ReplicatedLinear layers (MLA q_a/kv_a, latent-MoE projections) are replicated; attention KV
  heads are replicated when there are fewer than ranks (QKVParallelLinear: each rank keeps
  max(1, kv_heads // tp) heads).
* Vocabulary: VocabParallelEmbedding / ParallelLMHead pad the vocab to a multiple of 64, or of
  64 * tp when that padded size does not divide by tp
  (sglang/srt/layers/vocab_parallel_embedding.py:VocabParallelEmbedding.__init__, pad_vocab_size).
* EP: each rank holds ceil(experts / ep) routed experts, each split by the MoE-TP size
  max(1, tp // ep).
* PP: decoder layers are split by the engine's own get_pp_indices, which the caller passes as
  `pp_split` (engines/sglang/common.py:pp_indices, engines/vllm/common.py:pp_indices: they put
  the extra layers on different stages); the embedding and the vision tower sit on the first
  stage, the final norm and LM head on the last (a tied LM head gets its own copy there when
  pp > 1).
* MTP / NextN layers are not part of the target: SGLang's Qwen3.5 loader skips every "mtp"
  weight (sglang/srt/models/qwen3_5.py:Qwen3_5ForConditionalGeneration.load_weights); the draft
  model loads them separately and shares the target's embedding and LM head. They are reported
  as draft bytes when include_mtp=True.

When the model came from a local checkpoint directory with safetensors files, the exact stored
tensor sizes are used instead of the estimate, sharded by name with the same rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from math import ceil
from pathlib import Path

from servefit.errors import ArgumentError
from servefit.frozen import frozen
from servefit.model.params import PARTS, Tensor, tensors
from servefit.model.quant import QuantPolicy
from servefit.model.safetensors_index import StoredTensor, read_checkpoint
from servefit.model.spec import ModelSpec
from servefit.units import DTYPE_BYTES, GiB

_VOCAB_PAD = 64  # vocab_parallel_embedding.py:DEFAULT_VOCAB_PADDING_SIZE


@frozen
class WeightBreakdown:
    """Weight bytes of the most loaded rank (target model, and the MTP draft if asked)."""

    target_bytes: int
    draft_bytes: int = 0
    parts: dict[str, int] = field(default_factory=dict, compare=False, hash=False)
    tp: int = 1
    pp: int = 1
    ep: int = 1
    stage: int = 0  # PP stage of the most loaded rank
    method: str = "estimate"  # "estimate" | "safetensors"

    @property
    def total_bytes(self) -> int:
        return self.target_bytes + self.draft_bytes

    @property
    def gib(self) -> float:
        return self.total_bytes / GiB

    @property
    def target_gib(self) -> float:
        return self.target_bytes / GiB

    @property
    def draft_gib(self) -> float:
        return self.draft_bytes / GiB


def padded_vocab(vocab: int, tp: int) -> int:
    """Rows of the vocab-parallel embedding across all ranks."""
    pad = _VOCAB_PAD
    if ceil(vocab / pad) * pad % tp:
        pad *= tp
    return ceil(vocab / pad) * pad


# (num_layers, stage, stages) -> [start, end) of the decoder layers on that stage: an engine's
# get_pp_indices
PPSplit = Callable[[int, int, int], tuple[int, int]]


def _one_stage(num_layers: int, rank: int, pp: int) -> tuple[int, int]:
    if pp != 1:
        raise ValueError("weights_per_rank: pp > 1 needs the engine's layer split (pp_split)")
    return 0, num_layers


def _check(model: ModelSpec, tp: int, pp: int, ep: int) -> None:
    for name, value in (("tp", tp), ("pp", pp), ("ep", ep)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArgumentError(f"{name} size must be a positive integer, got {value!r}")
    if pp > max(model.num_layers, 1):
        raise ArgumentError(
            f"pp size {pp} is larger than the number of layers ({model.num_layers})"
        )


def _stage_of(x: Tensor, starts: list[tuple[int, int]]) -> int | None:
    if x.place == "first":
        return 0
    if x.place == "last":
        return len(starts) - 1
    if x.layer is None:
        return None
    for s, (a, b) in enumerate(starts):
        if a <= x.layer < b:
            return s
    return None


def _rank_shape(x: Tensor, tp: int, ep: int) -> tuple[int, int, int]:
    out, inp, count = x.out, x.inp, x.count
    if x.part == "experts":
        count = ceil(count / ep)
        moe_tp = max(1, tp // ep)
        if x.shard == "col":
            out = ceil(out / moe_tp)
        elif x.shard == "row":
            inp = ceil(inp / moe_tp)
        return out, inp, count
    if x.shard == "col":
        out = ceil(out / tp)
    elif x.shard == "row":
        inp = ceil(inp / tp)
    elif x.shard == "vocab":
        out = padded_vocab(out, tp) // tp
    elif x.shard in ("kv", "groups") and x.heads > 0:
        per_head = out // x.heads
        if x.shard == "kv":
            heads = max(1, x.heads // tp)
        else:  # Mamba2StateShape.create: groups padded to tp when not divisible
            heads = x.heads // tp if x.heads % tp == 0 else 1
        out = per_head * heads
    return out, inp, count


def tensor_bytes(x: Tensor, policy: QuantPolicy, model_dtype: str, tp: int = 1, ep: int = 1) -> int:
    """Bytes of one tensor on one rank."""
    out, inp, count = _rank_shape(x, tp, ep)
    fmt = policy.fmt((x.name,), x.role) if inp > 1 else None
    if fmt is not None:
        return count * fmt.matrix_bytes(out, inp)
    return count * out * inp * DTYPE_BYTES.get(x.dtype or model_dtype, 2)


def _estimate(
    model: ModelSpec, tp: int, pp: int, ep: int, include_mtp: bool, pp_split: PPSplit
) -> WeightBreakdown:
    policy = QuantPolicy(model.quant)
    starts = [pp_split(model.num_layers, r, pp) for r in range(pp)]
    stages = [dict.fromkeys(PARTS, 0) for _ in range(pp)]
    draft = 0
    for x in tensors(model):
        if x.part == "vision" and not model.is_multimodal:
            continue
        if x.place == "mtp":
            if include_mtp and not x.shared:
                draft += tensor_bytes(x, policy, model.dtype, tp, ep)
            continue
        stage = _stage_of(x, starts)
        if stage is None:
            continue
        stages[stage][x.part] += tensor_bytes(x, policy, model.dtype, tp, ep)
        if x.part == "embedding" and model.tie_word_embeddings and pp > 1:
            # the last stage holds its own LM head, loaded from the tied embedding
            head = Tensor(
                "lm_head", "lm_head", x.out, x.inp, shard="vocab", role="lm_head", place="last"
            )
            stages[-1]["lm_head"] += tensor_bytes(head, policy, model.dtype, tp, ep)
    worst = max(range(pp), key=lambda s: sum(stages[s].values()))
    return WeightBreakdown(
        sum(stages[worst].values()), draft, stages[worst], tp, pp, ep, worst, "estimate"
    )


# ------------------------------------------------------------------------------ safetensors

_VISION = (
    "visual.",
    "vision_tower",
    "vision_model",
    "multi_modal_projector",
    "mm_projector",
    "vision_embed",
    "image_newline",
)
_REPLICATED = (
    "q_a_proj",
    "kv_a_proj_with_mqa",
    "fc1_latent_proj",
    "fc2_latent_proj",
    "f_a_proj",
    "g_a_proj",
    "shared_expert_gate",
    "routed_expert_down_proj",
    "routed_expert_up_proj",
    "e_score_correction_bias",
    ".router.",
    "eh_proj",
    "mtp.fc",
)
_ROW_BIAS = ("o_proj.bias", "down_proj.bias", "out_proj.bias", "proj.bias", "fc2.bias", "w2.bias")


def _layer_index(name: str) -> int | None:
    parts = name.split(".")
    for k, p in enumerate(parts[:-1]):
        if p in ("layers", "h", "blocks") and parts[k + 1].isdigit() and "visual" not in name:
            return int(parts[k + 1])
    return None


class _NameRules:
    """Sharding of stored tensors by name, with the same rules as the estimate."""

    def __init__(self, model: ModelSpec, tp: int, ep: int) -> None:
        self.model, self.tp, self.ep = model, tp, ep
        self.experts = max((getattr(lyr.ffn, "num_experts", 0) for lyr in model.layers), default=0)
        self.kv = getattr(model.first_attention(), "num_kv_heads", 0)

    def fraction(self, t: StoredTensor) -> float:
        """Share of the tensor held by one rank."""
        name, tp, ep = t.name, self.tp, self.ep
        if ".experts." in name or name.endswith(".experts") or ".experts_" in name:
            if self.experts:
                return ceil(self.experts / ep) / self.experts / max(1, tp // ep)
            return 1 / tp
        if (
            "embed_tokens" in name
            or name.endswith("embeddings.weight")
            or name.startswith("lm_head")
        ):
            vocab = t.shape[0] if t.shape else self.model.vocab_size
            return padded_vocab(vocab, tp) / tp / max(vocab, 1)
        if len(t.shape) <= 1 and "norm" in name:
            return 1.0
        if any(k in name for k in _REPLICATED) or name.endswith(_ROW_BIAS):
            return 1.0
        is_gate = ".gate." in name or name.endswith(".gate.weight")
        if is_gate and t.shape and self.experts and t.shape[0] == self.experts:
            return 1.0  # router
        if ("k_proj" in name or "v_proj" in name) and self.kv:
            return max(1, self.kv // tp) / self.kv
        if not t.shape or t.shape == (1,):
            return 1.0  # per-tensor scales
        return 1 / tp

    @staticmethod
    def part(name: str, ndim: int) -> str:
        if ".experts" in name:
            return "experts"
        if any(
            k in name for k in (".mlp.", ".feed_forward.", ".block_sparse_moe.", ".shared_mlp.")
        ):
            return "dense_ffn"
        if ndim <= 1 and "layernorm" in name:
            return "norms"
        return "attention"


def _from_checkpoint(
    model: ModelSpec,
    stored: list[StoredTensor],
    tp: int,
    pp: int,
    ep: int,
    include_mtp: bool,
    pp_split: PPSplit,
) -> WeightBreakdown:
    starts = [pp_split(model.num_layers, r, pp) for r in range(pp)]
    stages = [dict.fromkeys(PARTS, 0.0) for _ in range(pp)]
    rules = _NameRules(model, tp, ep)
    draft = 0.0
    for t in stored:
        name = t.name
        idx = _layer_index(name)
        share = t.nbytes * rules.fraction(t)
        vision = any(v in name for v in _VISION)
        beyond = idx is not None and idx >= model.num_layers and not vision  # DeepSeek NextN
        if name.startswith("mtp.") or ".mtp." in name or beyond:
            if include_mtp and "embed_tokens" not in name and "shared_head.head" not in name:
                draft += share  # the draft reuses the target's embedding and head
            continue
        if vision:
            if model.is_multimodal:
                stages[0]["vision"] += share
            continue
        if "embed_tokens" in name or name.endswith("embeddings.weight"):
            stages[0]["embedding"] += share
            if model.tie_word_embeddings and pp > 1:
                stages[-1]["lm_head"] += share
            continue
        if name.startswith("lm_head"):
            stages[-1]["lm_head"] += share
            continue
        if idx is None:
            stages[-1]["norms"] += share
            continue
        stage = next((s for s, (a, b) in enumerate(starts) if a <= idx < b), pp - 1)
        stages[stage][rules.part(name, len(t.shape))] += share
    worst = max(range(pp), key=lambda s: sum(stages[s].values()))
    parts = {k: round(v) for k, v in stages[worst].items()}
    return WeightBreakdown(
        sum(parts.values()), round(draft), parts, tp, pp, ep, worst, "safetensors"
    )


def weights_per_rank(
    model: ModelSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    include_mtp: bool = False,
    checkpoint_dir: str | Path | None = None,
    pp_split: PPSplit = _one_stage,
) -> WeightBreakdown:
    """Weight bytes on the most loaded rank under TP x PP (x EP for the routed experts).

    checkpoint_dir (default: the model's source when that is a local checkpoint directory, or
    the directory of a local config.json) switches to exact sizes read from its safetensors
    headers; without safetensors files there, the estimate is used.
    """
    _check(model, tp, pp, ep)
    directory = Path(checkpoint_dir) if checkpoint_dir else None
    if directory is None and model.source and not model.source.startswith(("catalog:", "hub:")):
        candidate = Path(model.source)
        if candidate.is_file() and candidate.name == "config.json":
            candidate = candidate.parent  # a config.json inside its checkpoint directory
        if candidate.is_dir():
            directory = candidate
    if directory is not None:
        stored = read_checkpoint(directory)
        if stored:
            return _from_checkpoint(model, stored, tp, pp, ep, include_mtp, pp_split)
    return _estimate(model, tp, pp, ep, include_mtp, pp_split)
