"""vLLM 0.24.0 profile (pip download --no-deps vllm==0.24.0); docs/engines/vllm-0.24.0.md.

The shared flow (resolve.py, planning.py) with this release's rules (rules.py)."""

from __future__ import annotations

from typing import Any

from servefit.engines.base import MemoryInputs, ResolvedArgs, Sizing
from servefit.engines.vllm import planning, resolve
from servefit.engines.vllm.common import check_heads_divisible, parallel_sizes
from servefit.engines.vllm.flags import load_flags
from servefit.engines.vllm.memory import memory_inputs
from servefit.engines.vllm.v0_24_0 import rules
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec

ENGINE = "vllm"
VERSION = rules.VERSION
FLAGS = load_flags(VERSION)


def resolve_args(
    model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str]
) -> ResolvedArgs:
    return resolve.resolve(model, gpus, user_args, env, rules)


def size_pools(
    model: ModelSpec, gpus: GPUSet, resolved: ResolvedArgs, memory: MemoryInputs
) -> Sizing:
    return planning.size(model, gpus, resolved, memory, rules)


__all__ = [
    "ENGINE",
    "FLAGS",
    "VERSION",
    "check_heads_divisible",
    "memory_inputs",
    "parallel_sizes",
    "resolve_args",
    "size_pools",
]
