"""The parallel layouts vLLM's worker refuses while it builds the model, before any weight is
read (after the config-time heads check, common.check_heads_divisible).

Read from the 0.33.0 wheel (vllm/...); the same classes and texts are in 0.10.0, 0.20.0,
0.24.0 and 0.32.0 except the one switch LayoutRules names. Checks run in the worker's
construction order (engines/layout.py): the vision tower (Qwen3.5/3.6 build `self.visual`
first, whatever --limit-mm-per-prompt says), the embedding, then each decoder layer's mixer and
feed-forward block. T is the tensor-parallel size; the experts' intermediate size is split over
tp x dp without --enable-expert-parallel and not at all with it
(fused_moe/config.py:FusedMoEParallelConfig.make).
"""

from __future__ import annotations

from math import gcd

from servefit.engines.base import ParallelSizes
from servefit.engines.layout import (
    GDNDims,
    asserted,
    attention_heads,
    block_size,
    construction_order,
    divisible,
    fp8_moe_blocks,
    fp8_row_input,
    mamba2_mixer,
    merged,
    once_per_model,
    pad_to,
    tp_le_experts,
    vision_heads,
)
from servefit.errors import EngineRejection
from servefit.frozen import frozen
from servefit.model.layers import (
    KDA,
    MLA,
    DenseMLP,
    FullAttention,
    GatedDeltaNet,
    Mamba2,
    Mixer,
    MoE,
    ShortConv,
)
from servefit.model.spec import ModelSpec

LINEAR = "vllm/model_executor/layers/linear.py"
MODELS = "vllm/model_executor/models"


@frozen
class LayoutRules:
    """What a release checks its own way (defaults: the newest release's code)."""

    # fused_moe/oracle/fp8.py:refine_fp8_moe_block_shape: a block-FP8 expert partition that
    # does not hold whole blocks gets finer scales (gcd >= 32) instead of the ValueError of
    # Fp8MoEMethod.create_weights (0.32.0 on; 0.24.0 and before always raise)
    fp8_moe_block_refine: bool = True


# models whose MoE block raises "Tensor parallel size {} is greater than the number of experts"
_TP_LE_EXPERTS = {
    "Qwen3MoeForCausalLM": f"{MODELS}/qwen3_moe.py:Qwen3MoeSparseMoeBlock.__init__",
    "Qwen3NextForCausalLM": f"{MODELS}/qwen3_next.py:Qwen3NextSparseMoeBlock.__init__",
    "Qwen3_5MoeForConditionalGeneration": (
        f"{MODELS}/qwen3_next.py:Qwen3NextSparseMoeBlock.__init__"
    ),
}
# Gated DeltaNet with Qwen3-Next's interleaved in_proj_qkvz / in_proj_ba (one ColumnParallel
# each: divide); Qwen3.5's are MergedColumnParallelLinear (bare asserts)
_GDN_INTERLEAVED = {"Qwen3NextForCausalLM"}


def check_layout(model: ModelSpec, sizes: ParallelSizes, rules: LayoutRules) -> None:
    """Raise the first check vLLM's worker fails building `model` at `sizes`."""
    key = ("vllm", sizes.tp, sizes.pp, sizes.dp, sizes.ep, rules)
    once_per_model(model, key, lambda: _walk(model, sizes, rules))


def _walk(model: ModelSpec, sizes: ParallelSizes, rules: LayoutRules) -> None:
    tp = sizes.tp
    archs = set(model.raw_config.get("architectures") or [model.architecture])
    _vision(model, archs, tp)
    # vocab_parallel_embedding.py:vocab_range_from_global_vocab_size: pad to 64, then divide
    divisible(
        pad_to(model.vocab_size, 64), tp,
        "vllm/model_executor/layers/vocab_parallel_embedding.py:VocabParallelEmbedding.__init__",
        f"the vocabulary of {model.vocab_size} padded to 64, over --tensor-parallel-size {tp}",
    )  # fmt: skip
    block = block_size(model)
    gpt_oss = "GptOssForCausalLM" in archs
    for layer in construction_order(model):
        for mixer in layer.mixers:
            _mixer(mixer, tp, interleaved=bool(archs & _GDN_INTERLEAVED), divide_only=gpt_oss)
        if isinstance(layer.ffn, DenseMLP):
            _dense(layer.ffn.intermediate_size, tp, block, "the MLP's intermediate_size")
        elif isinstance(layer.ffn, MoE):
            _moe(layer.ffn, model, archs, sizes, block, rules)


