"""`servefit fit` options, and the FitRequest they make (a launch command after `--` is the
baseline to compare against, and fills in what the options leave out)."""

from __future__ import annotations

import functools
from typing import Any

import click

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
            type=int,
            default=None,
            help="GPUs per node (default: the baseline's TP x PP).",
        ),
        click.option(
            "--nodes",
            type=int,
            default=1,
            show_default=True,
            help="Nodes; layouts use num-gpus x nodes GPUs, one command per node.",
        ),
        click.option(
            "-c",
            "--context",
            type=int,
            default=None,
            help="Target context length (default: the baseline's --context-length).",
        ),
        click.option(
            "--concurrency",
            type=int,
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
            type=int,
            default=None,
            help="Speculative steps (draft tokens = steps + 1); default 3.",
        ),
        click.option(
            "--draft-model", default=None, help="Draft checkpoint for --spec eagle/eagle3."
        ),
        click.option(
            "-e",
            "--engine",
            default=None,
            help="Engine and version, e.g. sglang==0.5.9 (default: the newest profile).",
        ),
        click.option(
            "--allow-lossy",
            is_flag=True,
            help="Also search --kv-cache-dtype fp8_e4m3 and --mamba-ssm-dtype bfloat16.",
        ),
        click.option(
            "--allow-no-radix",
            is_flag=True,
            help="Also search --disable-radix-cache (hybrid models; loses prefix caching).",
        ),
        click.option(
            "--min-free-gib",
            type=float,
            default=2.0,
            show_default=True,
            help="Headroom a candidate must leave after the pools (activations, graphs).",
        ),
        click.option("--top", type=int, default=3, show_default=True, help="Candidates to show."),
        click.option(
            "--dist-init-addr",
            default="NODE0_IP:50000",
            show_default=True,
            help="Rendezvous address in multi-node commands.",
        ),
        click.option(
            "--model-path",
            default=None,
            help="What --model-path says in the commands (default: MODEL).",
        ),
        click.option(
            "--gpu-mem-mib", type=int, default=None, help="Override the GPU's memory (MiB)."
        ),
        click.option(
            "--free-gib",
            type=float,
            default=None,
            help="Override the free memory per GPU before weights load (GiB).",
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


_SPEC_FROM_ALGO = {
    "NEXTN": "mtp",
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "STANDALONE": "standalone",
    "NGRAM": "ngram",
}


def fit_request_from_cli(ctx: click.Context, opts: dict[str, Any]):
    from servefit.cli.inputs import LAUNCH_KEY
    from servefit.engines.command import parse_launch_command
    from servefit.engines.registry import select
    from servefit.engines.sglang.flags import load_flags, parse_argv
    from servefit.errors import ArgumentError
    from servefit.fit.search import FitRequest

    env: dict[str, str] = {}
    for item in opts.get("env") or ():
        if "=" not in item:
            raise ArgumentError(f"--env expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        env[k] = v
    engine = opts.get("engine")
    baseline: dict[str, Any] | None = None
    launch = (ctx.obj or {}).get(LAUNCH_KEY)
    if launch:
        cmd = parse_launch_command(launch)
        engine = engine or cmd.engine
        env = {**cmd.env, **env}
        parsed = parse_argv(load_flags(select(engine)[1].profile), list(cmd.argv))
        if parsed.errors:
            raise ArgumentError(parsed.errors[0])
        baseline = dict(parsed.values)
    engine = engine or "sglang"
    base = baseline or {}
    model = opts.get("model") or base.get("model_path")
    if baseline is not None:
        baseline.pop("model_path", None)
    if not model:
        raise ArgumentError(
            "no model: pass MODEL (see `servefit models`) or a launch command after --"
        )
    if not opts.get("gpu"):
        raise ArgumentError("no GPU: pass --gpu NAME (see `servefit gpus`) or --gpu local")
    num_gpus = opts.get("num_gpus")
    if num_gpus is None and baseline is not None:
        num_gpus = int(base.get("tp_size") or 1) * int(base.get("pp_size") or 1)
    if num_gpus is None:
        raise ArgumentError("pass --num-gpus N (GPUs per node)")
    context = opts.get("context") or base.get("context_length")
    if not context:
        raise ArgumentError("pass --context L (the context length to serve)")
    spec = opts.get("spec")
    steps = opts.get("spec_steps")
    if spec is None:
        algo = str(base.get("speculative_algorithm") or "").upper()
        spec = _SPEC_FROM_ALGO.get(algo, "none")
        steps = steps or base.get("speculative_num_steps")
    return FitRequest(
        model=model,
        gpu=opts["gpu"],
        num_gpus=num_gpus,
        context=int(context),
        nodes=opts.get("nodes") or 1,
        concurrency=opts.get("concurrency"),
        spec=spec,
        spec_steps=steps,
        draft_model=opts.get("draft_model") or base.get("speculative_draft_model_path"),
        engine=engine,
        allow_lossy=bool(opts.get("allow_lossy")),
        allow_no_radix=bool(opts.get("allow_no_radix")),
        min_free_gib=opts.get("min_free_gib", 2.0),
        top=opts.get("top") or 3,
        env=env,
        gpu_mem_mib=opts.get("gpu_mem_mib"),
        free_gib=opts.get("free_gib"),
        baseline=baseline,
        dist_init_addr=opts.get("dist_init_addr") or "NODE0_IP:50000",
        model_path=opts.get("model_path"),
    )
