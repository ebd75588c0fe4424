"""`servefit launch`, `stop`, `runs`, `logs`: supervised engine launches."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from servefit.cli.inputs import plan_options
from servefit.validate import MAX_COUNT, SECONDS, SECONDS_OR_ZERO, BoundedInt, PathText

if TYPE_CHECKING:  # the CLI imports what a command needs when it runs
    from servefit._plan.planner import PlanRequest
    from servefit.hardware.nvml import LocalGPUs
    from servefit.launch.command import EngineLaunch
    from servefit.launch.rundir import RunDir
    from servefit.launch.schema import RunRecord

EPILOG_LAUNCH = """\b
Examples:
  servefit launch --gpu A6000 -- python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B \\
      --tp-size 2 --context-length 32768 --mem-fraction-static 0.88 --max-running-requests 16
  servefit launch -- vllm serve Qwen/Qwen3-8B --port 8001
  servefit launch --device cpu --env VLLM_CPU_KVCACHE_SPACE=4 -- vllm serve Qwen/Qwen3-0.6B
  servefit runs; servefit logs; servefit stop

\b
Before starting, the launch is planned and refused (exit 1) when the engine would fail; the
GPUs (NVML), the port and CUDA_VISIBLE_DEVICES are checked; --force starts anyway. The engine
runs in its own process group under a detached supervisor, with its output in a fresh
runs/<time>-<id>/engine.log. `launch` returns once /health, /v1/models and one chat completion
answer (exit 0), or when the engine fails (exit 1, with the diagnosis of its log). Ctrl-C while
it starts stops the engine. GPU names: `servefit gpus`; without --gpu the local GPUs are used.
With --device cpu (vLLM's CPU platform) NVML is not asked; without a GPU, a vLLM launch whose
KV memory is fixed (--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE) is planned on the CPU.
"""

# the `nvml` preflight check of a launch on vLLM's CPU platform
CPU_REASON = "the engine runs on the CPU (vLLM's CPU platform)"


def _runs_root(runs_dir: str | None, *, write: bool = False) -> Path:
    """--runs-dir, else $SERVEFIT_RUNS_DIR, else the default: a directory (created to launch)."""
    from servefit.launch.rundir import DIR_MODE, RUNS_ENV, default_root
    from servefit.validate import directory, writable_dir

    what = "--runs-dir" if runs_dir else f"${RUNS_ENV}" if os.environ.get(RUNS_ENV) else "runs"
    root = runs_dir or default_root()
    # a runs root servefit creates is private like every run in it (0700 whatever the umask)
    return writable_dir(root, what, mode=DIR_MODE) if write else directory(root, what)


def _runs_dir_option(f):
    return click.option(
        "--runs-dir",
        type=PathText(),
        default=None,
        metavar="DIR",
        help="Where runs live (default: $SERVEFIT_RUNS_DIR or ~/.local/state/servefit/runs).",
    )(f)


# ---------------------------------------------------------------------------------- launch


def _planned_world(launch: EngineLaunch, request: PlanRequest | None) -> EngineLaunch:
    """The launch with the GPU count its plan reads (the engine's own parser of the flags, a
    --config FILE merged in), which the preflight GPU checks use."""
    import dataclasses

    from servefit.engines.registry import select
    from servefit.errors import ServefitError

    if request is None:
        return launch
    try:
        sizes = select(request.engine)[0].parallel_sizes(dict(request.args))
    except ServefitError:
        return launch
    if sizes.world == launch.world_size:
        return launch
    dp = sizes.world // (sizes.tp * sizes.pp)
    parts = [("tp", sizes.tp), ("pp", sizes.pp), ("dp", dp)]
    parallel = " x ".join(f"{k} {n}" for k, n in parts if n > 1 or k == "tp")
    return dataclasses.replace(launch, world_size=sizes.world, parallel=parallel)


def _plan_request(
    ctx: click.Context, opts: dict[str, Any], launch: EngineLaunch, gpus: LocalGPUs
) -> tuple[PlanRequest | None, str | None, bool]:
    """(PlanRequest, None, False), or (None, why the launch is not planned, whether the reason
    is one the engine itself would reject the launch for)."""
    from servefit.cli.inputs import NoDevice, request_from_cli
    from servefit.errors import ArgumentError, EngineRejection, HardwareError, ServefitError

    if not launch.recognised:
        return (
            None,
            (
                "the program is not an engine entrypoint servefit reads flags from "
                "(python -m sglang.launch_server, sglang serve, vllm serve)"
            ),
            False,
        )
    gpu = opts.get("gpu")
    if gpu and gpu.lower() != "local":
        from servefit.hardware.catalog import get_gpu

        get_gpu(gpu)  # a --gpu the user typed that servefit does not know: bad input, exit 2
    if not gpu and gpus.devices:
        gpu = "local"
    try:
        # without a GPU: --device cpu, or a KV memory fixed by the launch (vLLM's CPU platform)
        return request_from_cli(ctx, {**opts, "gpu": gpu}), None, False
    except NoDevice:
        return None, f"no --gpu given and no local GPU ({gpus.reason or 'NVML sees none'})", False
    except HardwareError as exc:
        if opts.get("gpu"):
            raise  # a --gpu the user typed that servefit does not know: bad input
        return None, str(exc), False
    except (ArgumentError, EngineRejection) as exc:
        # flags or parallelism the engine would reject as well; what it refuses itself: its
        # argparse, its --config file, GPUs CUDA_VISIBLE_DEVICES hides from it
        return None, str(exc), True
    except ServefitError as exc:  # a model servefit cannot read, an engine without a profile
        return None, str(exc), False


@click.command("launch", epilog=EPILOG_LAUNCH, options_metavar="[OPTIONS] -- COMMAND...")
@plan_options
@click.option("--force", is_flag=True, help="Launch even when a preflight check fails.")
@_runs_dir_option
@click.option(
    "--ready-timeout",
    type=SECONDS,
    default=1800.0,
    show_default=True,
    help="Seconds from start to ready before the launch counts as failed.",
)
@click.option(
    "--probe-timeout",
    type=SECONDS,
    default=5.0,
    show_default=True,
    help="Seconds for one /health or /v1/models request.",
)
@click.option(
    "--chat-timeout",
    type=SECONDS,
    default=120.0,
    show_default=True,
    help="Seconds for the readiness chat completion.",
)
@click.option(
    "--health-path",
    type=click.Choice(["/health", "/health_generate"]),
    default="/health",
    show_default=True,
)
@click.option(
    "--health-interval",
    type=SECONDS,
    default=10.0,
    show_default=True,
    help="Seconds between health checks once ready.",
)
@click.option(
    "--probe-interval",
    type=SECONDS,
    default=1.0,
    show_default=True,
    help="Seconds between readiness probes while the engine starts.",
)
@click.option(
    "--settle",
    type=SECONDS_OR_ZERO,
    default=1.0,
    show_default=True,
    help="Seconds the engine must stay alive and healthy after its first answer.",
)
@click.option(
    "--grace",
    type=SECONDS_OR_ZERO,
    default=15.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL when servefit stops the engine.",
)
@click.option(
    "--keep-failed", is_flag=True, help="Leave an engine that never became ready running."
)
@click.option(
    "--follow",
    is_flag=True,
    help="Stay attached after ready, until the engine exits (Ctrl-C detaches).",
)
@click.option(
    "--no-record",
    is_flag=True,
    help="Do not store what this start measures in the calibration store "
    "(docs/calibration.md; by default later plans of the same model, GPU and layout use it).",
)
@click.pass_context
def launch(
    ctx: click.Context,
    force: bool,
    runs_dir: str | None,
    ready_timeout: float,
    probe_timeout: float,
    chat_timeout: float,
    health_path: str,
    health_interval: float,
    probe_interval: float,
    settle: float,
    grace: float,
    keep_failed: bool,
    follow: bool,
    no_record: bool,
    **opts: Any,
) -> None:
    """Start an engine under supervision: preflight, fresh log, progress, readiness."""
    from rich.console import Console

    from servefit.cli.inputs import LAUNCH_KEY, env_from_cli
    from servefit.errors import ArgumentError
    from servefit.hardware.nvml import LocalGPUs, local_gpus
    from servefit.launch.attach import attach
    from servefit.launch.command import parse_launch
    from servefit.launch.preflight import run_preflight
    from servefit.launch.progress import render_checks
    from servefit.launch.rundir import RunWriteError
    from servefit.launch.schema import SupervisorConfig
    from servefit.launch.supervisor import prepare_run, spawn_supervisor

    words = (ctx.obj or {}).get(LAUNCH_KEY)
    if not words:
        raise ArgumentError(
            "no launch command: put it after `--`, e.g. servefit launch -- python -m sglang.launch_server ..."
        )
    launch_cmd = parse_launch(list(words), opts.get("engine"))
    root = _runs_root(runs_dir, write=True)  # before minutes of preflight: one clear line
    console = Console(highlight=False)
    on_cpu = (opts.get("device") or "").lower() == "cpu"
    gpus = LocalGPUs(reason=CPU_REASON) if on_cpu else local_gpus()  # NVML is not asked on CPU
    request, skip, rejected = _plan_request(ctx, opts, launch_cmd, gpus)
    launch_cmd = _planned_world(launch_cmd, request)
    if request is not None and request.gpu == "cpu":
        gpus = LocalGPUs(reason=CPU_REASON)
    console.print(f"[bold]preflight[/] {launch_cmd.engine} · {launch_cmd.url}")
    pre = run_preflight(
        launch_cmd,
        request,
        plan_skip_reason=skip,
        plan_rejected=rejected,
        gpus_fn=lambda: gpus,
        extra_env=env_from_cli(opts),
    )
    render_checks(console, pre.checks)
    if pre.refused and not force:
        n = len(pre.failures())
        console.print(
            f"[red]not launched[/]: {n} check{'s' if n != 1 else ''} failed; fix "
            f"{'it' if n == 1 else 'them'} or launch anyway with --force"
        )
        ctx.exit(1)
    config = SupervisorConfig(
        ready_timeout_s=ready_timeout,
        probe_timeout_s=probe_timeout,
        chat_timeout_s=chat_timeout,
        health_path=health_path,
        health_interval_s=health_interval,
        probe_interval_s=probe_interval,
        settle_s=settle,  # type: ignore[arg-type]
        grace_s=grace,
        keep_failed=keep_failed,
        record_calibration=not no_record,
    )
    try:
        run = prepare_run(
            root,
            launch_cmd,
            extra_env=env_from_cli(opts),  # for the plan and the engine's environment
            plan=pre.plan,
            request=request,
            checks=pre.checks,
            config=config,
            forced=bool(force and pre.refused),
            typed=list(words),
        )
    except OSError as exc:  # prepare_run removed what it had written: nothing was started
        raise RunWriteError(
            f"cannot write a run under {root}: {exc.strerror or exc}; nothing was started"
        ) from None
    console.print(f"[bold]launch[/] {run.id}  {run.read().command_line}")
    watcher = spawn_supervisor(run)
    ctx.exit(attach(console, run, watcher, follow))


# ---------------------------------------------------------------------------------- stop


@click.command("stop")
@click.argument("run_ref", metavar="[RUN]", required=False)
@click.option(
    "--all",
    "stop_all",
    is_flag=True,
    help="Stop every run of this runs directory that is running (only what servefit started).",
)
@click.option(
    "--grace",
    type=SECONDS_OR_ZERO,
    default=None,
    help="Seconds between SIGTERM and SIGKILL (default: the run's, 15).",
)
@click.option("--port-timeout", type=SECONDS, default=10.0, show_default=True)
@click.option("--gpu-timeout", type=SECONDS, default=30.0, show_default=True)
@_runs_dir_option
def stop(
    run_ref: str | None,
    stop_all: bool,
    grace: float | None,
    port_timeout: float,
    gpu_timeout: float,
    runs_dir: str | None,
) -> None:
    """Stop a run: only what servefit started, its engine's process group and the processes
    carrying the run's SERVEFIT_RUN_ID (SIGTERM, grace, SIGKILL)."""
    from servefit.errors import ArgumentError
    from servefit.launch.liveness import run_is_live
    from servefit.launch.rundir import list_runs, resolve

    root = _runs_root(runs_dir)
    if stop_all and run_ref is not None:
        raise ArgumentError("give a RUN or --all, not both")
    if run_ref is not None:
        runs = [resolve(root, run_ref)]
    else:
        # live: its engine runs, or it has not ended and its supervisor runs (a run whose
        # supervisor and engine are both gone is not running, whatever its record says)
        runs = [r for r in list_runs(root) if (rec := _readable(r)) and run_is_live(rec)]
        if not runs:
            click.echo("no run is running")
            return
        if len(runs) > 1 and not stop_all:
            ids = ", ".join(r.id for r in runs)
            raise ArgumentError(
                f"several runs are running ({ids}); name the one to stop, or pass --all"
            )
    held = [_stop_one(run, grace, port_timeout, gpu_timeout) for run in runs]
    if any(held):
        sys.exit(1)


def _stop_one(run: RunDir, grace: float | None, port_timeout: float, gpu_timeout: float) -> bool:
    """Stop one run and say how it went; True when its port or GPU memory is still held."""
    from servefit.launch.stop import stop_run

    result = stop_run(run, grace_s=grace, port_timeout_s=port_timeout, gpu_timeout_s=gpu_timeout)
    if not result.was_running:
        click.echo(f"{run.id}: not running ({result.state})")
        for note in result.notes:
            click.echo(f"  {note}")
        return False
    how = " then ".join(result.signals)
    escalated = " (it ignored SIGTERM for the grace period)" if result.escalated else ""
    if result.survived:  # the engine had exited before: what was stopped is what it left
        n = len(result.found)
        click.echo(
            f"{run.id}: the engine {result.exit or 'had exited (exit status unknown)'}; sent "
            f"{how}{escalated} to {n} surviving process{'es' if n != 1 else ''}: "
            f"pid {', '.join(map(str, result.found))}"
        )
    else:
        click.echo(
            f"{run.id}: sent {how}{escalated}; the engine {result.exit or 'exit status unknown'}"
        )
    self_killed = not result.escalated and result.exit == "was killed by SIGKILL"
    if self_killed and (rec := _readable(run)) is not None and rec.engine == "sglang":
        # sglang/srt/managers/tokenizer_manager.py:sigterm_watchdog ends with
        # kill_process_tree(os.getpid(), include_parent=True): SGLang kills itself.
        click.echo("  (SGLang ends its own process tree with SIGKILL once SIGTERM has drained it)")
    if result.port_closed is not None:
        click.echo(f"  port {'closed' if result.port_closed else 'still open'}")
    if result.gpu_released is not None:
        click.echo(f"  GPU memory {'released' if result.gpu_released else 'still held'}")
    for note in result.notes:
        click.echo(f"  {note}")
    return result.port_closed is False or result.gpu_released is False


def _readable(run: RunDir) -> RunRecord | None:
    """The run's record, or None with a note on stderr: one torn run.json must not stop the
    commands that go through every run."""
    from servefit.launch.rundir import UnreadableRecord

    try:
        return run.read()
    except UnreadableRecord as exc:
        click.echo(f"servefit: {exc}: skipped", err=True)
    except OSError as exc:
        click.echo(
            f"servefit: run {run.id}: cannot read run.json ({exc.strerror or exc}): skipped",
            err=True,
        )
    return None


# ---------------------------------------------------------------------------------- runs


@click.command("runs")
@_runs_dir_option
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "-n",
    "--last",
    type=BoundedInt(0, MAX_COUNT),
    default=20,
    show_default=True,
    help="Show the newest N runs (0: all).",
)
def runs(runs_dir: str | None, fmt: str, last: int) -> None:
    """List launches and their states."""
    import json

    from servefit.launch.liveness import settle, supervisor_alive, survivors
    from servefit.launch.rundir import foreign_runs, list_runs

    root = _runs_root(runs_dir)
    found = list_runs(root)
    others = foreign_runs(root)
    if others:
        click.echo(
            f"servefit: {len(others)} run{'s' if len(others) != 1 else ''} under {root} "
            "belong to other users: not shown (servefit reads only your own runs)",
            err=True,
        )
    if last > 0:
        found = found[-last:]
    # a record its dead supervisor left unfinished is settled here (liveness.settle)
    records = [settle(r, rec) for r in found if (rec := _readable(r)) is not None]
    if fmt == "json":
        click.echo(json.dumps([rec.model_dump(mode="json") for rec in records], indent=2))
        return
    if not records:
        click.echo(f"no runs under {root}")
        return
    # Plain aligned columns: run ids and URLs are copied from here, so nothing is cut short.
    header = ("RUN", "STATE", "URL", "PID", "READY IN", "EXIT", "COMMAND")
    rows = []
    for rec in records:
        notes = [] if rec.terminal or supervisor_alive(rec) else ["no supervisor"]
        if left := survivors(rec):  # its engine exited; processes it started did not
            n = len(left)
            notes.append(
                f"exited, {n} process{'es survive' if n != 1 else ' survives'}: "
                f"pid {', '.join(map(str, left))}"
            )
        state = rec.state.replace("_", " ") + (f" ({'; '.join(notes)})" if notes else "")
        took = rec.timings.time_to_ready_s
        exit_ = rec.exit_signal or ("" if rec.exit_code is None else str(rec.exit_code))
        cmd = rec.command_line if len(rec.command_line) <= 60 else rec.command_line[:57] + "..."
        ready_in = "" if took is None else f"{took:.1f} s"
        rows.append((rec.id, state, rec.url, str(rec.pid or ""), ready_in, exit_, cmd))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header) - 1)]
    for r in (header, *rows):
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)]
        click.echo("  ".join([*cells, r[-1]]).rstrip())


