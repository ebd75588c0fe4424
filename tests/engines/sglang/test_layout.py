"""The layouts SGLang cannot build a model in (engines/sglang/layout.py). Expected texts are the
engine's own, read in the 0.5.9 and 0.5.23 wheels and, for the three checks that changed, in
every release between (sglang/srt/... paths in each test); the numbers are the catalog configs'
fields, worked by hand in the comments."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servefit._plan.planner import PlanRequest, plan, resolve_model
from servefit.engines import registry
from servefit.engines.base import ParallelSizes
from servefit.errors import EngineRejection
from servefit.model.inventory import build_model_spec
from tests.seedcase import SEED

QWEN36 = "Qwen/Qwen3.6-27B"
NEMOTRON = "nvidia/Nemotron-H-56B-Base-8K"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"


def refusal(version: str, model: str, tp: int, **args: int) -> str | None:
    p = plan(PlanRequest(model=model, gpu="H200", engine=f"sglang=={version}",
                         args={"tp_size": tp, **args}))  # fmt: skip
    return p.error


def sizes(tp: int, pp: int = 1, ep: int = 1) -> ParallelSizes:
    return ParallelSizes(tp=tp, pp=pp, dp=1, ep=ep, world=tp * pp, attn_tp=tp)


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
@pytest.mark.parametrize("tp", [3, 6])
def test_qwen36_vision_tower_is_built_first(version, tp):
    """vision_config.num_heads 16: layers/attention/vision.py:VisionAttention.__init__ divides
    them before the language model exists, in both releases."""
    assert refusal(version, QWEN36, tp) == (
        f"AssertionError: 16 is not divisible by {tp} (sglang/srt/layers/attention/vision.py:"
        f"VisionAttention.__init__: the vision tower's 16 heads over --tp-size {tp})"
    )


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
@pytest.mark.parametrize("tp", [4, 8])
def test_qwen36_splits_at_4_and_8(version, tp):
    """16 vision heads, 4304 / tp, 248320 / tp, GDN conv_dim 2 x 2048 + 6144 = 10240 / tp,
    24 heads, 4 KV heads (replicated x2 at 8), intermediate 17408 / tp: all whole."""
    m = resolve_model(QWEN36)
    registry.profile("sglang", version).check_model(m, sizes(tp))


def test_nemotron_vocabulary_until_0_5_21_then_the_mamba_state():
    """vocab 131072 = 2^17: not divisible by 3. Up to 0.5.21 vocab_parallel_embedding.py pads
    to 64 x tp only on CPU, so the embedding fails first; 0.5.22 pads on GPUs too, and layer 0
    (Mamba2) evaluates configs/mamba_utils.py:Mamba2StateShape.create: 8 groups pad to tp = 3,
    conv_dim 256 x 64 + 2 x 3 x 256 = 17920, not divisible by 3."""
    vocab = "AssertionError: 131072 is not divisible by 3 (sglang/srt/layers/"
    assert refusal("0.5.9", NEMOTRON, 3).startswith(vocab)
    assert refusal("0.5.21", NEMOTRON, 3).startswith(vocab)
    for version in ("0.5.22", "0.5.23"):
        assert refusal(version, NEMOTRON, 3).startswith(
            "AssertionError: 17920 is not divisible by 3 (sglang/srt/configs/mamba_utils.py:"
            "Mamba2StateShape.create"
        )
    # TP 6: groups pad to 6, 16384 + 2 x 6 x 256 = 19456, not divisible by 6
    assert refusal("0.5.23", NEMOTRON, 6).startswith("AssertionError: 19456 is not divisible by 6")


def test_deepseek_mla_heads_are_a_bare_assert():
    """128 heads over 3: models/deepseek_v2.py:DeepseekV2AttentionMLA.__init__ asserts with no
    message (0.5.23, whose embedding pads 129280); 0.5.9 fails at the embedding first."""
    assert refusal("0.5.23", DEEPSEEK, 3) == (
        "AssertionError (a bare assert, no message): sglang/srt/models/deepseek_v2.py:"
        "DeepseekV2AttentionMLA.__init__ asserts num_heads % attn_tp_size == 0 "
        "(128 heads, --tp-size 3)"
    )
    assert refusal("0.5.9", DEEPSEEK, 3).startswith("AssertionError: 129280 is not divisible by 3")
    # TP 16: 128 / 16 heads, 18432 / 16 = 1152 = 9 x 128, experts 2048 / 16 = 128: one block
    registry.profile("sglang", "0.5.23").check_model(resolve_model(DEEPSEEK), sizes(16))


def _kimi_linear():
    m = resolve_model("transformers-defaults/kimi_linear")  # KDA 32 heads, vocab 163840
    arch = "KimiLinearForCausalLM"
    return replace(m, architecture=arch, raw_config={**m.raw_config, "architectures": [arch]})


def test_kda_heads_bare_assert_until_0_5_18_then_a_value_error():
    """TP 5 splits the vocabulary (163840 = 2^15 x 5) but not the 32 KDA heads of layer 0.
    models/kimi_linear.py: 0.5.18 KimiDeltaAttention.__init__ `assert self.num_heads %
    self.tp_size == 0`; 0.5.19 _get_kda_local_num_heads raises a ValueError."""
    m = _kimi_linear()
    with pytest.raises(EngineRejection) as old:
        registry.profile("sglang", "0.5.18").check_model(m, sizes(5))
    assert str(old.value).startswith("AssertionError (a bare assert, no message): sglang/srt/"
                                     "models/kimi_linear.py:KimiDeltaAttention.__init__")  # fmt: skip
    with pytest.raises(EngineRejection) as new:
        registry.profile("sglang", "0.5.19").check_model(m, sizes(5))
    assert str(new.value) == (
        "ValueError: KDA num_heads (32) must be divisible by shard tp_size (5) "
        "(sglang/srt/models/kimi_linear.py:_get_kda_local_num_heads)"
    )


def test_block_fp8_experts_must_hold_whole_blocks():
    """Qwen3-30B-A3B with its FP8 checkpoint's quantization_config (weight_block_size
    [128, 128]): moe_intermediate_size 768 / TP 8 = 96, not a multiple of 128
    (layers/quantization/fp8.py:Fp8MoEMethod.create_weights); TP 4: 192, not either; TP 2: 384."""
    m = resolve_model("Qwen/Qwen3-30B-A3B")
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}
    fp8 = build_model_spec(
        {**m.raw_config, "quantization_config": quant}, name="Qwen3-30B-FP8", source="test"
    )
    profile = registry.profile("sglang", "0.5.23")
    with pytest.raises(EngineRejection) as exc:
        profile.check_model(fp8, sizes(8))
    assert str(exc.value).startswith(
        "ValueError: The output_size of gate's and up's weight = 96 is not divisible by weight "
        "quantization block_n = 128."
    )
    profile.check_model(fp8, sizes(2))
    profile.check_model(m, sizes(8))  # bf16: no blocks to hold


def test_pp_needs_layers_and_refuses_qwen3_next():
    """utils/common.py:make_layers asserts num_hidden_layers >= pp_size; models/qwen3_next.py:
    Qwen3NextForCausalLM.__init__ asserts a single pipeline stage."""
    nxt = refusal("0.5.23", "Qwen/Qwen3-Next-80B-A3B-Thinking", 2, pp_size=2)
    assert nxt.startswith("AssertionError (a bare assert, no message): sglang/srt/models/"
                          "qwen3_next.py:Qwen3NextForCausalLM.__init__ asserts pp_size == 1")  # fmt: skip
    m = resolve_model("Qwen/Qwen3-8B")  # 36 layers
    with pytest.raises(EngineRejection, match=r"36 layers, --pp-size 40"):
        registry.profile("sglang", "0.5.23").check_model(m, sizes(1, pp=40))


@pytest.mark.parametrize(
    ("version", "text"),
    [
        # server_args.py:ServerArgs.check_server_args
        ("0.5.9", "Pipeline parallelism is not compatible with overlap schedule, speculative "
                  "decoding, mixed chunked prefill."),
        ("0.5.10", "Pipeline parallelism is not compatible with overlap schedule, speculative "
                   "decoding, mixed chunked prefill."),
        ("0.5.11", "Pipeline parallelism is not compatible with overlap schedule, speculative "
                   "decoding"),
        # arg_groups/validation_hook.py:check_server_args (non-NPU branch)
        ("0.5.20", "Pipeline parallelism is not compatible with overlap schedule, speculative "
                   "decoding"),
        # arg_groups/validation_hook.py:check_pipeline_parallel_compat
        ("0.5.21", "PP + speculative decoding (MTP) is only supported on prefill nodes "
                   "(disaggregation-mode=prefill)"),
        ("0.5.23", "PP + speculative decoding (MTP) is only supported on prefill nodes "
                   "(disaggregation-mode=prefill)"),
    ],
)  # fmt: skip
def test_pp_with_mtp_is_refused_at_launch(version, text):
    """The seed's MTP launch on two pipeline stages (radix cache off, which speculative
    decoding needs in these releases): every release refuses it, in its words."""
    p = plan(PlanRequest(model=QWEN36, gpu="A6000", engine=f"sglang=={version}",
                         args={**SEED, "tp_size": 1, "pp_size": 2, "disable_radix_cache": True}))  # fmt: skip
    assert p.verdict == "fail" and p.error == f"AssertionError: {text}"


def test_pp_spec_env_lets_0_5_23_through():
    """SGLANG_ENABLE_PP_SPEC=1 allows PP with EAGLE (NEXTN is its alias) off a prefill node."""
    p = plan(PlanRequest(model=QWEN36, gpu="A6000", engine="sglang==0.5.23",
                         args={**SEED, "tp_size": 1, "pp_size": 2},
                         env={"SGLANG_ENABLE_PP_SPEC": "1"}))  # fmt: skip
    assert not (p.error or "").startswith("AssertionError: PP + speculative")
