"""Checks before a launch. Any `fail` refuses the launch unless --force.

plan             the launch is planned (servefit.plan) and refused when the engine would fail,
                 with the engine's own error text, the consumer and, where servefit.explain is
                 installed, the smallest change of flags that starts
visible-devices  CUDA_VISIBLE_DEVICES (the command's, else servefit's) against the GPUs the
                 engine uses (tp x pp, x dp without DP attention)
gpu-memory       NVML free memory on each GPU the engine will use; when something else already
                 holds memory there, the launch is re-planned with what is really free
gpu-processes    processes of others holding those GPUs: pid, name, MiB. Reported, never killed.
port             the engine's host:port already bound by another process
exposure         a server listening beyond the loopback without an API key (a warning)
nvml             what was skipped when NVML cannot be asked (no driver, no GPU): the launch goes on

NVML indexes GPUs in PCI bus order; CUDA does too when CUDA_DEVICE_ORDER=PCI_BUS_ID (set it on
machines with mixed GPUs, or the indexes may name different devices).
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servefit.errors import ServefitError
from servefit.launch.command import EngineLaunch, visible_devices
from servefit.launch.schema import Check
from servefit.units import MIB_PER_GIB

# NVML counts some memory as used on an idle GPU (driver reservations); only more than this is
# taken as memory held by someone else.
FOREIGN_THRESHOLD_MIB = 1024


@dataclass
class Preflight:
    checks: list[Check] = field(default_factory=list)
    plan: Any | None = None  # servefit._plan.schema.Plan
    fix: str | None = None  # the minimal change of flags that starts, as CLI text

    @property
    def refused(self) -> bool:
        return any(c.status == "fail" for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]


def run_preflight(
    launch: EngineLaunch,
    request: Any | None,
    *,
    plan_skip_reason: str | None = None,
    plan_rejected: bool = False,
    gpus_fn: Callable[[], Any] | None = None,
    with_fix: bool = True,
    extra_env: dict[str, str] | None = None,
) -> Preflight:
    """`request` is the PlanRequest of the launch (None: not planned, `plan_skip_reason` says
    why; `plan_rejected`: a reason the engine would refuse to start for, a failed check).
    `gpus_fn` returns servefit.hardware.nvml.LocalGPUs (tests pass their own); `extra_env`
    the variables added to the engine's environment (--env)."""
    result = Preflight()
    if request is None and plan_rejected:
        result.checks.append(
            Check(
                name="plan",
                status="fail",
                message=f"the engine would reject this launch: {plan_skip_reason}",
            )
        )
    else:
        result.checks.append(_plan_check(result, request, plan_skip_reason, with_fix))
    if gpus_fn is None:
        from servefit.hardware.nvml import local_gpus as gpus_fn
    gpus = gpus_fn()
    result.checks += _gpu_checks(launch, gpus, result.plan, request)
    result.checks.append(_port_check(launch))
    result.checks.append(_exposure_check(launch, extra_env or {}))
    return result


# ---- plan


def _plan_check(result: Preflight, request: Any | None, skip: str | None, with_fix: bool) -> Check:
    if request is None:
        return Check(
            name="plan", status="skip", message=f"not planned: {skip or 'no plan request'}"
        )
    from servefit._plan.planner import plan

    try:
        p = plan(request)
    except ServefitError as exc:
        return Check(name="plan", status="skip", message=f"not planned: {exc}")
    result.plan = p
    engine = f"{p.engine.name} {p.engine.profile} rules"
    if p.calibration is not None:  # sized with what a recorded start on this machine measured
        engine += f", calibrated from {p.calibration.source}"
    if p.verdict == "ok":
        pools = p.pools
        return Check(
            name="plan",
            status="ok",
            message=(
                f"starts ({engine}): {pools.max_total_num_tokens:,} KV tokens, up to "
                f"{pools.effective_max_running_requests} running requests, "
                f"{p.per_rank.free_gib:.2f} GiB left per GPU"
            ),
        )
    detail = []
    if p.error_consumer:
        detail.append(
            f"cause: {p.error_consumer}" + (f" - {p.error_detail}" if p.error_detail else "")
        )
    if with_fix:
        result.fix = minimal_fix(request)
        if result.fix:
            detail.append(f"smallest change that starts: {result.fix}")
    return Check(
        name="plan",
        status="fail",
        message=f"predicted to fail ({engine}): {p.error}",
        detail=detail,
    )


