"""servefit doctor: read SGLang / vLLM logs, find the root cause, re-plan from what the log measured.

    from servefit.doctor import read_log, diagnose
    log = read_log("sglang-serve.log")            # streaming, bounded memory
    report = diagnose(log, command="python -m sglang.launch_server ...")

Layers: reader (lines -> events, per-rank prefixes) -> accumulate / launches (events -> typed
facts per launch) -> diagnose (root cause, findings) with replay (the planner re-run on the
log's own measurements).
"""

from __future__ import annotations

__all__ = ["read_log", "diagnose"]


def read_log(source):  # noqa: ANN001, ANN201 - thin lazy re-export
    from servefit.doctor.launches import read_log as _read

    return _read(source)


def diagnose(log, **kwargs):  # noqa: ANN001, ANN201
    from servefit.doctor.diagnose import diagnose as _diagnose

    return _diagnose(log, **kwargs)
