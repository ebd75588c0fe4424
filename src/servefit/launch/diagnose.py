"""After a failure: the doctor's diagnosis of the run's own log, or, where the doctor is not
available, the error lines the engine printed and the log's last lines.

The run's engine.log holds this launch only (rundir.py), so the doctor never reads a previous
launch's output by mistake, the trap of the user's report.
"""

from __future__ import annotations

import json
import shlex
from collections import deque
from pathlib import Path

from servefit.frozen import frozen
from servefit.launch.rundir import RunDir
from servefit.launch.schema import SUPERVISOR_STOPS, RunRecord

TAIL_LINES = 40


@frozen
class Diagnosis:
    summary: str  # one or two lines for run.json and the terminal
    text: str  # the whole diagnosis (diagnosis.txt)
    source: str  # "doctor" | "log tail"


def tail(path: Path, n: int = TAIL_LINES) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return [line.rstrip("\n") for line in deque(fh, maxlen=n)]
    except OSError:
        return []


def _from_doctor(run: RunDir, record: RunRecord) -> Diagnosis | None:
    """servefit doctor on the run's log; None when the doctor is not installed or fails.
    The launch's own command, with the environment servefit gave the engine (env.json:
    VLLM_CPU_KVCACHE_SPACE, ...), engine version, GPU and model go with it: SGLang prints neither
    its version nor the GPU, and the doctor's re-plan needs both."""
    try:
        from servefit.doctor.render import render
    except ImportError:
        return None
    import io

    from rich.console import Console

    try:
        report = _doctor_report(run, record)
        calibrate_from(report, run, record)
        out = io.StringIO()
        render(report, Console(file=out, width=100, color_system=None, force_terminal=False))
    except Exception:  # a doctor bug must not hide the log from the user
        return None
    summary = report.root_cause.summary if report.root_cause is not None else None
    if summary is None:
        worst = next((f for f in report.findings if f.severity == "error"), None)
        summary = worst.title if worst is not None else (record.message or "the engine failed")
    if report.fix is not None and report.fix.command:
        summary += f" | fixed command: {report.fix.command}"
    return Diagnosis(summary=summary, text=out.getvalue(), source="doctor")


def _doctor_report(run: RunDir, record: RunRecord):  # -> servefit.doctor.schema.DoctorReport
    from servefit.doctor.diagnose import diagnose
    from servefit.doctor.launches import read_log

    return diagnose(
        read_log(str(run.log_path)),
        command=_with_env(run, record.command_line),
        engine=record.plan_engine,
        gpu=record.plan_gpu,
        model=record.plan_model,
    )


def calibrate_run(run: RunDir, record: RunRecord) -> None:
    """Once the engine is ready: what its start measured, into the calibration store
    (record.calibration names the entry). The doctor reads the run's own log, as after a
    failure; a start that measured nothing a plan takes (vLLM's CPU platform) records nothing."""
    if not record.config.record_calibration:
        return
    try:
        report = _doctor_report(run, record)
    except Exception:  # recording must never disturb a start that succeeded
        return
    calibrate_from(report, run, record)


def calibrate_from(report, run: RunDir, record: RunRecord) -> None:  # noqa: ANN001
    """Store the report's calibration entry as this run's (source: the run directory)."""
    if not record.config.record_calibration or report.calibration is None:
        return
    from servefit.calibration import store
    from servefit.calibration.entry import from_dict
    from servefit.errors import ServefitError

    data = {**report.calibration, "source": str(run.path), "source_kind": "launch"}
    try:
        store.save(from_dict(data, "launch"))
    except ServefitError:
        return
    record.calibration = data["id"]


def _with_env(run: RunDir, command_line: str) -> str:
    """The command as the engine ran it: env.json's assignments (redacted: a secret's mask
    stands for it, which no sizing reads) in front of the argv."""
    try:
        env = json.loads(run.env_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return command_line
    if not isinstance(env, dict):
        return command_line
    words = [f"{k}={shlex.quote(str(v))}" for k, v in env.items() if isinstance(k, str)]
    return " ".join([*words, command_line])


def servefit_stop(record: RunRecord) -> str | None:
    """When servefit itself ended the start-up (its ready timeout, a server that stopped
    answering), that is the diagnosis: the SIGTERM the log shows is servefit's, not a kill
    from outside, which is all the doctor could read from the log alone."""
    stop = record.stop
    if stop is None or stop.by not in SUPERVISOR_STOPS:
        return None
    why = (record.message or stop.by).split("; the engine ")[0]
    sent = " then ".join(stop.signals) or "SIGTERM"
    text = f"servefit stopped the engine itself ({sent}): {why}"
    if stop.by == "not ready in time":
        text += "; if the start-up only needs longer, raise --ready-timeout"
    return text


def diagnose_run(run: RunDir, record: RunRecord) -> Diagnosis:
    found = _from_doctor(run, record)
    own = servefit_stop(record)
    if own is not None:
        text = found.text if found is not None else _tail_text(run, record)
        return Diagnosis(
            summary=own,
            text=f"{own}\n(a SIGTERM or SIGKILL in the log below is servefit's own)\n\n{text}",
            source=found.source if found is not None else "log tail",
        )
    if found is not None:
        return found
    errors = record.facts.errors
    summary = errors[0] if errors else (record.message or "the engine failed")
    return Diagnosis(summary=summary, text=_tail_text(run, record), source="log tail")


def _tail_text(run: RunDir, record: RunRecord) -> str:
    """The error lines the engine printed and the last lines of its log."""
    lines = tail(run.log_path)
    errors = record.facts.errors
    parts = []
    if errors:
        parts.append("Errors the engine printed:")
        parts += [f"  {e}" for e in errors]
        parts.append("")
    parts.append(f"Last {len(lines)} lines of {run.log_path}:")
    parts += lines
    return "\n".join(parts) + "\n"