def minimal_fix(request: Any) -> str | None:
    """The explain module's minimal fix, as flags; None when it is not installed or finds none."""
    try:
        from servefit._explain.analysis import explain_request
    except ImportError:
        return None
    try:
        found = explain_request(request, with_fix=True).fix
    except Exception:  # an explain bug must not block the launch decision
        return None
    if found is None or not found.found or found.best is None:
        return None
    return found.best.command_flags or None


# ---- GPUs


def _resolve_visible(
    entries: list[str] | None, devices: tuple[Any, ...]
) -> tuple[list[Any], str | None]:
    """NVML devices the engine sees, in CUDA order; (devices, error)."""
    if entries is None:
        return list(devices), None
    out = []
    for entry in entries:
        if entry.isdigit():
            idx = int(entry)
            match = next((d for d in devices if d.index == idx), None)
        elif entry.startswith("GPU-"):
            # CUDA accepts a unique prefix of the UUID.
            hits = [d for d in devices if d.uuid and d.uuid.startswith(entry)]
            match = hits[0] if len(hits) == 1 else None
        else:
            match = None
        if match is None:
            # CUDA ignores this entry and every one after it.
            return out, f"CUDA_VISIBLE_DEVICES entry {entry!r} names no GPU NVML sees"
        out.append(match)
    return out, None


def _needs(launch: EngineLaunch) -> str:
    n = launch.world_size
    return f"{n} GPU{'s' if n != 1 else ''} ({launch.parallel})"


def _gpu_checks(
    launch: EngineLaunch, gpus: Any, plan: Any | None, request: Any | None
) -> list[Check]:
    checks: list[Check] = []
    entries = visible_devices(launch.env)
    world = launch.world_size
    if not gpus.devices:
        reason = gpus.reason or "no GPU visible"
        checks.append(
            Check(
                name="nvml",
                status="skip",
                message=f"GPU free memory and processes not checked: {reason}",
            )
        )
        if entries is not None:
            status = "fail" if len(entries) < world else "ok"
            checks.append(
                Check(
                    name="visible-devices",
                    status=status,  # type: ignore[arg-type]
                    message=f"CUDA_VISIBLE_DEVICES={','.join(entries)!s} exposes {len(entries)} "
                    f"GPU{'s' if len(entries) != 1 else ''}; the engine needs {_needs(launch)}",
                )
            )
        return checks
    visible, err = _resolve_visible(entries, gpus.devices)
    used = visible[:world]
    shown = ",".join(entries) if entries is not None else None
    if err or len(visible) < world:
        where = f"CUDA_VISIBLE_DEVICES={shown}" if shown is not None else "this machine"
        checks.append(
            Check(
                name="visible-devices",
                status="fail",
                message=f"{where} gives the engine {len(visible)} GPU{'s' if len(visible) != 1 else ''}; "
                f"it needs {_needs(launch)}" + (f" ({err})" if err else ""),
            )
        )
    else:
        extra = f"; {len(visible) - world} more visible, unused" if len(visible) > world else ""
        checks.append(
            Check(
                name="visible-devices",
                status="ok",
                message=f"GPU {', '.join(str(d.index) for d in used)} ({used[0].name}){extra}",
            )
        )
    if not used:
        return checks
    checks.append(_memory_check(used, plan, request))
    checks.append(_process_check(used))
    return checks


