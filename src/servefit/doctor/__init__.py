"""servefit doctor: read SGLang / vLLM logs, find the root cause, re-plan from what the log measured.

    from servefit.doctor import read_log, diagnose
    log = read_log("sglang-serve.log")            # streaming, bounded memory
    report = diagnose(log, command="python -m sglang.launch_server ...", gpu="A6000")

Layers: reader (chunks -> hit lines -> events, per-rank prefixes) -> accumulate / launches
(events -> typed facts per launch) -> diagnose + findings (root cause, what to watch) with
replay (the planner re-run on the log's own measurements). JSON: docs/doctor-json.md.
"""

from __future__ import annotations

# Bound here, after their modules: a function named like its module would otherwise be
# replaced by the module object as soon as anything imports servefit.doctor.diagnose.
from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log

__all__ = ["read_log", "diagnose"]
