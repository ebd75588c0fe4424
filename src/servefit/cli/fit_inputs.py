"""`servefit fit` options, and the FitRequest they make (a launch command after `--` is the
baseline to compare against, and fills in what the options leave out)."""

from __future__ import annotations

import functools
from typing import Any

import click

from servefit.validate import COUNT, GIB, GIB_OR_ZERO, GPU_COUNT, MIB, BoundedInt

SPEC_CHOICES = ("none", "mtp", "nextn", "eagle", "eagle3", "standalone", "ngram")


def fit_options(f):
    opts = [
        click.argument("model", required=False),
        click.option(
            "-g", "--gpu", default=None, help="GPU name from `servefit gpus`, or `local`."
        ),
        click.option(
            "-n",
            "--num-gpus",
            type=GPU_COUNT,
            default=None,
            help="GPUs per node (default: the baseline's TP x PP; without a baseline, the "
            "smallest count on which a launch starts).",
        ),
        click.option(
            "--nodes",
            type=GPU_COUNT,
            default=1,
            show_default=True,
            help="Nodes; layouts use num-gpus x nodes GPUs, one command per node.",
        ),
        click.option(
            "-c",
            "--context-length",
            "--context",
            "context",
            type=COUNT,
            default=None,
            help="Target context length, as plan and explain spell it (default: the "
            "baseline's --context-length / --max-model-len).",
        ),
        click.option(
            "--concurrency",
            type=COUNT,
            default=None,
            help="Requests that must run at once; candidates below it rank last.",
        ),
        click.option(
            "--spec",
            type=click.Choice(SPEC_CHOICES, case_sensitive=False),
            default=None,
            help="Speculative decoding (default: the baseline's, else none).",
        ),
        click.option(
            "--spec-steps",
            type=COUNT,
            default=None,
            help="Speculative steps (SGLang: draft tokens = steps + 1; vLLM: "
            "num_speculative_tokens); default 3.",
        ),
        click.option(
            "--draft-model", default=None, help="Draft checkpoint for --spec eagle/eagle3."
        ),
        click.option(
            "-e",
            "--engine",
            default=None,
            help="Engine and release, e.g. sglang==0.5.9 or vllm==0.33.0 (default: the "
            "launch command's engine, else sglang; without a release, the one installed in this "
            "Python environment, else the newest profile).",
        ),
        click.option(
            "--allow-lossy",
            is_flag=True,
            help="Also search an fp8 KV cache and a bf16 SSM state (SGLang --mamba-ssm-dtype, "
            "vLLM --mamba-ssm-cache-dtype).",
        ),
        click.option(
            "--allow-no-radix",
            is_flag=True,
            help="Also search prefix caching off for hybrid models (SGLang "
            "--disable-radix-cache, vLLM --no-enable-prefix-caching).",
        ),
        click.option(
            "--min-free-gib",
            type=GIB_OR_ZERO,
            default=None,
            help="Headroom a candidate must leave after the pools [default: 2 for SGLang "
            "(activations, CUDA graphs), 1 for vLLM (its budget holds them; slack only)].",
        ),
        click.option(
            "--top",
            type=BoundedInt(1, 1000),
            default=3,
            show_default=True,
            help="Candidates to show.",
        ),
        click.option(
            "--dist-init-addr",
            default="NODE0_IP:50000",
            show_default=True,
            help="Rendezvous HOST:PORT in multi-node commands (SGLang --dist-init-addr, "
            "vLLM --master-addr / --master-port).",
        ),
        click.option(
            "--model-path",
            default=None,
            help="The model path in the commands (default: MODEL).",
        ),
        click.option(
            "--gpu-mem-mib", type=MIB, default=None, help="Override the GPU's memory (MiB)."
        ),
        click.option(
            "--free-gib",
            type=GIB,
            default=None,
            help="Override the free memory per GPU before weights load (GiB).",
        ),
        click.option(
            "--no-calibration",
            is_flag=True,
            help="Ignore what real starts on this machine measured (servefit calibration list); "
            "by default a layout with a recorded start of this model and GPU is sized with it.",
        ),
        click.option(
            "--env",
            "env",
            multiple=True,
            metavar="KEY=VALUE",
            help="Engine environment variable; repeatable.",
        ),
    ]
    return functools.reduce(lambda acc, dec: dec(acc), reversed(opts), f)


