"""The parallel layouts SGLang refuses while it builds the model, before any weight is read.

Read from the 0.5.9 and 0.5.23 wheels (sglang/srt/...), the intermediate releases' own files for
the three checks that changed (LayoutRules). Checks run in the engine's construction order
(engines/layout.py): the vision tower (Qwen3.5 builds `self.visual` first), the embedding,
then each decoder layer's mixer and feed-forward block; the first failure is the engine's
error. T is the layer's TP group: attn_tp (tp / attention-DP ranks) for attention and linear
attention, tp for MLPs and the embedding, tp / ep for the experts.
"""

from __future__ import annotations

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
    raise_value_error,
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

LINEAR = "sglang/srt/layers/linear.py"
MODELS = "sglang/srt/models"


@frozen
class LayoutRules:
    """What a release checks its own way (defaults: the newest release's code)."""

    # layers/vocab_parallel_embedding.py:VocabParallelEmbedding.__init__ pads the vocabulary to
    # 64 x tp when 64 does not split it (0.5.22 on); up to 0.5.21 only on CPU (`if _is_cpu and
    # ...`), so on GPUs divide(pad64(vocab), tp) must hold
    vocab_pads_to_tp: bool = True
    # models/kimi_linear.py: "KDA num_heads ({}) must be divisible by shard tp_size ({})"
    # (_get_kda_local_num_heads, 0.5.19 on); before, a bare assert in KimiDeltaAttention.__init__
    kda_value_error: bool = True


# models whose class asserts pp == 1 first thing in __init__ (a bare assert:
# `assert self.pp_group.is_first_rank and self.pp_group.is_last_rank`)
_NO_PP = {
    "Qwen3NextForCausalLM": "sglang/srt/models/qwen3_next.py:Qwen3NextForCausalLM.__init__",
    "Lfm2ForCausalLM": "sglang/srt/models/lfm2.py:Lfm2ForCausalLM.__init__",
    "Lfm2VlForConditionalGeneration": "sglang/srt/models/lfm2.py:Lfm2ForCausalLM.__init__",
}
# MoE blocks that raise "Tensor parallel size {} is greater than the number of experts {}."
_TP_LE_EXPERTS = {
    "DeepseekV3ForCausalLM": "sglang/srt/models/deepseek_v2.py:DeepseekV2MoE.__init__",
    "DeepseekV2ForCausalLM": "sglang/srt/models/deepseek_v2.py:DeepseekV2MoE.__init__",
    "Qwen3MoeForCausalLM": "sglang/srt/models/qwen3_moe.py:Qwen3MoeSparseMoeBlock.__init__",
    "Qwen3NextForCausalLM": "sglang/srt/models/qwen2_moe.py:Qwen2MoeSparseMoeBlock.__init__",
    "Qwen3_5MoeForConditionalGeneration": (
        "sglang/srt/models/qwen2_moe.py:Qwen2MoeSparseMoeBlock.__init__"
    ),
}


def check_layout(model: ModelSpec, sizes: ParallelSizes, rules: LayoutRules) -> None:
    """Raise the first check SGLang fails building `model` at `sizes` (EngineRejection)."""
    key = ("sglang", sizes.tp, sizes.attn_tp, sizes.ep, sizes.pp, rules)
    once_per_model(model, key, lambda: _walk(model, sizes, rules))


def _walk(model: ModelSpec, sizes: ParallelSizes, rules: LayoutRules) -> None:
    tp, attn_tp, ep, pp = sizes.tp, sizes.attn_tp, sizes.ep, sizes.pp
    archs = set(model.raw_config.get("architectures") or [model.architecture])
    for arch in archs & _NO_PP.keys():
        asserted(pp == 1, _NO_PP[arch], "pp_size == 1", f"--pp-size {pp}")
    # utils/common.py:make_layers: `assert not pp_size or num_hidden_layers >= pp_size`
    asserted(
        model.num_layers >= pp,
        "sglang/srt/utils/common.py:make_layers",
        "num_hidden_layers >= pp_size",
        f"{model.num_layers} layers, --pp-size {pp}",
    )
    _vision(model, attn_tp)
    if not rules.vocab_pads_to_tp:
        divisible(
            pad_to(model.vocab_size, 64), tp,
            "sglang/srt/layers/vocab_parallel_embedding.py:vocab_range_from_global_vocab_size",
            f"the vocabulary of {model.vocab_size} padded to 64, over --tp-size {tp}",
        )  # fmt: skip
    block = block_size(model)
    for layer in construction_order(model):
        for mixer in layer.mixers:
            _mixer(mixer, tp, attn_tp, rules)
        if isinstance(layer.ffn, DenseMLP):
            _dense(layer.ffn.intermediate_size, tp, block, "the MLP's intermediate_size")
        elif isinstance(layer.ffn, MoE):
            _moe(layer.ffn, archs, tp, ep, block)


