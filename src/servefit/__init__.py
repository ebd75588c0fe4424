"""servefit: plan SGLang memory for dense and hybrid LLMs before launch.

    >>> import servefit
    >>> p = servefit.plan("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", tp_size=2,
    ...                   context_length=32768, mem_fraction_static=0.85)
    >>> p.verdict, p.pools.max_total_num_tokens

Imports are lazy: `import servefit` costs almost nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from servefit.plan.schema import Plan


def plan(model: Any, *, gpu: Any, engine: str = "sglang", num_gpus: int | None = None,
         env: dict[str, str] | None = None, gpu_mem_mib: int | None = None, free_gib: float | None = None,
         measured_free_before_gib: float | None = None, measured_weights_gib: float | None = None,
         **engine_args: Any) -> Plan:
    """Plan one launch. `engine_args` use the engine's dest names (tp_size=2, mem_fraction_static=0.85)."""
    from servefit.plan.planner import PlanRequest
    from servefit.plan.planner import plan as _plan

    return _plan(PlanRequest(
        model=model, gpu=gpu, engine=engine, args=engine_args, env=dict(env or {}), num_gpus=num_gpus,
        gpu_mem_mib=gpu_mem_mib, free_gib=free_gib, measured_free_before_gib=measured_free_before_gib,
        measured_weights_gib=measured_weights_gib,
    ))


__all__ = ["plan", "__version__"]
