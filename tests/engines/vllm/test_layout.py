"""The layouts vLLM's worker cannot build a model in (engines/vllm/layout.py), after the
config-time heads check. Expected texts are the engine's own, read in the 0.33.0 wheel (the same
in 0.10.0, 0.20.0, 0.24.0 and 0.32.0 except the FP8-MoE refinement of 0.29.0, read in the
0.28.0 and 0.29.0 wheels); the numbers are the catalog configs' fields, worked by hand."""

from __future__ import annotations

import pytest

from servefit._plan.planner import PlanRequest, plan, resolve_model
from servefit.engines import registry
from servefit.engines.base import ParallelSizes
from servefit.errors import EngineRejection
from servefit.model.inventory import build_model_spec

QWEN36 = "Qwen/Qwen3.6-27B"


def refusal(version: str, model: str, tp: int) -> str | None:
    p = plan(PlanRequest(model=model, gpu="H200", engine=f"vllm=={version}",
                         args={"tensor_parallel_size": tp}))  # fmt: skip
    return p.error


def sizes(tp: int, pp: int = 1, dp: int = 1, ep: int = 1) -> ParallelSizes:
    return ParallelSizes(tp=tp, pp=pp, dp=dp, ep=ep, world=tp * pp * dp, attn_tp=tp)


@pytest.mark.parametrize("version", ["0.24.0", "0.33.0"])
@pytest.mark.parametrize("tp", [3, 6])
def test_qwen36_vision_tower_first(version, tp):
    """24 text heads pass the config check at 3 and 6; the worker builds the vision tower
    first (models/qwen2_5_vl.py:Qwen2_5_VisionAttention.__init__: divide(16 heads, tp)), even
    with --limit-mm-per-prompt 0. Before, servefit planned TP 3 and 6 on vLLM as "ok"."""
    assert refusal(version, QWEN36, tp) == (
        f"AssertionError: {16} is not divisible by {tp} (vllm/model_executor/models/qwen2_5_vl.py:"
        f"Qwen2_5_VisionAttention.__init__: the vision tower's 16 heads over "
        f"--tensor-parallel-size {tp})"
    )


def test_config_time_heads_check_comes_first():
    """vllm/config/model.py:ModelConfig.verify_with_parallel_config runs before any worker."""
    assert refusal("0.33.0", "nvidia/Nemotron-H-56B-Base-8K", 3) == (
        "ValueError: Total number of attention heads (64) must be divisible by tensor parallel "
        "size (3)."
    )


def test_kv_heads_replicated_a_whole_number_of_times():
    """A made-up Qwen3-8B with 48 heads and 6 KV heads at TP 16: the heads (48 / 16) and the
    vocabulary (151936 / 16) split, but 16 ranks cannot hold whole replicas of 6 KV heads:
    `assert tp_size % self.total_num_kv_heads == 0` (qwen3.py, as llama.py)."""
    m = resolve_model("Qwen/Qwen3-8B")
    odd = build_model_spec({**m.raw_config, "num_attention_heads": 48, "num_key_value_heads": 6},
                           name="kv6", source="test")  # fmt: skip
    with pytest.raises(EngineRejection) as exc:
        registry.profile("vllm", "0.33.0").check_model(odd, sizes(16))
    assert str(exc.value) == (
        "AssertionError (a bare assert, no message): vllm/model_executor/models/llama.py:"
        "LlamaAttention.__init__ (and its copies) asserts tp_size % total_num_kv_heads == 0 "
        "(6 KV heads replicated over TP 16)"
    )


def test_block_fp8_dense_row_partition():
    """DeepSeek-V3 (weight_block_size [128, 128]) at TP 32: the first 3 dense MLPs' down_proj
    takes 18432 / 32 = 576 inputs per rank, not a multiple of block_k 128
    (quantization/utils/fp8_utils.py:validate_fp8_block_shape)."""
    assert refusal("0.33.0", "deepseek-ai/DeepSeek-V3", 32) == (
        "ValueError: Weight input_size_per_partition = 576 is not divisible by weight "
        "quantization block_k = 128. (vllm/model_executor/layers/quantization/utils/"
        "fp8_utils.py:validate_fp8_block_shape)"
    )
    registry.profile("vllm", "0.33.0").check_model(
        resolve_model("deepseek-ai/DeepSeek-V3"), sizes(16)
    )


