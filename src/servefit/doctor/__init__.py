"""servefit doctor: read SGLang / vLLM logs, find the root cause, re-plan from what the log measured.

    from servefit.doctor import read_log, diagnose
    log = read_log("sglang-serve.log")            # streaming, bounded memory
    report = diagnose(log, command="python -m sglang.launch_server ...", gpu="A6000")

Layers: reader (chunks -> hit lines -> events, per-rank prefixes) -> accumulate / launches
(events -> typed facts per launch) -> diagnose + findings (root cause, what to watch) with
replay (the planner re-run on the log's own measurements). JSON: docs/doctor-json.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servefit.doctor.facts import LogFacts
    from servefit.doctor.schema import DoctorReport

__all__ = ["read_log", "diagnose"]


def read_log(source: Any) -> LogFacts:
    """A path, "-" (stdin), a binary file object, or an iterable of lines / blocks of lines."""
    from servefit.doctor.launches import read_log as _read

    return _read(source)


def diagnose(log: LogFacts, **kwargs: Any) -> DoctorReport:
    """See servefit.doctor.diagnose.diagnose for the keyword arguments."""
    from servefit.doctor.diagnose import diagnose as _diagnose

    return _diagnose(log, **kwargs)
