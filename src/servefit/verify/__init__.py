"""`servefit verify`: is a running OpenAI-compatible endpoint fit to serve?

from servefit.verify import verify, VerifyOptions
report = verify("http://127.0.0.1:30000", VerifyOptions(reference_url=...))
report.ok, [c.status for c in report.checks]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servefit.verify.checks.base import RooflineInputs, VerifyOptions
    from servefit.verify.result import CheckResult, VerifyReport
    from servefit.verify.runner import verify

__all__ = ["CheckResult", "RooflineInputs", "VerifyOptions", "VerifyReport", "verify"]

_HOME = {
    "verify": "servefit.verify.runner",
    "VerifyOptions": "servefit.verify.checks.base",
    "RooflineInputs": "servefit.verify.checks.base",
    "CheckResult": "servefit.verify.result",
    "VerifyReport": "servefit.verify.result",
}


def __getattr__(name: str) -> Any:
    # Lazy: importing servefit.verify costs nothing until something is used.
    if name in _HOME:
        from importlib import import_module

        return getattr(import_module(_HOME[name]), name)
    raise AttributeError(name)
