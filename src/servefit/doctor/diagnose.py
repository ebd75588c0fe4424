"""Root cause and findings for one launch of a log.

`diagnose(log, command=..., since=..., model=..., gpu=..., engine=...)` picks the launch (the
latest complete one, or the one matching --command), says plainly when the file is stale, mixed
or cut, classifies the failure with the log's numbers, replays it with the planner on the
log's measurements (doctor.replay) for the consumer and a fix, and lists what deserves
attention on a launch that started (silent caps, stranded pools, parsers, MTP acceptance, a
server that stopped after its first request).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from servefit.doctor import findings as F
from servefit.doctor.facts import LaunchFacts, LogFacts
from servefit.doctor.launches import (
    arg_differences,
    command_args,
    command_env,
    parse_since,
    pick,
    staleness,
)
from servefit.doctor.schema import (
    DoctorReport,
    Finding,
    Fix,
    LaunchSummary,
    Replay,
    RootCause,
)
from servefit.errors import ServefitError


def diagnose(
    log: LogFacts,
    *,
    command: str | None = None,
    since: str | datetime | None = None,
    model: Any = None,
    gpu: Any = None,
    engine: str | None = None,
    replay: bool = True,
    now: datetime | None = None,
) -> DoctorReport:
    cmd_args = command_args(command) if command else None
    when = parse_since(since, now) if isinstance(since, str) else since
    launch, notes = pick(log, cmd_args)
    base = _file_summary(log)
    if launch is None:
        return DoctorReport(
            **base,
            status="no-launch",
            notes=notes,
            findings=[
                Finding(
                    code="no_launch",
                    severity="error",
                    title="no SGLang or vLLM start-up found in this file",
                    detail=f"{log.lines} lines read; none is an engine start-up, pool or error line servefit knows.",
                )
            ],
        )

    findings: list[Finding] = []
    if when is not None:
        stale = staleness(log, launch, when)
        if stale:
            findings.append(
                Finding(code="stale_log", severity="error", title="stale log", detail=stale)
            )
    if cmd_args is not None:
        findings += _command_findings(launch, cmd_args)
        findings += _device_findings(launch, command or "", engine)
    if launch.outcome == "incomplete":
        findings.append(F.incomplete(launch, log))

    rep = fix = planned = None
    root = root_cause(launch)
    if replay:
        rep, root, fix, planned = _replayed(
            launch, root, findings, command, cmd_args, model, gpu, engine
        )
    if fix is None and root is not None and root.kind == "startup_memory":
        fix = F.fix_from_log(launch, command or launch.command)

    findings += F.success_findings(launch, rep, log)
    return DoctorReport(
        **base,
        diagnosed=launch.index,
        status=_status(launch, findings),
        notes=notes,
        root_cause=root,
        fix=fix,
        findings=findings,
        replay=rep,
        launch=launch,
        calibration=_calibration(launch, planned, log.path),
    )


def _file_summary(log: LogFacts) -> dict[str, Any]:
    """The report's fields about the file: its path, size and launches."""
    summaries = [
        LaunchSummary(
            index=x.index,
            first_line=x.first_line,
            last_line=x.last_line,
            start_time=x.start_time,
            engine=x.engine.name,
            outcome=x.outcome,
        )
        for x in log.launches
    ]
    return {
        "path": log.path,
        "lines": log.lines,
        "launches": summaries,
        "launches_total": log.launches_total,
    }


def _calibration(launch: LaunchFacts, planned: Any, path: str) -> dict[str, Any] | None:
    """The calibration entry of the replayed launch (calibration/record.py), as JSON."""
    if planned is None:
        return None
    from servefit.doctor.calibration import entry_of

    p, request = planned
    entry = entry_of(launch, request, p, source=path, kind="doctor")
    return entry.to_dict() if entry is not None else None


def _replayed(
    launch: LaunchFacts,
    root: RootCause | None,
    findings: list[Finding],
    command: str | None,
    cmd_args: dict[str, Any] | None,
    model: Any,
    gpu: Any,
    engine: str | None,
) -> tuple[Replay | None, RootCause | None, Fix | None, Any]:
    """Replay the launch with the planner (doctor.replay): the consumer behind a memory failure,
    the fix and its command; findings are appended to `findings`."""
    from servefit.doctor.replay import fixed_command, propose_fix
    from servefit.doctor.replay import replay as run_replay

    fix = None
    rep, planned, rep_findings = run_replay(
        launch,
        model=model,
        gpu=gpu,
        engine=engine,
        command_args=cmd_args,
        command_env=command_env(command) if command else None,
    )
    findings += rep_findings
    if (
        root is not None
        and rep is not None
        and rep.error_consumer
        and root.kind == "startup_memory"
    ):
        consumer = next((c for c in planned[0].consumers if c.name == rep.error_consumer), None)
        root = root.model_copy(
            update={
                "consumer": rep.error_consumer,
                "detail": rep.error_detail,
                "flags": consumer.flags if consumer else root.flags,
            }
        )
    failing = (root is not None and root.kind == "startup_memory") or (
        rep is not None and rep.verdict == "fail"
    )
    if planned is not None and failing and planned[0].verdict == "fail":
        fix = propose_fix(planned)
    mismatch = any(f.code == "command_mismatch" for f in findings)
    base_cmd = launch.command if mismatch else (command or launch.command)
    if mismatch:
        findings += _command_replay(launch, cmd_args, model, gpu, engine)
    if fix is not None and base_cmd:
        profile = rep.engine.split("==")[1] if rep and "==" in rep.engine else None
        fix = fix.model_copy(
            update={"command": fixed_command(base_cmd, fix, launch.engine.name or "", profile)}
        )
    return rep, root, fix, planned


