"""The dtype vLLM loads a model in (engines/vllm/dtype.py), against the engine's code:
vllm/config/model.py:_get_and_verify_dtype, _resolve_auto_dtype, _check_valid_dtype and
_FLOAT16_NOT_SUPPORTED_MODELS (vllm/config.py in 0.10.0, config/__init__.py in 0.10.1-0.10.2),
platforms/cuda.py:CudaPlatform.supported_dtypes; the expected figures are hand arithmetic on
the config. The real engine's figures for --dtype are the recorded CPU logs
(tests/data/engine-logs/*-float32-*, *-float16-*), replayed by tests/doctor/test_real_cpu_logs.py.
"""

from __future__ import annotations

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.engines import registry
from tests.engines.vllm.helpers import qwen3_8b, vplan

ENGINE = "vllm==0.32.0"
# Qwen3-8B: 36 layers, 8 KV heads of 128 dims, K and V
KV_ELEMENTS_PER_TOKEN = 36 * 2 * 8 * 128


@pytest.mark.parametrize(
    ("flag", "element_bytes", "log"),
    [
        (None, 2, None),
        ("bfloat16", 2, None),
        ("float32", 4, "Upcasting torch.bfloat16 to torch.float32."),
        ("float", 4, "Upcasting torch.bfloat16 to torch.float32."),
        ("half", 2, "Casting torch.bfloat16 to torch.float16."),
        ("float16", 2, "Casting torch.bfloat16 to torch.float16."),
    ],
)
def test_dtype_flag_sets_the_kv_bytes_and_the_weights(flag, element_bytes, log):
    model = qwen3_8b()
    base = vplan(model, "H100", ENGINE, max_model_len=8192)
    args = {"max_model_len": 8192} | ({"dtype": flag} if flag else {})
    p = vplan(model, "H100", ENGINE, **args)
    assert p.pools.kv_bytes_per_token == KV_ELEMENTS_PER_TOKEN * element_bytes
    # every tensor of an unquantized checkpoint is loaded in the model dtype
    assert p.per_rank.weights_gib == pytest.approx(base.per_rank.weights_gib * element_bytes / 2)
    casts = [ln for ln in p.log_lines if "casting" in ln.lower()]
    assert casts == ([log] if log else [])
    assert not [c for c in p.changes if c.arg == "dtype"]  # the user's choice, not the engine's


def test_a_float32_checkpoint_is_downcast_to_the_platforms_preferred_dtype():
    model = qwen3_8b(torch_dtype="float32")
    on_h100 = vplan(model, "H100", ENGINE, max_model_len=8192)
    assert on_h100.pools.kv_bytes_per_token == KV_ELEMENTS_PER_TOKEN * 2
    assert "Downcasting torch.float32 to torch.bfloat16." in on_h100.log_lines
    change = next(c for c in on_h100.changes if c.arg == "dtype")
    assert (change.old, change.new) == ("auto", "bfloat16")
    # compute capability 7.5: CudaPlatform.supported_dtypes is [float16, float32]
    on_t4 = vplan(model, "T4", ENGINE, max_model_len=2048)
    assert "Downcasting torch.float32 to torch.float16." in on_t4.log_lines
    assert on_t4.resolved_args["mamba_cache_dtype"] == "float16"  # "auto": the model dtype


def test_a_bfloat16_checkpoint_falls_back_to_float16_below_compute_capability_8():
    p = vplan(qwen3_8b(), "T4", ENGINE, max_model_len=2048)
    warning = (
        "Your device 'Tesla T4' (with compute capability 7.5) doesn't support torch.bfloat16. "
        "Falling back to torch.float16 for compatibility."
    )
    i = p.log_lines.index(warning)
    assert p.log_lines[i + 1] == "Casting torch.bfloat16 to torch.float16."
    assert p.pools.kv_bytes_per_token == KV_ELEMENTS_PER_TOKEN * 2


def glm4(**extra: object):
    """Qwen3-8B's shapes under GLM-4's model type (one of _FLOAT16_NOT_SUPPORTED_MODELS)."""
    return qwen3_8b(model_type="glm4", **extra)


def test_float16_is_refused_for_the_model_types_the_release_lists():
    p = plan(PlanRequest(model=glm4(), gpu="H100", engine=ENGINE, args={"dtype": "half"}))
    assert p.verdict == "fail"
    assert p.error == (
        "ValidationError: 1 validation error for ModelConfig: Value error, "
        "The model type 'glm4' does not support float16. "
        "Reason: Numerical instability. Please use bfloat16 or float32 instead."
    )


def test_auto_never_picks_float16_for_those_model_types():
    # T4 supports float16 and float32; glm4 may not use float16, so float32 is preferred
    p = vplan(glm4(), "T4", ENGINE, max_model_len=2048)
    assert p.pools.kv_bytes_per_token == KV_ELEMENTS_PER_TOKEN * 4
    assert "Upcasting torch.bfloat16 to torch.float32." in p.log_lines


# _FLOAT16_NOT_SUPPORTED_MODELS as each wheel has it: read from vllm 0.10.0, 0.10.1, 0.10.2,
# 0.11.0, 0.14.0, 0.18.0, 0.24.0, 0.25.0-0.31.0, 0.32.0, 0.33.0 (pip download --no-deps)
FP16_0_10_0 = {"gemma2", "gemma3", "plamo2", "glm4"}
FP16_0_10_2 = FP16_0_10_0 | {"gemma3_text"}  # 0.10.2 ... 0.26.x
FP16_0_27_0 = FP16_0_10_2 - {"plamo2"}  # 0.27.0 on


def _expected_fp16_refused(version: str) -> set[str]:
    v = tuple(int(x) for x in version.split(".")[:3])
    if v < (0, 10, 2):
        return FP16_0_10_0
    if v < (0, 27, 0):
        return FP16_0_10_2
    return FP16_0_27_0


@pytest.mark.parametrize("version", registry.available()["vllm"])
def test_each_release_refuses_float16_for_its_own_model_types(version):
    ref = f"vllm=={version}"
    profile, _ = registry.select(ref)
    refused = _expected_fp16_refused(version)
    for model_type in sorted(FP16_0_10_2 | {"qwen3"}):
        model = qwen3_8b(model_type=model_type)
        request = PlanRequest(model=model, gpu="H100", engine=ref, args={"dtype": "float16"})
        error = plan(request).error or ""
        assert ("does not support float16" in error) == (model_type in refused), (
            ref,
            model_type,
            profile.version,
        )
