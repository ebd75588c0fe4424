"""The units servefit counts memory in, and the element size of each dtype engines store.

GiB is 2**30 bytes: what SGLang prints as "GB" and vLLM as "GiB". MiB is what nvidia-smi and
NVML report GPU memory in.
"""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
MIB_PER_GIB = 1024.0

# Element size in bytes by the dtype names the engines' flags and configs use
# (vllm/utils/torch_utils.py:STR_DTYPE_TO_TORCH_DTYPE; SGLang's names are a subset).
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}
