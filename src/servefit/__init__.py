"""servefit: plan, explain and fit SGLang / vLLM memory for dense and hybrid LLMs before launch.

    >>> import servefit
    >>> p = servefit.plan("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", tp_size=2,
    ...                   context_length=32768, mem_fraction_static=0.85)
    >>> p.verdict, p.pools.max_total_num_tokens
    >>> e = servefit.explain("Qwen/Qwen3.6-27B", gpu="A6000", tp_size=2)     # -> Explanation
    >>> r = servefit.fit("Qwen/Qwen3.6-27B", gpu="A6000", num_gpus=2, context=32768)  # -> FitResult

See servefit.api for the full signatures and docs/explain-fit.md for the result types.
`import servefit` costs almost nothing: the functions import what they use when called, and the
result types below are imported on first access.

The packages behind the API have private names (servefit._plan, servefit._explain,
servefit._fit), so that importing one never rebinds `servefit.plan` and the like.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from servefit.api import explain, fit, plan

if TYPE_CHECKING:
    from servefit._explain.schema import Explanation
    from servefit._fit.schema import FitResult
    from servefit._plan.planner import PlanRequest
    from servefit._plan.schema import Plan

__version__ = "0.1.0"

# the result and request types, where they live
_TYPES = {
    "Plan": "servefit._plan.schema",
    "PlanRequest": "servefit._plan.planner",
    "Explanation": "servefit._explain.schema",
    "FitResult": "servefit._fit.schema",
}


def __getattr__(name: str) -> Any:
    if name in _TYPES:
        value = getattr(import_module(_TYPES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'servefit' has no attribute {name!r}")


__all__ = [
    "Explanation",
    "FitResult",
    "Plan",
    "PlanRequest",
    "__version__",
    "explain",
    "fit",
    "plan",
]