def _qwen3_moe_fp8():
    m = resolve_model("Qwen/Qwen3-30B-A3B")
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}
    return build_model_spec(
        {**m.raw_config, "quantization_config": quant}, name="Qwen3-30B-A3B-FP8", source="test"
    )


def test_block_fp8_experts_refined_from_0_29():
    """Qwen3-30B-A3B-FP8 at TP 8: 768 / 8 = 96 per rank, not a multiple of 128. 0.28.0's
    Fp8MoEMethod.create_weights raises; 0.29.0's fused_moe/oracle/fp8.py:
    refine_fp8_moe_block_shape refines the scales to gcd(128, 128, 96, 2048) = 32 instead."""
    m = _qwen3_moe_fp8()
    with pytest.raises(EngineRejection) as exc:
        registry.profile("vllm", "0.28.0").check_model(m, sizes(8))
    assert str(exc.value).startswith(
        "ValueError: The output_size of gate's and up's weight = 96 is not divisible by weight "
        "quantization block_n = 128."
    )
    registry.profile("vllm", "0.29.0").check_model(m, sizes(8))
    registry.profile("vllm", "0.33.0").check_model(m, sizes(8))
    # with --enable-expert-parallel the experts are not split: 768 per rank, whole blocks
    registry.profile("vllm", "0.28.0").check_model(m, sizes(8, ep=8))


def test_experts_split_over_dp_too():
    """Without expert parallelism FusedMoEParallelConfig.make flattens tp x dp into the experts'
    TP: Qwen3-30B-A3B at TP 4 x DP 3 splits 768 over 12 (64 each), fine; Mixtral's 14336 over
    TP 2 x DP 7 = 14 is 1024 each; 14336 over TP 1 x DP 9 is not whole
    (fused_moe/config.py:FusedMoEConfig.__post_init__)."""
    mixtral = resolve_model("mistralai/Mixtral-8x7B-v0.1")
    profile = registry.profile("vllm", "0.33.0")
    profile.check_model(mixtral, sizes(2, dp=7))
    with pytest.raises(EngineRejection, match=r"intermediate_size % tp_size == 0"):
        profile.check_model(mixtral, sizes(1, dp=9))
    profile.check_model(mixtral, sizes(1, dp=9, ep=9))  # EP: experts whole on their ranks


def test_moe_tp_above_the_experts():
    """Qwen3MoeSparseMoeBlock.__init__: 'Tensor parallel size {} is greater than the number of
    experts {}.' A made-up 4-expert Qwen3-MoE at TP 8 (heads 32 / 8 pass)."""
    m = resolve_model("Qwen/Qwen3-30B-A3B")
    few = build_model_spec({**m.raw_config, "num_experts": 4, "num_experts_per_tok": 2},
                           name="few-experts", source="test")  # fmt: skip
    with pytest.raises(EngineRejection) as exc:
        registry.profile("vllm", "0.33.0").check_model(few, sizes(8))
    assert str(exc.value).startswith(
        "ValueError: Tensor parallel size 8 is greater than the number of experts 4."
    )


def test_expert_parallel_on_a_dense_model():
    """vllm/config/model.py:ModelConfig._verify_with_expert_parallelism (the same text in
    0.10.0 and 0.33.0): --enable-expert-parallel needs experts; the fix drops the flag."""
    from servefit._explain.analysis import explain_request

    req = PlanRequest(model="Qwen/Qwen3-8B", gpu="H100", engine="vllm==0.33.0",
                      args={"tensor_parallel_size": 2, "enable_expert_parallel": True})  # fmt: skip
    p = plan(req)
    assert p.error == (
        "ValueError: Number of experts in the model must be greater than 0 when expert "
        "parallelism is enabled."
    )
    fix = explain_request(req).fix
    assert fix.best.command_flags == "(drop --enable-expert-parallel)"
    moe = plan(PlanRequest(model="Qwen/Qwen3-30B-A3B", gpu="H100", engine="vllm==0.33.0",
                           args={"tensor_parallel_size": 2, "enable_expert_parallel": True}))  # fmt: skip
    assert moe.verdict == "ok"