def _baseline(
    cmd: Any, profile: Any, model_keys: tuple[str, ...], opts: dict[str, Any], cli_env: Any
) -> tuple[dict[str, Any], str | None]:
    """The launch command's engine args (model keys taken out) and its model. A baseline that
    would not start is refused with the engine's words: its argparse (argcheck), or GPUs the
    launch hides from it (CUDA_VISIBLE_DEVICES, inputs.visible_gpu)."""
    from servefit.cli import argcheck
    from servefit.cli.inputs import engine_env, visible_gpu

    parsed = profile.parse_argv(list(cmd.argv))
    stray = argcheck.stray_positionals(profile, cmd.argv)
    rejected = argcheck.check(list(cmd.argv), parsed, profile, cmd.entrypoint, stray)
    if rejected is not None:
        raise rejected
    gpu = opts.get("gpu")
    if gpu:
        env = engine_env(cmd, cli_env, gpu.lower() == "local")
        visible_gpu(profile, parsed.values, env, gpu, opts.get("num_gpus"))
    baseline = dict(parsed.values)
    found = [baseline.pop(k) for k in model_keys if baseline.get(k) is not None]
    for k in model_keys:
        baseline.pop(k, None)
    return baseline, (found[0] if found else None)


def fit_request_from_cli(ctx: click.Context, opts: dict[str, Any]):
    from servefit._fit.search import FitRequest
    from servefit._fit.space import space_for
    from servefit.cli.inputs import env_from_cli, launch_from_cli, without_secrets
    from servefit.engines.registry import parse_engine, select
    from servefit.errors import ArgumentError

    cli_env = env_from_cli(opts)
    baseline: dict[str, Any] | None = None
    cmd, engine = launch_from_cli(ctx, opts.get("engine"))
    env = {**cmd.env, **cli_env} if cmd is not None else dict(cli_env)
    engine = engine or "sglang"
    space = space_for(parse_engine(engine)[0])
    model = opts.get("model")
    profile, ref = select(engine)
    if cmd is not None:
        baseline, found = _baseline(cmd, profile, tuple(space.model_keys), opts, cli_env)
        model = model or found
    masked, env = without_secrets(ref.name, ref.profile, baseline or {}, env)
    baseline = masked if baseline is not None else None
    base = baseline or {}
    if not model:
        raise ArgumentError(
            "no model: pass MODEL (see `servefit models`) or a launch command after --"
        )
    if not opts.get("gpu"):
        raise ArgumentError("no GPU: pass --gpu NAME (see `servefit gpus`) or --gpu local")
    num_gpus = opts.get("num_gpus")
    if num_gpus is None and baseline is not None:
        tp, pp = space.parallel_of(base)
        num_gpus = tp * pp
    if num_gpus is None and (opts.get("nodes") or 1) > 1:
        raise ArgumentError("pass --num-gpus N (GPUs per node) with --nodes")
    context = opts.get("context") or base.get(space.catalogue.context_dest)
    if not context or context == -1:
        raise ArgumentError("pass --context-length L (the context length to serve)")
    spec = opts.get("spec")
    steps = opts.get("spec_steps")
    draft = opts.get("draft_model")
    if spec is None:
        spec, base_steps, base_draft = space.spec_of(base)
        steps = steps or base_steps
        draft = draft or base_draft
    return FitRequest(
        model=model,
        gpu=opts["gpu"],
        num_gpus=num_gpus,
        context=int(context),
        nodes=opts.get("nodes") or 1,
        concurrency=opts.get("concurrency"),
        spec=spec,
        spec_steps=steps,
        draft_model=draft,
        engine=engine,
        allow_lossy=bool(opts.get("allow_lossy")),
        allow_no_radix=bool(opts.get("allow_no_radix")),
        min_free_gib=opts.get("min_free_gib"),
        top=opts.get("top") or 3,
        env=env,
        gpu_mem_mib=opts.get("gpu_mem_mib"),
        free_gib=opts.get("free_gib"),
        baseline=baseline,
        dist_init_addr=opts.get("dist_init_addr") or "NODE0_IP:50000",
        model_path=opts.get("model_path"),
        calibrations=() if opts.get("no_calibration") else _stored_calibrations(),
    )


def _stored_calibrations() -> tuple:
    """The calibration store's entries (servefit/calibration/store.py); fit matches them to
    each layout it searches."""
    from servefit.calibration import store

    return tuple(store.load()[0])
