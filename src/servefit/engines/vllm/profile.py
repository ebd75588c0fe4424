"""One vLLM release as an engine profile (engines/base.py:EngineProfile).

Both mirrored releases run the same flow, resolve.py (engine args) and planning.py (memory),
asking their own rules module (v<version>/rules.py) wherever they differ; `bind` ties the flow
to one release's rules. The rest of what planner.py asks of a vLLM profile reads the same in
both releases and is re-exported from here (common.py, memory.py).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from servefit.engines.base import MemoryInputs, ResolvedArgs, Sizing
from servefit.engines.vllm import planning, resolve
from servefit.engines.vllm.common import check_heads_divisible, parallel_sizes
from servefit.engines.vllm.memory import memory_inputs
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec

__all__ = ["ENGINE", "bind", "check_heads_divisible", "memory_inputs", "parallel_sizes"]

ENGINE = "vllm"

ResolveArgs = Callable[[ModelSpec, GPUSet, dict[str, Any], dict[str, str]], ResolvedArgs]
SizePools = Callable[[ModelSpec, GPUSet, ResolvedArgs, MemoryInputs], Sizing]


def bind(rules: ModuleType) -> tuple[ResolveArgs, SizePools]:
    """(resolve_args, size_pools) of the release whose rules module is `rules`."""

    def resolve_args(
        model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str]
    ) -> ResolvedArgs:
        return resolve.resolve(model, gpus, user_args, env, rules)

    def size_pools(
        model: ModelSpec, gpus: GPUSet, resolved: ResolvedArgs, memory: MemoryInputs
    ) -> Sizing:
        return planning.size(model, gpus, resolved, memory, rules)

    return resolve_args, size_pools
