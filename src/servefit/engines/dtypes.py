"""What both engines share about the model dtype: the names torch prints, the cast line their
ModelConfig logs, and the model as loaded in the resolved dtype.

Both engines' `_get_and_verify_dtype` (vllm/config/model.py, sglang/srt/configs/model_config.py)
end with the same three lines for a dtype other than the checkpoint's: "Upcasting" to float32,
"Downcasting" from float32, "Casting" between float16 and bfloat16; each engine decides the
dtype by its own rules (engines/vllm/dtype.py, engines/sglang/dtype.py).
"""

from __future__ import annotations

from typing import Any

from servefit.engines.base import (
    Measured,
    MemoryInputs,
    MemoryInputsFn,
    ResolvedArgs,
    SizePools,
    Sizing,
)
from servefit.evolve import evolve
from servefit.hardware.spec import GPUSet
from servefit.model.cache import by_identity
from servefit.model.spec import ModelSpec

# _STR_DTYPE_TO_TORCH_DTYPE, the same table in both engines (the flags' choices)
FLAG_DTYPES = {"half": "float16", "float16": "float16", "float": "float32",
               "float32": "float32", "bfloat16": "bfloat16"}  # fmt: skip
TORCH_NAMES = {"bfloat16": "torch.bfloat16", "float16": "torch.float16", "float32": "torch.float32"}


def cast_log(checkpoint: str, dtype: str) -> str | None:
    """The line _get_and_verify_dtype logs when the weights load in `dtype`, not `checkpoint`."""
    if dtype == checkpoint:
        return None
    if dtype == "float32":
        verb = "Upcasting"
    elif checkpoint == "float32":
        verb = "Downcasting"
    else:
        verb = "Casting"
    return f"{verb} {TORCH_NAMES[checkpoint]} to {TORCH_NAMES[dtype]}."


def with_dtype(model: ModelSpec, dtype: str) -> ModelSpec:
    """The model as the engine loads it in `dtype`: one object per model and dtype, so the
    per-model caches of fit's re-plans keep hitting."""
    if dtype == model.dtype:
        return model
    return by_identity(model, ("loaded dtype", dtype), lambda: evolve(model, dtype=dtype))


def loaded(model: ModelSpec, values: dict[str, Any]) -> ModelSpec:
    """The model in the dtype its resolution recorded as values["_model_dtype"] (the
    checkpoint's when none is)."""
    return with_dtype(model, values.get("_model_dtype") or model.dtype)


def memory_as_loaded(memory_inputs: MemoryInputsFn) -> MemoryInputsFn:
    """A profile's memory_inputs on the model as loaded: the weights in its dtype."""

    def inputs(
        model: ModelSpec, gpus: GPUSet, values: dict[str, Any], measured: Measured
    ) -> MemoryInputs:
        return memory_inputs(loaded(model, values), gpus, values, measured)

    return inputs


def sized_as_loaded(size_pools: SizePools) -> SizePools:
    """A profile's size_pools on the model as loaded: the KV and state pages in its dtype."""

    def size(
        model: ModelSpec,
        gpus: GPUSet,
        resolved: ResolvedArgs,
        memory: MemoryInputs,
        *,
        text: bool = True,
    ) -> Sizing:
        return size_pools(loaded(model, resolved.values), gpus, resolved, memory, text=text)

    return size
