"""Turn CLI options, engine flags and a launch command into a PlanRequest."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from servefit.errors import ArgumentError
from servefit.validate import GIB, GPU_COUNT, MIB

if TYPE_CHECKING:
    from servefit.engines.base import Profile
    from servefit.engines.command import LaunchCommand
    from servefit.hardware.spec import GPUSpec

LAUNCH_KEY = "launch_command"


def plan_options(f):
    """Options shared by plan / explain / fit (the model, the GPUs, the engine, calibration)."""
    opts = [
        click.option(
            "-m",
            "--model",
            "model",
            default=None,
            help="config.json, checkpoint dir, catalog id (servefit models) or Hub id. "
            "Taken from --model-path of the launch command when omitted.",
        ),
        click.option(
            "-g",
            "--gpu",
            "gpu",
            default=None,
            help="GPU name from `servefit gpus` (A6000, H100, ...), or `local` to read this "
            "machine's GPUs through NVML.",
        ),
        click.option(
            "--device",
            type=click.Choice(["gpu", "cpu"], case_sensitive=False),
            default=None,
            help="cpu: the engine's CPU platform on this machine (vLLM; KV memory from "
            "VLLM_CPU_KVCACHE_SPACE or --kv-cache-memory-bytes), no --gpu needed.",
        ),
        click.option(
            "-n",
            "--num-gpus",
            type=GPU_COUNT,
            default=None,
            help="GPUs the engine instance uses (default: tp x pp).",
        ),
        click.option(
            "-e",
            "--engine",
            default=None,
            help="Engine and release, e.g. sglang==0.5.9 (default: the launch command's engine, "
            "else sglang; without a release, the one installed in this Python environment, else "
            "the newest profile).",
        ),
        click.option(
            "--gpu-mem-mib",
            type=MIB,
            default=None,
            help="Override the GPU's total memory (MiB, as nvidia-smi prints it).",
        ),
        click.option(
            "--free-gib",
            type=GIB,
            default=None,
            help="Override the free memory per GPU before weights load (GiB).",
        ),
        click.option(
            "--measured-free-before-gib",
            type=GIB,
            default=None,
            help="Calibrate: 'Load weight begin. avail mem=X GB' from a real log.",
        ),
        click.option(
            "--measured-weights-gib",
            type=GIB,
            default=None,
            help="Calibrate: 'Load weight end. ... mem usage=X GB' from a real log.",
        ),
        click.option(
            "--no-calibration",
            is_flag=True,
            help="The cold plan: ignore what `servefit doctor` and `servefit launch` recorded "
            "from real starts on this machine (servefit calibration list).",
        ),
        click.option(
            "--env",
            "env",
            multiple=True,
            metavar="KEY=VALUE",
            help="Engine environment variable (SGLANG_MAMBA_SSM_DTYPE=bfloat16, ...); repeatable.",
        ),
    ]
    return functools.reduce(lambda acc, dec: dec(acc), reversed(opts), f)


def env_from_cli(opts: dict[str, Any]) -> dict[str, str]:
    """The --env KEY=VALUE options as a dict; a later KEY wins."""

    env: dict[str, str] = {}
    for item in opts.get("env") or ():
        if "=" not in item:
            raise ArgumentError(f"--env expects KEY=VALUE, got {item!r}")
        k, val = item.split("=", 1)
        env[k] = val
    return env


def without_secrets(
    engine: str, profile: str, values: dict[str, Any], env: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Engine flags and variables with every secret masked (servefit.redact): plans, tables,
    JSON, HTML and recommended commands show `***` + fingerprint; nothing sized depends on a
    key or a token."""
    from servefit.engines.secretflags import redactor

    red = redactor(engine, profile)
    return red.data(values), red.env(env)


def launch_from_cli(
    ctx: click.Context, engine: str | None
) -> tuple[LaunchCommand | None, str | None]:
    """The launch command after `--` (None without one), and the engine spec: --engine, else the
    command's engine; when both are given they must name the same engine. The command's
    `--config FILE` is merged in by the release the spec selects (engines/configfile.py)."""
    from servefit.engines.command import parse_launch_command

    launch = (ctx.obj or {}).get(LAUNCH_KEY)
    if not launch:
        return None, engine
    cmd = parse_launch_command(launch, engine)
    return cmd, engine or cmd.engine


def engine_env(
    cmd: LaunchCommand | None, cli_env: Mapping[str, str], local: bool
) -> dict[str, str]:
    """The variables the engine starts with: the command's and --env; on this machine
    (`local`: --gpu local, a launch) also servefit's own environment, which it inherits."""
    inherited: Mapping[str, str] = os.environ if local else {}
    base = cmd.engine_env(inherited) if cmd is not None else dict(inherited)
    return {**base, **cli_env}