# ---------------------------------------------------------------------------------- logs


@click.command("logs")
@click.argument("run_ref", metavar="[RUN]", required=False)
@click.option(
    "-n", "--lines", type=BoundedInt(0, MAX_COUNT), default=None, help="Only the last N lines."
)
@click.option("-f", "--follow", is_flag=True, help="Keep printing while the run is active.")
@click.option("--path", "path_only", is_flag=True, help="Print the log's path only.")
@click.option("--diagnosis", is_flag=True, help="Print the diagnosis written after a failure.")
@_runs_dir_option
def logs(
    run_ref: str | None,
    lines: int | None,
    follow: bool,
    path_only: bool,
    diagnosis: bool,
    runs_dir: str | None,
) -> None:
    """Show a run's engine log (this launch's only; default: the newest run), secrets redacted."""
    from servefit.errors import ArgumentError
    from servefit.launch import logview
    from servefit.launch.auth import process_redactor
    from servefit.launch.rundir import resolve

    run = resolve(_runs_root(runs_dir), run_ref)
    path = run.diagnosis_path if diagnosis else run.log_path
    if path_only:
        click.echo(str(path))
        return
    if not path.exists():
        what = "diagnosis" if diagnosis else "log"
        raise ArgumentError(f"run {run.id} has no {what} yet ({path})")
    rec = run.read()
    redactor = process_redactor(rec.engine, rec.pid, rec.pid_start_ticks)
    logview.show(run, path, redactor, click.echo, lines, follow and not diagnosis)
    if follow and not diagnosis and (end := _readable(run)) is not None and end.terminal:
        click.echo(
            f"servefit: run {run.id} {end.state}: {end.message or ''}".rstrip(": "), err=True
        )