def _vision(model: ModelSpec, attn_tp: int) -> None:
    """layers/attention/vision.py:VisionAttention.__init__ (Qwen3.5/3.6, Qwen3-VL: the tower is
    built before the language model): divide(num_heads, tp)."""
    heads = vision_heads(model)
    if heads is not None:
        divisible(
            heads, attn_tp, "sglang/srt/layers/attention/vision.py:VisionAttention.__init__",
            f"the vision tower's {heads} heads over --tp-size {attn_tp}",
        )  # fmt: skip


def _mixer(m: Mixer, tp: int, attn_tp: int, rules: LayoutRules) -> None:
    if isinstance(m, MLA):
        # models/deepseek_v2.py:DeepseekV2AttentionMLA.__init__ (also Kimi-Linear's MLA layers)
        asserted(
            m.num_heads % attn_tp == 0,
            "sglang/srt/models/deepseek_v2.py:DeepseekV2AttentionMLA.__init__",
            "num_heads % attn_tp_size == 0",
            f"{m.num_heads} heads, --tp-size {attn_tp}",
        )
    elif isinstance(m, FullAttention):
        _attention(m, attn_tp)
    elif isinstance(m, GatedDeltaNet):
        _gdn(GDNDims.of(m), attn_tp)
    elif isinstance(m, Mamba2):
        _mamba2(m, attn_tp, tp)
    elif isinstance(m, KDA):
        ok = m.num_heads % tp == 0
        if rules.kda_value_error:
            raise_value_error(
                ok,
                f"KDA num_heads ({m.num_heads}) must be divisible by shard tp_size ({tp})",
                "sglang/srt/models/kimi_linear.py:_get_kda_local_num_heads",
            )
        else:
            asserted(
                ok, "sglang/srt/models/kimi_linear.py:KimiDeltaAttention.__init__",
                "num_heads % tp_size == 0", f"{m.num_heads} KDA heads, --tp-size {tp}",
            )  # fmt: skip
    elif isinstance(m, ShortConv):
        # models/lfm2.py:Lfm2ShortConv.__init__: in_proj MergedColumnParallelLinear([hidden] x 3)
        _merged(m.hidden_size, tp, "the short convolution's hidden_size")


def _attention(m: FullAttention, t: int) -> None:
    # models/llama.py:LlamaAttention.__init__ and the same block in qwen2/qwen3/qwen3_moe/
    # mixtral/gpt_oss/nemotron_h/qwen3_next/qwen3_5
    cite = f"{MODELS}/llama.py:LlamaAttention.__init__ (and its copies)"
    attention_heads(m.num_heads, m.num_kv_heads, t, cite)


def _gdn(d: GDNDims, t: int) -> None:
    """models/qwen3_next.py:Qwen3GatedDeltaNet.__init__ and qwen3_5.py:Qwen3_5GatedDeltaNet:
    no head assert; conv1d ColumnParallelLinear(conv_dim) divides first, then the merged input
    projections (key, key, value dims; the b/a projections of num_v_heads) and out_proj."""
    divisible(
        d.conv_dim, t, f"{LINEAR}:ColumnParallelLinear.__init__",
        f"Gated DeltaNet conv1d: conv_dim 2 x {d.key_dim} + {d.value_dim} over --tp-size {t}",
    )  # fmt: skip
    for size, what in ((d.key_dim, "key_dim"), (d.value_dim, "value_dim"),
                       (d.num_v_heads, "num_v_heads")):  # fmt: skip
        _merged(size, t, f"the Gated DeltaNet input projection's {what}")


def _mamba2(m: Mamba2, attn_tp: int, tp: int) -> None:
    """models/nemotron_h.py:NemotronHMambaDecoderLayer.__init__ evaluates mamba2_cache_params
    (configs/mamba_utils.py:Mamba2StateShape.create) before the mixer; then
    layers/attention/mamba/mamba.py:MambaMixer2.__init__ asserts with messages."""
    groups = m.n_groups
    if groups % attn_tp:
        # extra_groups_for_head_shards returns tp - ngroups (negative when ngroups > tp): the
        # padded count is tp, as written
        groups = attn_tp
    conv_dim = m.intermediate_size + 2 * groups * m.state_size
    cite = "sglang/srt/configs/mamba_utils.py:Mamba2StateShape.create"
    divisible(conv_dim, attn_tp, cite, f"the Mamba2 conv state's {conv_dim} channels")
    divisible(m.num_heads, attn_tp, cite, f"the Mamba2 state's {m.num_heads} heads")
    mamba2_mixer(m.num_heads, m.n_groups, tp,
                 "sglang/srt/layers/attention/mamba/mamba.py:MambaMixer2.__init__")  # fmt: skip