def _command_replay(
    launch: LaunchFacts, cmd_args: dict[str, Any], model: Any, gpu: Any, engine: str | None
) -> list[Finding]:
    """--command is another launch than the log's: predict it with this machine's measurements."""
    from servefit.doctor.replay import replay as run_replay

    rep, _, _ = run_replay(
        launch, model=model, gpu=gpu, engine=engine, command_args=cmd_args, use_command=True
    )
    if rep is None or rep.measured_free_before_gib is None:
        return []
    head = (
        f"your --command, re-planned with this log's measured memory ({rep.measured_free_before_gib:.2f} GiB "
        f"free before weights, {rep.measured_weights_gib:.2f} GiB weights per rank)"
    )
    if rep.verdict == "ok":
        return [
            Finding(
                code="command_replay",
                severity="info",
                title=f"{head}: starts",
                detail=f"{rep.kv_tokens:,} KV tokens, {rep.effective_max_running_requests} running requests, "
                f"{rep.free_after_pools_gib:.2f} GiB left per rank after the pools ({rep.engine})",
            )
        ]
    return [
        Finding(
            code="command_replay",
            severity="error",
            title=f"{head}: fails",
            detail=f"{rep.error} ({rep.error_consumer}: {rep.error_detail})",
        )
    ]


def _status(launch: LaunchFacts, findings: list[Finding]) -> str:
    if launch.outcome == "failed":
        return "failed"
    if any(f.severity == "error" for f in findings):
        return "warning"
    if launch.outcome == "incomplete":
        return "incomplete"
    return "warning" if any(f.severity == "warning" for f in findings) else "ok"


def _command_findings(launch: LaunchFacts, cmd_args: dict[str, Any]) -> list[Finding]:
    if not launch.args:
        return [
            Finding(
                code="command_unchecked",
                severity="info",
                title="cannot compare with --command",
                detail="this launch does not print its arguments (no `server_args=` / "
                "`non-default args` line), so servefit cannot tell whether it is the launch in --command",
            )
        ]
    diffs = arg_differences(launch.args, cmd_args)
    if not diffs:
        return []
    shown = "; ".join(f"{k}: {have!r} in the log, {want!r} in --command" for k, have, want in diffs)
    return [
        Finding(
            code="command_mismatch",
            severity="error",
            title="this log is not from the launch in --command",
            detail=f"{shown}. The file holds an earlier launch (a stale log); the diagnosis below is about "
            "what the log shows, not about your command.",
            numbers={k: want for k, _, want in diffs},
        )
    ]


def _device_findings(launch: LaunchFacts, command: str, engine: str | None) -> list[Finding]:
    """The launch in --command needs more GPUs than its environment prefix leaves the engine
    (CUDA_VISIBLE_DEVICES, HIP/ROCR on ROCm): the engine's own refusal (engines/devices.py),
    which `plan` gives for the same command, whatever the log shows."""
    from servefit.engines.command import parse_launch_command
    from servefit.engines.devices import DeviceRejection, check_launch

    try:
        cmd = parse_launch_command(command)
        profile = _profile_of(cmd.engine, launch, engine)
        values = profile.parse_argv(list(cmd.argv)).values
        check_launch(profile.engine, profile.version, values, cmd.engine_env({}))
    except DeviceRejection as exc:
        return [
            Finding(
                code="command_devices",
                severity="error",
                title="the launch in --command cannot see the GPUs it needs",
                detail=f"with the environment in --command the engine stops at start-up: {exc}",
            )
        ]
    except ServefitError:  # the other findings and the replay say what is wrong with it
        return []
    return []


def _profile_of(name: str, launch: LaunchFacts, engine: str | None) -> Any:
    """--engine's profile, else the release the log names, else the engine's newest."""
    from servefit.engines.registry import select

    if engine:
        return select(engine)[0]
    if launch.engine.version:
        try:
            return select(f"{name}=={launch.engine.version}")[0]
        except ServefitError:  # a dev build's version string: the engine's default release
            pass
    return select(name)[0]


def root_cause(launch: LaunchFacts) -> RootCause | None:
    err = launch.primary_error
    if err is None:
        if launch.exit is not None:
            return F.exit_cause(launch)
        return None
    return F.error_cause(launch, err)


__all__ = ["diagnose", "root_cause", "Fix"]
