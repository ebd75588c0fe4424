"""ModelSpec: everything the planners need to know about a model, engine-independent."""

from __future__ import annotations

from dataclasses import field
from functools import cached_property
from typing import Any

from servefit.frozen import frozen
from servefit.model.layers import (
    RECURRENT_KINDS,
    AttentionMixer,
    Layer,
    Mixer,
    RecurrentMixer,
)
from servefit.model.readers import ConfigIssue, config_notes


@frozen
class QuantSpec:
    """How the checkpoint stores its linear weights.

    `method` is the normalized scheme: "none", "fp8", "nvfp4", "mxfp4", "awq", "gptq",
    "compressed-tensors", "auto-round", "bitsandbytes", ... `weight_bits` is the bits per
    quantized linear weight element; `group_size` the scale group (0 = per channel/tensor).
    `kv_cache_fp8` is True when the checkpoint asks for an fp8 KV cache
    (modelopt `kv_cache_quant_algo == "FP8"` or a float8 `kv_cache_scheme`).
    """

    method: str = "none"
    weight_bits: int = 16
    group_size: int = 0
    kv_cache_fp8: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@frozen
class ParamCount:
    """Parameter counts by part, as stored in the checkpoint (elements, not bytes)."""

    embedding: int = 0
    lm_head: int = 0  # 0 when tied to the embedding
    attention: int = 0  # all token-mixer weights (attention, linear attention, SSM)
    dense_ffn: int = 0  # MLPs and shared experts
    experts: int = 0  # routed experts (sharded by EP/TP)
    norms: int = 0
    vision: int = 0
    mtp: int = 0  # MTP / NextN draft layers shipped in the checkpoint

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_ffn
            + self.experts
            + self.norms
            + self.vision
            + self.mtp
        )


@frozen
class ModelSpec:
    """A model as the planners see it: layers, dimensions, dtype, quantization, parameters."""

    name: str
    architecture: str  # architectures[0] of the top-level config
    model_type: str  # model_type of the text config
    dtype: str  # "bfloat16", "float16", "float32"
    hidden_size: int
    vocab_size: int
    max_position_embeddings: int
    layers: tuple[Layer, ...]
    tie_word_embeddings: bool = False
    mtp_layers: int = 0  # draft layers shipped with the checkpoint
    mtp_source: str = ""  # "mtp_num_hidden_layers" | "num_nextn_predict_layers" | ""
    quant: QuantSpec = field(default_factory=QuantSpec)
    params: ParamCount = field(default_factory=ParamCount)
    mamba_ssm_dtype: str | None = None  # config's mamba_ssm_dtype, if it declares one
    is_multimodal: bool = False
    vision_config: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    text_config: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    raw_config: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    source: str = ""  # where the config came from (path, catalog id, hub id)
    # fields the engines' config readers refuse or read differently (model/readers.py):
    # Profile.check_model refuses what its readers refuse, every plan carries the notes
    issues: tuple[ConfigIssue, ...] = field(default=(), compare=False, hash=False)

    @property
    def notes(self) -> list[str]:
        """What the config's readers make of its doubtful fields, for the plan's warnings."""
        return config_notes(self.issues)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def layer_ids(self, *kinds: str) -> tuple[int, ...]:
        """The indices of the layers with a mixer of one of `kinds`; kept per kinds, since the
        engines' pool sizing asks for the same sets on every plan."""
        cache: dict[tuple[str, ...], tuple[int, ...]] = self.__dict__.setdefault("_ids_by_kind", {})
        ids = cache.get(kinds)
        if ids is None:
            ids = tuple(
                lyr.index for lyr in self.layers if any(m.kind in kinds for m in lyr.mixers)
            )
            cache[kinds] = ids
        return ids

    @cached_property
    def attention_layer_ids(self) -> tuple[int, ...]:
        return self.layer_ids("full_attention", "sliding_window", "mla")

    @cached_property
    def recurrent_layer_ids(self) -> tuple[int, ...]:
        return self.layer_ids(*RECURRENT_KINDS)

    @property
    def is_hybrid(self) -> bool:
        return bool(self.recurrent_layer_ids)

    def mixer(self, index: int) -> Mixer | None:
        return self.layers[index].mixer

    def attention_mixer(self, index: int) -> AttentionMixer:
        """The KV-caching mixer of layer `index` (one of attention_layer_ids / layer_ids)."""
        for m in self.layers[index].mixers:
            if isinstance(m, AttentionMixer):
                return m
        raise ValueError(f"layer {index} of {self.name} has no attention mixer")

    def recurrent_mixer(self, index: int) -> RecurrentMixer:
        """The state-keeping mixer of layer `index` (one of recurrent_layer_ids)."""
        for m in self.layers[index].mixers:
            if isinstance(m, RecurrentMixer):
                return m
        raise ValueError(f"layer {index} of {self.name} has no recurrent mixer")

    def first_attention(self) -> AttentionMixer | None:
        return self._first_attention

    @cached_property
    def _first_attention(self) -> AttentionMixer | None:
        for lyr in self.layers:
            for m in lyr.mixers:
                if isinstance(m, AttentionMixer):
                    return m
        return None

    def first_recurrent(self) -> RecurrentMixer | None:
        for lyr in self.layers:
            for m in lyr.mixers:
                if isinstance(m, RecurrentMixer):
                    return m
        return None

    def kind_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for lyr in self.layers:
            for part in (*lyr.mixers, lyr.ffn):
                if part is not None:
                    out[part.kind] = out.get(part.kind, 0) + 1
        return out