def _vision(model: ModelSpec, archs: set[str], tp: int) -> None:
    heads = vision_heads(model)
    if heads is None:
        return
    if archs & {"Lfm2VlForConditionalGeneration", "Lfm2VLForConditionalGeneration"}:
        asserted(
            heads % tp == 0, f"{MODELS}/lfm2_siglip2.py:Siglip2Attention.__init__",
            "self.num_heads % tp_size == 0", f"the vision tower's {heads} heads, TP {tp}",
        )  # fmt: skip
        return
    # qwen2_5_vl.py:Qwen2_5_VisionAttention.__init__ (Qwen3.5/3.6 and Qwen3-VL blocks):
    # dist_utils.divide(num_heads, tp); --mm-encoder-tp-mode data would build it unsplit
    divisible(
        heads, tp, f"{MODELS}/qwen2_5_vl.py:Qwen2_5_VisionAttention.__init__",
        f"the vision tower's {heads} heads over --tensor-parallel-size {tp}",
    )  # fmt: skip


def _mixer(m: Mixer, tp: int, *, interleaved: bool, divide_only: bool) -> None:
    if isinstance(m, MLA):
        asserted(
            m.num_heads % tp == 0, f"{MODELS}/deepseek_v2.py:DeepseekV2MLAAttention.__init__",
            "num_heads % tp_size == 0", f"{m.num_heads} heads, TP {tp}",
        )  # fmt: skip
    elif isinstance(m, FullAttention):
        _attention(m, tp, divide_only)
    elif isinstance(m, GatedDeltaNet):
        _gdn(GDNDims.of(m), tp, interleaved)
    elif isinstance(m, Mamba2):
        _mamba2(m, tp)
    elif isinstance(m, KDA):
        asserted(
            m.num_heads % tp == 0,
            "vllm/model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py:"
            "KimiGatedDeltaNetAttention.__init__",
            "num_heads % tp_size == 0", f"{m.num_heads} KDA heads, TP {tp}",
        )  # fmt: skip
    elif isinstance(m, ShortConv):
        # layers/mamba/short_conv.py:ShortConv.__init__: conv ColumnParallelLinear(conv_dim)
        divisible(
            m.hidden_size, tp, "vllm/model_executor/layers/mamba/short_conv.py:ShortConv.__init__",
            f"the short convolution's {m.hidden_size} channels over TP {tp}",
        )  # fmt: skip


def _attention(m: FullAttention, tp: int, divide_only: bool) -> None:
    """The model classes' asserts before QKVParallelLinear (llama.py:LlamaAttention.__init__
    and its copies in qwen2/qwen3/qwen3_moe/mixtral/qwen3_next/nemotron_h/lfm2); gpt_oss.py
    has none, so QKVParallelLinear.__init__'s divide() speaks."""
    kv = m.num_kv_heads
    if divide_only:
        qkv = f"{LINEAR}:QKVParallelLinear.__init__"
        if tp >= kv:
            divisible(tp, kv, qkv, f"TP {tp} replicating {kv} KV heads")
        else:
            divisible(kv, tp, qkv, f"{kv} KV heads over TP {tp}")
        return
    # the heads part is the config-time check's (common.check_heads_divisible): already whole
    attention_heads(
        m.num_heads, kv, tp, f"{MODELS}/llama.py:LlamaAttention.__init__ (and its copies)"
    )