def _merged(size: int, t: int, what: str) -> None:
    merged(size, t, what, f"{LINEAR}:MergedColumnParallelLinear.__init__")


def _dense(inter: int, tp: int, block: tuple[int, int] | None, what: str) -> None:
    """gate_up_proj MergedColumnParallelLinear([inter] x 2), down_proj RowParallelLinear(inter);
    a block-FP8 checkpoint's partitions must hold whole 128-blocks
    (layers/quantization/fp8.py:Fp8LinearMethod.validate_block_quant_shapes)."""
    _merged(inter, tp, what)
    if block is not None and tp > 1:
        block_n, block_k = block
        part = inter // tp
        cite = "sglang/srt/layers/quantization/fp8.py:Fp8LinearMethod.validate_block_quant_shapes"
        raise_value_error(
            part % block_n == 0,
            f"Weight output_partition_size = {part} is not divisible by weight quantization "
            f"block_n = {block_n}.",
            cite,
        )
        fp8_row_input(part, block_k, cite)


def _moe(moe: MoE, archs: set[str], tp: int, ep: int, block: tuple[int, int] | None) -> None:
    for arch in archs & _TP_LE_EXPERTS.keys():
        tp_le_experts(tp, moe.num_experts, _TP_LE_EXPERTS[arch])
    fused = "sglang/srt/layers/moe/fused_moe_triton/layer.py:FusedMoE.__init__"
    asserted(moe.num_experts % ep == 0, fused, "num_experts % ep_size == 0",
             f"{moe.num_experts} experts, --ep-size {ep}")  # fmt: skip
    moe_tp = max(1, tp // ep)
    inter = moe.expert_intermediate_size
    asserted(inter % moe_tp == 0, fused, "intermediate_size % moe_tp_size == 0",
             f"moe_intermediate_size {inter}, moe TP {moe_tp} = --tp-size {tp} / --ep-size {ep}")  # fmt: skip
    if block is not None:
        fp8_moe_blocks(inter // moe_tp, block, moe_tp > 1,
                       "sglang/srt/layers/quantization/fp8.py:Fp8MoEMethod.create_weights")  # fmt: skip
    if moe.num_shared_experts and moe.shared_intermediate_size:
        # DeepseekV2MLP / Qwen2MoeMLP / NemotronHMLP of n_shared x the shared size, over tp
        shared = moe.num_shared_experts * moe.shared_intermediate_size
        _dense(shared, tp, block, "the shared experts' intermediate_size")


# check_server_args with --pp-size > 1 and speculative decoding (the overlap schedule is
# already off: _handle_pipeline_parallelism turns it off first)
_PP_SPEC_TEXT = {
    # server_args.py:ServerArgs.check_server_args (0.5.9, 0.5.10)
    "refused_mixed_chunk": "Pipeline parallelism is not compatible with overlap schedule, "
    "speculative decoding, mixed chunked prefill.",
    # server_args.py:check_server_args (0.5.11-0.5.18), arg_groups/validation_hook.py (0.5.19,
    # 0.5.20, non-NPU)
    "refused": "Pipeline parallelism is not compatible with overlap schedule, speculative decoding",
}


def check_pp_speculative(v: dict[str, object], env: dict[str, str], mode: str) -> None:
    """PP with speculative decoding, as the release's check_server_args asserts (mode: the
    release's Rules.pp_spec; "prefill_only" is arg_groups/validation_hook.py:
    check_pipeline_parallel_compat, 0.5.21 on)."""
    if int(str(v.get("pp_size") or 1)) <= 1:
        return
    algo = v.get("speculative_algorithm")
    if mode in _PP_SPEC_TEXT:
        if algo is not None or (mode == "refused_mixed_chunk" and v.get("enable_mixed_chunk")):
            raise EngineRejection(f"AssertionError: {_PP_SPEC_TEXT[mode]}")
        return
    if algo is None:
        return
    if str(algo).upper() not in ("EAGLE", "NEXTN") or v.get("enable_multi_layer_eagle"):
        raise EngineRejection(
            "AssertionError: Pipeline parallelism currently only supports EAGLE "
            "(non-multi-layer) speculative decoding"
        )
    if env.get("SGLANG_ENABLE_PP_SPEC", "").lower() in ("1", "true"):
        return
    if v.get("disaggregation_mode") != "prefill":
        raise EngineRejection(
            "AssertionError: PP + speculative decoding (MTP) is only supported on prefill nodes "
            "(disaggregation-mode=prefill)"
        )
