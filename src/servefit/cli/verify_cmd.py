"""`servefit verify URL`: is a running OpenAI-compatible endpoint fit to serve?"""

from __future__ import annotations

import click

EPILOG = """\b
Examples:
  servefit verify http://127.0.0.1:30000
  servefit verify http://127.0.0.1:30000 --reference http://127.0.0.1:30001
  servefit verify http://gpu-box:8000/v1 --model Qwen/Qwen3.6-27B --gpu A6000 --tp 2
  servefit verify http://127.0.0.1:30000 --format json > verify.json

\b
Checks: models & liveness, greedy determinism, degenerate output (streams stopped as soon
as a loop is certain), reasoning parser, tool calling, warm rerun after a prefix-cache hit,
speculative acceptance (SGLang /server_info, vLLM /metrics), speculative vs --reference
token by token, speed (TTFT, decode tok/s, concurrency) against the bandwidth bound.

\b
Exit status: 0 no check failed (warnings allowed), 1 a check failed, 2 bad input.
"""


# The check names, listed here so that --help needs no import of the checks.
CHECK_NAMES = (
    "liveness",
    "determinism",
    "degenerate",
    "reasoning",
    "tools",
    "warm",
    "speculative",
    "reference",
    "speed",
)


def _check_url(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from servefit.errors import ServefitError

    if value is not None and not value.startswith(("http://", "https://")):
        raise ServefitError(f"{value!r} is not an http:// or https:// URL")
    return value


@click.command("verify", epilog=EPILOG)
@click.argument("url", callback=_check_url)
@click.option(
    "--model",
    "model",
    default=None,
    help="Served model id to request (default: the first one /v1/models lists).",
)
@click.option(
    "--reference",
    "reference",
    default=None,
    callback=_check_url,
    metavar="URL",
    help="The same model served with speculative decoding off: greedy outputs are "
    "compared token by token.",
)
@click.option(
    "--gpu",
    default=None,
    help="GPU name from `servefit gpus`, or `local` (NVML), for the bandwidth bound.",
)
@click.option(
    "--num-gpus",
    type=click.IntRange(min=1),
    default=None,
    help="GPUs of the instance; the TP size when --tp is not given.",
)
@click.option(
    "--tp",
    type=click.IntRange(min=1),
    default=None,
    help="Tensor-parallel size (default: the server's tp_size, else --num-gpus, else 1).",
)
@click.option(
    "--config",
    "config",
    default=None,
    help="Model config for the bound: catalog id, config.json, checkpoint dir or Hub "
    "id (default: the served model id).",
)
@click.option(
    "--api-key",
    envvar="SERVEFIT_API_KEY",
    default=None,
    help="Bearer token for servers started with --api-key (env SERVEFIT_API_KEY).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0.1),
    default=120.0,
    show_default=True,
    help="Seconds to wait for a response or the next stream event.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=16),
    default=1024,
    show_default=True,
    help="Token limit of the degenerate-output and reasoning prompts.",
)
@click.option(
    "--skip",
    "skip",
    multiple=True,
    type=click.Choice(CHECK_NAMES),
    help="A check not to run (repeatable), e.g. --skip tools where no tool parser is set up.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table for people, json (one object) for scripts.",
)
@click.pass_context
def verify(
    ctx: click.Context,
    url: str,
    model: str | None,
    reference: str | None,
    gpu: str | None,
    num_gpus: int | None,
    tp: int | None,
    config: str | None,
    api_key: str | None,
    timeout_s: float,
    max_tokens: int,
    skip: tuple[str, ...],
    fmt: str,
) -> None:
    """Check that a running SGLang / vLLM endpoint gives working, well-formed, fast output."""
    from servefit.errors import ServefitError
    from servefit.verify.checks.base import RooflineInputs, VerifyOptions
    from servefit.verify.runner import verify as run_verify

    roofline = None
    if gpu is not None:
        _validate_gpu(gpu)
        if config is not None:
            from servefit.model.inventory import load_model

            load_model(config)  # bad input fails here, before minutes of requests
        roofline = RooflineInputs(config=config or model or "", gpu=gpu, tp=tp or num_gpus)
    elif config is not None or tp is not None or num_gpus is not None:
        raise ServefitError("--config, --tp and --num-gpus describe the bound: give --gpu too")
    options = VerifyOptions(
        model=model,
        reference_url=reference,
        api_key=api_key,
        timeout_s=timeout_s,
        max_tokens=max_tokens,
        roofline=roofline,
        skip=skip,
    )
    if fmt == "json":
        report = run_verify(url, options)
        click.echo(report.model_dump_json(indent=2))
    else:
        from rich.console import Console

        from servefit.verify.render import progress_line, render_report

        err = Console(stderr=True)
        report = run_verify(url, options, progress=lambda c: err.print(progress_line(c)))
        render_report(report)
    ctx.exit(0 if report.ok else 1)


def _validate_gpu(gpu: str) -> None:
    if gpu == "local":
        return  # resolved through NVML when the bound is computed; no GPU is not an error
    from servefit.hardware.catalog import get_gpu

    get_gpu(gpu)