def _gdn(d: GDNDims, tp: int, interleaved: bool) -> None:
    """layers/mamba/gdn/qwen_gdn_linear_attn.py:QwenGatedDeltaNetAttention.__init__: conv1d
    ColumnParallelLinear(conv_dim), in_proj_qkvz, in_proj_ba, then A_log divide(num_v_heads)."""
    col = f"{LINEAR}:ColumnParallelLinear.__init__"
    divisible(d.conv_dim, tp, col, f"Gated DeltaNet conv1d: conv_dim {d.conv_dim} over TP {tp}")
    if interleaved:
        divisible(2 * d.key_dim + 2 * d.value_dim, tp, col, "Gated DeltaNet in_proj_qkvz")
        divisible(2 * d.num_v_heads, tp, col, "Gated DeltaNet in_proj_ba")
    else:
        for size, what in ((d.key_dim, "key_dim"), (d.value_dim, "value_dim"),
                           (d.num_v_heads, "num_v_heads")):  # fmt: skip
            _merged(size, tp, f"the Gated DeltaNet input projection's {what}")
    divisible(
        d.num_v_heads, tp,
        "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:"
        "QwenGatedDeltaNetAttention.__init__",
        f"A_log: {d.num_v_heads} value heads over TP {tp}",
    )  # fmt: skip


def _mamba2(m: Mamba2, tp: int) -> None:
    mamba2_mixer(m.num_heads, m.n_groups, tp,
                 "vllm/model_executor/layers/mamba/mamba_mixer2.py:MambaMixer2.__init__")  # fmt: skip
    if m.intermediate_size % tp:
        raise EngineRejection(
            "AssertionError: Tensor parallel world size must divide hidden size. (vllm/"
            "model_executor/layers/mamba/mamba_mixer2.py:Mixer2RMSNormGated.__init__)"
        )


def _merged(size: int, tp: int, what: str) -> None:
    merged(size, tp, what, f"{LINEAR}:MergedColumnParallelLinear.__init__")


def _dense(inter: int, tp: int, block: tuple[int, int] | None, what: str) -> None:
    """gate_up_proj MergedColumnParallelLinear([inter] x 2), down_proj RowParallelLinear(inter).
    Block FP8: only the row-parallel input is validated (fp8_utils.py:validate_fp8_block_shape;
    a merged layer whose shards miss the blocks sets allow_fp8_block_shape_mismatch)."""
    _merged(inter, tp, what)
    if block is not None and tp > 1:
        fp8_row_input(inter // tp, block[1],
                      "vllm/model_executor/layers/quantization/utils/fp8_utils.py:"
                      "validate_fp8_block_shape")  # fmt: skip


def _moe(
    moe: MoE,
    model: ModelSpec,
    archs: set[str],
    sizes: ParallelSizes,
    block: tuple[int, int] | None,
    rules: LayoutRules,
) -> None:
    tp = sizes.tp
    for arch in archs & _TP_LE_EXPERTS.keys():
        tp_le_experts(tp, moe.num_experts, _TP_LE_EXPERTS[arch])
    if "GptOssForCausalLM" in archs:
        world = tp * sizes.pp * sizes.dp
        asserted(
            moe.expert_intermediate_size % world == 0, f"{MODELS}/gpt_oss.py:MLPBlock.__init__",
            "config.intermediate_size % world_size == 0",
            f"{moe.expert_intermediate_size}, world size {world} = TP x PP x DP",
        )  # fmt: skip
    moe_tp = 1 if sizes.ep > 1 else tp * sizes.dp
    inter = moe.expert_intermediate_size
    asserted(
        inter % moe_tp == 0,
        "vllm/model_executor/layers/fused_moe/config.py:FusedMoEConfig.__post_init__",
        "self.intermediate_size % tp_size == 0",
        f"moe_intermediate_size {inter}, expert TP {moe_tp}",
    )
    if block is not None:
        part = inter // moe_tp
        refined = rules.fp8_moe_block_refine and gcd(*block, part, model.hidden_size) >= 32
        if not refined:
            cite = "vllm/model_executor/layers/quantization/fp8.py:Fp8MoEMethod.create_weights"
            fp8_moe_blocks(part, block, tp > 1, cite)
    if moe.num_shared_experts and moe.shared_intermediate_size:
        shared = moe.num_shared_experts * moe.shared_intermediate_size
        _dense(shared, tp, block, "the shared experts' intermediate_size")