def _memory_check(used: list[Any], plan: Any | None, request: Any | None) -> Check:
    lines = []
    held_max = 0.0
    for d in used:
        if d.free_mib is None or d.total_mib is None:
            lines.append(f"GPU {d.index}: memory not reported by NVML")
            continue
        held_max = max(held_max, (d.used_mib or 0) / MIB_PER_GIB)
        lines.append(
            f"GPU {d.index}: {d.free_mib / MIB_PER_GIB:.2f} of {d.total_mib / MIB_PER_GIB:.2f} GiB free"
        )
    if plan is None:
        return Check(name="gpu-memory", status="ok", message="; ".join(lines))
    need = plan.per_rank.total_gib - plan.per_rank.free_gib
    if held_max * MIB_PER_GIB <= FOREIGN_THRESHOLD_MIB:
        return Check(
            name="gpu-memory",
            status="ok",
            message=f"the plan needs {need:.2f} GiB per GPU; " + "; ".join(lines),
        )
    if (
        request is None
        or request.free_gib is not None
        or request.measured_free_before_gib is not None
    ):
        status = "warn"
        msg = f"{held_max:.2f} GiB already in use; the plan (which assumed empty GPUs) needs {need:.2f} GiB per GPU"
        return Check(name="gpu-memory", status=status, message=msg, detail=lines)
    # The engine sizes its pools from what is free when it starts: plan again with that.
    free_before = plan.per_rank.pre_load_free_gib - held_max
    if free_before <= 0:
        return Check(
            name="gpu-memory",
            status="fail",
            message=f"{held_max:.2f} GiB of the GPU is already in use: nothing is left for the engine",
            detail=lines,
        )
    from servefit._plan.planner import plan as make_plan

    try:
        again = make_plan(dataclasses.replace(request, free_gib=round(free_before, 3)))
    except ServefitError as exc:
        return Check(
            name="gpu-memory",
            status="warn",
            message=f"re-plan with the free memory failed: {exc}",
            detail=lines,
        )
    if again.verdict != "ok":
        return Check(
            name="gpu-memory",
            status="fail",
            message=f"{held_max:.2f} GiB is already in use on a GPU the engine needs; with "
            f"{free_before:.2f} GiB free before the weights the launch fails: {again.error}",
            detail=lines,
        )
    before, after = plan.pools.max_total_num_tokens, again.pools.max_total_num_tokens
    return Check(
        name="gpu-memory",
        status="warn",
        message=f"{held_max:.2f} GiB is already in use on a GPU the engine needs: it starts with "
        f"{after:,} KV tokens instead of {before:,}",
        detail=lines,
    )


def _process_check(used: list[Any]) -> Check:
    from servefit.launch import procs

    lines = []
    for d in used:
        for p in d.processes:
            mib = f"{p.used_mib} MiB" if p.used_mib is not None else "memory not reported"
            owner = procs.run_marker(p.pid)
            run = f", servefit run {owner} (servefit stop {owner})" if owner else ""
            lines.append(f"GPU {d.index}: pid {p.pid} {p.name or '?'} ({mib}{run})")
    if not lines:
        return Check(name="gpu-processes", status="ok", message="no other process holds these GPUs")
    return Check(
        name="gpu-processes",
        status="warn",
        message=f"{len(lines)} other process{'es' if len(lines) != 1 else ''} hold these GPUs "
        "(not touched by servefit)",
        detail=lines,
    )


# ---- port


def port_error(host: str, port: int) -> str | None:
    """Why the engine could not listen on host:port, or None. SO_REUSEADDR as the engines'
    servers set it (asyncio create_server, vllm create_server_socket), so only a live socket
    counts, not a connection of the previous run in TIME_WAIT."""
    host = host or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        sock.close()
    return None


def port_owner(port: int) -> tuple[int, str] | None:
    """(pid, name) of the process listening on `port`, from /proc (best effort, Linux)."""
    from servefit.launch import procs, sockets

    held = sockets.holders({lst.inode for lst in sockets.listeners(port) or []})
    if not held:
        return None
    pid = min(held.values())
    return pid, procs.process_name(pid)


def _exposure_check(launch: EngineLaunch, extra_env: dict[str, str]) -> Check:
    from servefit.launch.auth import exposure_check, server_key

    env = {**os.environ, **launch.env, **extra_env}  # what the engine starts with
    key = server_key(launch.engine, launch.engine_argv, env)
    return exposure_check(launch.host, launch.port, key, launch.host_default)


def _port_check(launch: EngineLaunch) -> Check:
    err = port_error(launch.host, launch.port)
    where = f"{launch.host}:{launch.port}"
    if err is None:
        return Check(name="port", status="ok", message=f"{where} is free")
    owner = port_owner(launch.port)
    by = ""
    if owner is not None:
        from servefit.launch import procs

        run = procs.run_marker(owner[0])
        by = f" by pid {owner[0]} ({owner[1]}" + (f", servefit run {run}" if run else "") + ")"
    return Check(
        name="port",
        status="fail",
        message=f"{where} is in use{by}: {err}; choose another --port or stop that server",
    )
