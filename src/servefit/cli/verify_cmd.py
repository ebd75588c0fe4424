"""`servefit verify URL`: is a running OpenAI-compatible endpoint fit to serve?"""

from __future__ import annotations

import click

from servefit.validate import GPU_COUNT, MAX_SECONDS, BoundedInt, FiniteFloat

EPILOG = """\b
Examples:
  servefit verify http://127.0.0.1:30000
  servefit verify http://127.0.0.1:30000 --reference http://127.0.0.1:30001
  servefit verify http://gpu-box:8000/v1 --model Qwen/Qwen3.6-27B --gpu A6000 --tp 2
  servefit verify http://127.0.0.1:30000 --format json > verify.json
  servefit verify --run 780a03      # a server servefit launched: its URL and its own key

\b
Checks: models & liveness, greedy determinism, degenerate output (streams stopped as soon
as a loop is certain), reasoning parser, tool calling, warm rerun after a prefix-cache hit,
speculative acceptance (SGLang /server_info, vLLM /metrics), speculative vs --reference
token by token, speed (TTFT, decode tok/s, concurrency) against the bandwidth bound.
Every answer must name the model asked for (--model, else the first /v1/models id).

\b
\b
Keys: --api-key / SERVEFIT_API_KEY, else with --run the key the running engine was started
with (its --api-key, or vLLM's VLLM_API_KEY), read from the engine process itself. A key is
never sent over plain http:// to another machine without a warning first.

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


def _check_url(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else checked_url(value, param.name or "URL")


def checked_url(value: str, what: str) -> str:
    """The URL verify connects to: its host NFKC-normalised and IDNA-encoded, then validated.
    A fault is named in the redacted URL (servefit.redact.redact_url: credentials and secret
    query values masked), so an error line never shows a secret the URL carries."""
    from servefit.errors import ArgumentError
    from servefit.redact import redact_url
    from servefit.validate import http_url
    from servefit.verify.address import normalise_host

    url = normalise_host(value, what)
    # Validated as shown first: its faults are the URL's own (scheme, host, port, spaces),
    # and the message quotes only the redacted text.
    http_url(redact_url(url), what)
    try:
        return http_url(url, what)
    except ArgumentError:  # only what redaction hid was wrong: a secret with spaces in it
        raise ArgumentError(
            f"{what}: the credentials or query of the URL contain whitespace or control characters"
        ) from None


@click.command("verify", epilog=EPILOG)
@click.argument("url", callback=_check_url, required=False)
@click.option(
    "--run",
    "run_ref",
    default=None,
    metavar="RUN",
    help="A run of `servefit launch` (id, short id or path): its URL and its key.",
)
@click.option(
    "--runs-dir",
    default=None,
    metavar="DIR",
    help="Where runs live (default: $SERVEFIT_RUNS_DIR or ~/.local/state/servefit/runs).",
)
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
    type=GPU_COUNT,
    default=None,
    help="GPUs of the instance; the TP size when --tp is not given.",
)
@click.option(
    "--tp",
    type=GPU_COUNT,
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
    "--deadline",
    "deadline_s",
    type=FiniteFloat(1.0, MAX_SECONDS),
    default=1200.0,
    show_default=True,
    help="Seconds for the whole run: each check gets a share and none runs past it, "
    "whatever the server does.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=FiniteFloat(0.1, MAX_SECONDS),
    default=120.0,
    show_default=True,
    help="Seconds to wait for a response or the next stream event.",
)
@click.option(
    "--max-tokens",
    type=BoundedInt(16, 1 << 20),
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
    url: str | None,
    run_ref: str | None,
    runs_dir: str | None,
    model: str | None,
    reference: str | None,
    gpu: str | None,
    num_gpus: int | None,
    tp: int | None,
    config: str | None,
    api_key: str | None,
    deadline_s: float,
    timeout_s: float,
    max_tokens: int,
    skip: tuple[str, ...],
    fmt: str,
) -> None:
    """Check that a running SGLang / vLLM endpoint gives working, well-formed, fast output."""
    from servefit.errors import ServefitError
    from servefit.verify.checks.base import RooflineInputs, VerifyOptions
    from servefit.verify.runner import verify as run_verify

    if run_ref is not None:
        url, api_key = _from_run(run_ref, runs_dir, url, api_key)
    elif url is None:
        raise ServefitError("give the server's URL, or --run RUN for a server servefit launched")
    roofline = None
    if gpu is not None:
        _validate_gpu(gpu)
        if config is not None:
            from servefit.model.inventory import load_model

            load_model(config)  # bad input fails here, before minutes of requests
        roofline = RooflineInputs(config=config or model or "", gpu=gpu, tp=tp or num_gpus)
    elif config is not None or tp is not None or num_gpus is not None:
        raise ServefitError("--config, --tp and --num-gpus describe the bound: give --gpu too")
    warnings = _key_warnings(url, reference, api_key)
    for line in warnings:
        click.echo(f"servefit: warning: {line}", err=True)
    options = VerifyOptions(
        model=model,
        reference_url=reference,
        api_key=api_key,
        timeout_s=timeout_s,
        deadline_s=deadline_s,
        max_tokens=max_tokens,
        roofline=roofline,
        skip=skip,
    )
    if fmt == "json":
        report = run_verify(url, options).model_copy(update={"warnings": warnings})
        click.echo(report.model_dump_json(indent=2))
    else:
        from rich.console import Console

        from servefit.verify.render import progress_line, render_report

        err = Console(stderr=True, highlight=False)
        report = run_verify(url, options, progress=lambda c: err.print(progress_line(c)))
        report = report.model_copy(update={"warnings": warnings})
        render_report(report)
    ctx.exit(0 if report.ok else 1)


def _from_run(
    ref: str, runs_dir: str | None, url: str | None, api_key: str | None
) -> tuple[str, str | None]:
    """The run's URL (unless one is given) and key (unless one is given): the key the running
    engine itself was started with; servefit never stores it."""
    from pathlib import Path

    from servefit.errors import ServefitError
    from servefit.launch import procs
    from servefit.launch.auth import key_from_process
    from servefit.launch.rundir import default_root, resolve

    root = Path(runs_dir).expanduser() if runs_dir else default_root()
    run = resolve(root, ref)
    rec = run.read()
    if not procs.same_process(rec.pid, rec.pid_start_ticks):
        raise ServefitError(f"run {run.id} is not running ({rec.state.replace('_', ' ')})")
    if api_key is None:
        key = key_from_process(rec.pid, rec.engine)
        if key is None and rec.probe_key:
            raise ServefitError(
                f"run {run.id} was started with a key ({rec.probe_key}) that cannot be read from "
                f"its process {rec.pid}; give it with --api-key or SERVEFIT_API_KEY"
            )
        api_key = key.value if key else None
    return url or checked_url(rec.url, "run URL"), api_key


def _key_warnings(url: str, reference: str | None, api_key: str | None) -> list[str]:
    from servefit.launch.auth import plain_http_warning

    found = (plain_http_warning(u, bool(api_key)) for u in (url, reference) if u)
    return [w for w in found if w]


def _validate_gpu(gpu: str) -> None:
    if gpu == "local":
        return  # resolved through NVML when the bound is computed; no GPU is not an error
    from servefit.hardware.catalog import get_gpu

    get_gpu(gpu)