def visible_gpu(
    profile: Profile,
    values: Mapping[str, Any],
    env: Mapping[str, str],
    gpu: str,
    num_gpus: int | None,
) -> str | GPUSpec:
    """The GPU to plan on, once the engine's own device checks pass (engines/devices.py): a
    layout larger than the GPUs CUDA_VISIBLE_DEVICES (HIP/ROCR on ROCm) leaves it, or, with
    --gpu local, than this machine has, is the engine's failure (DeviceRejection). With
    --gpu local the first GPU the engine sees is the one planned when it is another model
    than NVML's first."""
    from servefit.engines.devices import Visible, check_launch, check_layout, seen_local
    from servefit.hardware.catalog import find_gpu

    local = gpu.lower() == "local"
    spec = None if local or gpu.lower() == "cpu" else find_gpu(gpu)
    vendor = "cpu" if gpu.lower() == "cpu" else spec.vendor if spec is not None else "nvidia"
    vis = check_launch(profile.engine, profile.version, values, env, vendor)
    chosen: str | GPUSpec = gpu
    if local:
        from servefit.hardware.nvml import gpu_spec_from_local, local_gpus

        devices = local_gpus().devices
        if devices:
            seen = seen_local(vis, devices)
            shown = vis.shown if vis is not None else "this machine (NVML)"
            vis = Visible(shown, tuple(d.index for d in seen))
            check_layout(profile.engine, profile.version, values, vis, vendor)
            if seen and seen[0].name != devices[0].name:  # a mixed machine: the engine's GPU 0
                chosen = gpu_spec_from_local(seen[0])
    if num_gpus is not None and vis is not None and num_gpus > vis.count:
        raise ArgumentError(f"--num-gpus {num_gpus} but {vis.exposes()} to the engine")
    return chosen


class NoDevice(ArgumentError):
    """Neither --gpu nor --device, and nothing that fixes the engine's memory without one."""


def kv_memory_fixed(values: dict[str, Any], env: dict[str, str]) -> str | None:
    """What fixes vLLM's KV memory without a device to size it from (--kv-cache-memory-bytes,
    or VLLM_CPU_KVCACHE_SPACE from --env or the environment), as a phrase; None without."""
    from servefit.engines.vllm.cpu_platform import ENV_KV_SPACE, kv_space_env

    if values.get("kv_cache_memory_bytes"):
        return "the KV memory being fixed by --kv-cache-memory-bytes"
    if kv_space_env(env) is not None:
        return f"the KV memory being fixed by {ENV_KV_SPACE}"
    return None


def request_from_cli(ctx: click.Context, opts: dict[str, Any]):
    """Build a PlanRequest from options, leftover engine flags and the launch command.
    Flags the engine's argparse refuses raise argcheck.ArgvRejection (a predicted failure)."""
    from servefit._plan.planner import PlanRequest
    from servefit.cli import argcheck
    from servefit.engines.registry import select

    cli_env = env_from_cli(opts)
    engine_argv = list(ctx.args)
    cmd, engine_spec = launch_from_cli(ctx, opts.get("engine"))
    env = {**cmd.env, **cli_env} if cmd is not None else dict(cli_env)
    if cmd is not None:
        engine_argv = engine_argv + list(cmd.argv)
    engine_spec = engine_spec or "sglang"
    profile, ref = select(engine_spec)
    # Each release's flags are read with its own table and parser (vLLM: `vllm serve MODEL`,
    # underscores or dashes, dotted JSON keys; SGLang: --model-path).
    parsed = profile.parse_argv(engine_argv)
    stray = argcheck.stray_positionals(profile, cmd.argv) if cmd is not None else []
    rejected = argcheck.check(engine_argv, parsed, profile, cmd.entrypoint if cmd else None, stray)
    if rejected is not None:  # the engine's argparse stops the launch: a predicted failure
        raise rejected
    warnings: list[str] = list(cmd.notes) if cmd is not None else []
    values = dict(parsed.values)
    model_keys = ("model_tag", "model") if ref.name == "vllm" else ("model_path",)
    found = [values.pop(k) for k in model_keys if values.get(k) is not None]
    for k in model_keys:
        values.pop(k, None)
    values, env = without_secrets(ref.name, ref.profile, values, env)
    model = opts.get("model") or (found[0] if found else None)
    if parsed.positionals and model is None:
        model = parsed.positionals[0]
    if not model:
        raise ArgumentError(
            "no model: pass --model (see `servefit models`) or a launch command with --model-path"
        )
    gpu = opts.get("gpu")
    if (opts.get("device") or "").lower() == "cpu":
        if gpu and gpu.lower() != "cpu":
            raise ArgumentError(f"--device cpu plans this machine's CPU; drop --gpu {gpu}")
        gpu = "cpu"
    if not gpu and ref.name == "vllm":
        fixed = kv_memory_fixed(values, env)
        if fixed:  # vLLM's CPU platform sizes nothing else from the machine
            gpu = "cpu"
            warnings.append(
                f"no --gpu: planned on this machine's CPU (vLLM's CPU platform), {fixed}"
            )
    if not gpu:
        raise NoDevice(
            "no GPU: pass --gpu NAME (see `servefit gpus`), --gpu local, or --device cpu"
        )
    local = gpu.lower() == "local"
    gpu = visible_gpu(
        profile, parsed.values, engine_env(cmd, cli_env, local), gpu, opts.get("num_gpus")
    )
    request = PlanRequest(
        model=model,
        gpu=gpu,
        engine=engine_spec,
        args=values,
        env=env,
        num_gpus=opts.get("num_gpus"),
        gpu_mem_mib=opts.get("gpu_mem_mib"),
        free_gib=opts.get("free_gib"),
        measured_free_before_gib=opts.get("measured_free_before_gib"),
        measured_weights_gib=opts.get("measured_weights_gib"),
        warnings=tuple(warnings),
    )
    if opts.get("no_calibration"):
        return request
    return calibrated(request)


def calibrated(request):
    """The request with the stored calibration that matches it (servefit/calibration), the
    store's notes as warnings; unchanged when none matches or the inputs cannot be resolved
    here (the plan then reports that error itself)."""
    from dataclasses import replace

    from servefit.calibration.apply import calibrate
    from servefit.errors import ServefitError

    try:
        out, notes = calibrate(request)
    except ServefitError:
        return request
    return replace(out, warnings=out.warnings + tuple(notes)) if notes else out
