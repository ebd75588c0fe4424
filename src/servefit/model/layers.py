"""Layer specs that know their own memory cost.

Each token mixer is a small frozen dataclass. Attention-like mixers say their KV bytes per
token (per attention-TP rank); recurrent mixers (Gated DeltaNet, Mamba2, KDA, short conv,
lightning attention) say their state bytes per request. Engines call these methods rather
than re-deriving shapes, so a new family is one new spec here plus its parser.

The recurrent state shapes follow SGLang's `sglang/srt/configs/mamba_utils.py`
(`Mamba2StateShape.create`, `KimiLinearStateShape.create`), identical in 0.5.9 and 0.5.23.
"""

from __future__ import annotations

from functools import cached_property
from math import prod

from servefit.frozen import frozen


def _divide(n: int, d: int) -> int:
    # sglang/srt/distributed/utils.py:divide asserts exact division.
    from servefit.errors import EngineRejection

    if d <= 0 or n % d != 0:
        raise EngineRejection(f"{n} is not divisible by the attention TP size {d}")
    return n // d


@frozen
class FullAttention:
    """Softmax attention with a KV cache (MHA or GQA)."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int

    kind = "full_attention"
    has_kv = True
    has_state = False

    def kv_heads_per_rank(self, attn_tp: int) -> int:
        # sglang/srt/configs/model_config.py:get_num_kv_heads = max(1, total // tp)
        return max(1, self.num_kv_heads // attn_tp)

    def kv_elems_per_token(self, attn_tp: int) -> int:
        """K + V elements per token for this layer on one attention-TP rank."""
        return self.kv_heads_per_rank(attn_tp) * (self.head_dim + self.v_head_dim)


@frozen
class SlidingWindowAttention(FullAttention):
    """Attention restricted to a window; engines may give it a smaller pool."""

    window: int = 0

    kind = "sliding_window"


@frozen
class MLA:
    """Multi-head latent attention (DeepSeek, Kimi): one compressed latent per token, not TP-split."""

    num_heads: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int

    kind = "mla"
    has_kv = True
    has_state = False

    def kv_elems_per_token(self, attn_tp: int) -> int:
        # sglang .../model_runner_kv_cache_mixin.py:get_cell_size_per_token (use_mla_backend branch)
        return self.kv_lora_rank + self.qk_rope_head_dim


@frozen
class StateShapes:
    """Per-layer, per-request recurrent state shapes on one rank (elements)."""

    conv: tuple[tuple[int, ...], ...]
    temporal: tuple[int, ...]

    @property
    def conv_elems(self) -> int:
        return sum(prod(s) for s in self.conv)

    @property
    def temporal_elems(self) -> int:
        return prod(self.temporal) if self.temporal else 0

    def bytes(self, conv_bytes: int, ssm_bytes: int) -> int:
        return self.conv_elems * conv_bytes + self.temporal_elems * ssm_bytes


@frozen
class Mamba2:
    """Mamba2 SSM mixer (Nemotron-H, Granite-4.0-H, Falcon-H1, Bamba, Zamba2)."""

    num_heads: int
    head_dim: int
    n_groups: int
    state_size: int
    conv_kernel: int
    intermediate_size: int

    kind = "mamba2"
    has_kv = False
    has_state = True

    def state_shapes(self, tp: int) -> StateShapes:
        # sglang/srt/configs/mamba_utils.py:Mamba2StateShape.create
        n_groups = self.n_groups
        if n_groups % tp != 0:
            # extra_groups_for_head_shards: ngroups % tp != 0 -> tp - ngroups
            n_groups += tp - n_groups
        conv_dim = self.intermediate_size + 2 * n_groups * self.state_size
        conv = (_divide(conv_dim, tp), self.conv_kernel - 1)
        temporal = (_divide(self.num_heads, tp), self.head_dim, self.state_size)
        return StateShapes(conv=(conv,), temporal=temporal)


@frozen
class GatedDeltaNet(Mamba2):
    """Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5/3.6).

    SGLang maps it onto Mamba2StateShape (sglang/srt/configs/qwen3_next.py:
    Qwen3NextConfig.mamba2_cache_params): intermediate = v_head_dim * num_v_heads,
    n_groups = num_k_heads, num_heads = num_v_heads, head_dim = v_head_dim,
    state_size = k_head_dim, conv_kernel = linear_conv_kernel_dim.
    """

    kind = "gated_deltanet"

    @classmethod
    def from_heads(
        cls, num_k_heads: int, num_v_heads: int, k_head_dim: int, v_head_dim: int, conv_kernel: int
    ) -> GatedDeltaNet:
        return cls(
            num_heads=num_v_heads,
            head_dim=v_head_dim,
            n_groups=num_k_heads,
            state_size=k_head_dim,
            conv_kernel=conv_kernel,
            intermediate_size=v_head_dim * num_v_heads,
        )


@frozen
class KDA:
    """Kimi Delta Attention (Kimi-Linear)."""

    num_heads: int
    head_dim: int
    conv_kernel: int

    kind = "kda"
    has_kv = False
    has_state = True

    def state_shapes(self, tp: int) -> StateShapes:
        # sglang/srt/configs/mamba_utils.py:KimiLinearStateShape.create:
        # conv q, k, v each (K-1, heads*dim/tp); temporal (heads/tp, dim, dim)
        proj = _divide(self.num_heads * self.head_dim, tp)
        conv = ((self.conv_kernel - 1, proj),) * 3
        temporal = (_divide(self.num_heads, tp), self.head_dim, self.head_dim)
        return StateShapes(conv=conv, temporal=temporal)


@frozen
class ShortConv:
    """LFM2 gated short convolution: a conv window only, no SSM state."""

    hidden_size: int
    l_cache: int

    kind = "short_conv"
    has_kv = False
    has_state = True

    def state_shapes(self, tp: int) -> StateShapes:
        # sglang/srt/configs/lfm2.py:Lfm2Config.mamba2_cache_params:
        # conv_state_shape = (hidden_size // tp, conv_L_cache - 1); temporal (0, 0, 0)
        return StateShapes(conv=((_divide(self.hidden_size, tp), self.l_cache - 1),), temporal=())


@frozen
class LightningAttention:
    """MiniMax lightning (linear) attention: a (heads, d, d) state per request."""

    num_heads: int
    head_dim: int

    kind = "lightning"
    has_kv = False
    has_state = True

    def state_shapes(self, tp: int) -> StateShapes:
        return StateShapes(
            conv=(), temporal=(_divide(self.num_heads, tp), self.head_dim, self.head_dim)
        )


# Mixers that keep a KV cache (has_kv) and those that keep a per-request state (has_state).
AttentionMixer = FullAttention | SlidingWindowAttention | MLA
RecurrentMixer = Mamba2 | GatedDeltaNet | KDA | ShortConv | LightningAttention
Mixer = AttentionMixer | RecurrentMixer
RECURRENT_KINDS = ("gated_deltanet", "mamba2", "kda", "short_conv", "lightning")


@frozen
class DenseMLP:
    intermediate_size: int
    kind = "mlp"


@frozen
class MoE:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0
    kind = "moe"


FFN = DenseMLP | MoE | None


@frozen
class Layer:
    """One decoder layer: a token mixer and (optionally) a feed-forward block."""

    index: int
    mixer: Mixer | None
    ffn: FFN = None
    # A second token mixer running side by side with `mixer` in the same decoder layer:
    # Falcon-H1 (attention + Mamba2 in every layer; SGLang counts each layer as both a mamba
    # and a full-attention layer, sglang/srt/configs/falcon_h1.py) and Zamba2 "hybrid" layers
    # (Mamba2 + the shared attention block). None for every other family.
    parallel_mixer: Mixer | None = None

    @cached_property
    def mixers(self) -> tuple[Mixer, ...]:
        """The layer's token mixers (0, 1 or 2); kept, since every plan walks the layers."""
        return tuple(m for m in (self.mixer, self.parallel_mixer) if m is not None)
