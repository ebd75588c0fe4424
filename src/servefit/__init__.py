"""servefit: plan, explain and fit SGLang memory for dense and hybrid LLMs before launch.

    >>> import servefit
    >>> p = servefit.plan("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", tp_size=2,
    ...                   context_length=32768, mem_fraction_static=0.85)
    >>> p.verdict, p.pools.max_total_num_tokens
    >>> e = servefit.explain("Qwen/Qwen3.6-27B", gpu="A6000", tp_size=2)     # -> Explanation
    >>> r = servefit.fit("Qwen/Qwen3.6-27B", gpu="A6000", num_gpus=2, context=32768)  # -> FitResult

See servefit.api for the full signatures and docs/explain-fit.md for the result types.
Imports are lazy: `import servefit` costs almost nothing.

`plan`, `explain` and `fit` are both API functions and the names of subpackages
(servefit/plan/, servefit/explain/, servefit/fit/). The package keeps the functions bound to
those names (importing a subpackage does not replace them), and each function still reaches
its subpackage's modules as attributes (servefit.plan.planner, servefit.fit.search).
"""

from __future__ import annotations

import functools
import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

_API = ("plan", "explain", "fit")


class _Entry:
    """An API function that also resolves attributes of the same-named subpackage."""

    def __init__(self, name: str):
        from servefit import api

        functools.update_wrapper(self, getattr(api, name))
        self._subpackage = f"{__name__}.{name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        module = importlib.import_module(self._subpackage)
        try:
            return getattr(module, attr)
        except AttributeError:
            return importlib.import_module(f"{self._subpackage}.{attr}")

    def __repr__(self) -> str:
        return f"<servefit.{self.__name__} (function; subpackage {self._subpackage})>"


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # Importing servefit.plan (etc.) would bind the subpackage over the API function.
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
plan = _Entry("plan")
explain = _Entry("explain")
fit = _Entry("fit")

__all__ = ["plan", "explain", "fit", "__version__"]
