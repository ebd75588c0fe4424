"""servefit command line. Imports stay inside commands so `servefit --help` starts fast."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from servefit.cli.inputs import plan_options, request_from_cli
from servefit.cli.lazy import LazyGroup

EPILOG_PLAN = """\b
Examples:
  servefit plan --gpu A6000 --engine sglang==0.5.9 -- \\
      python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp-size 2 \\
      --context-length 32768 --speculative-algo NEXTN --speculative-num-steps 3 \\
      --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --mem-fraction-static 0.85
  servefit plan -m Qwen/Qwen3.5-27B --gpu H100 --tp-size 1 --max-running-requests 32
  servefit plan -m ./my-checkpoint --gpu local --format json

\b
Engine flags (--tp-size, --mem-fraction-static, ...) are the engine's own, either as
options here or inside the launch command after `--`. Calibrate from a real log with
--measured-free-before-gib (Load weight begin avail mem) and --measured-weights-gib
(Load weight end mem usage).

\b
Exit status: 0 the engine will start, 1 it will fail (the error is printed), 2 bad input.
"""


# Commands in their own modules (servefit/cli/<name>_cmd.py), imported only when used.
LAZY_COMMANDS = {
    "doctor": "servefit.cli.doctor_cmd:doctor",
    "launch": "servefit.cli.launch_cmd:launch",
    "stop": "servefit.cli.launch_cmd:stop",
    "runs": "servefit.cli.launch_cmd:runs",
    "logs": "servefit.cli.launch_cmd:logs",
    "verify": "servefit.cli.verify_cmd:verify",
    "explain": "servefit.cli.explain_cmd:explain",
    "fit": "servefit.cli.fit_cmd:fit",
    "calibration": "servefit.cli.calibration_cmd:calibration",
}


@click.group(
    cls=LazyGroup,
    lazy_commands=LAZY_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="servefit")
def cli() -> None:
    """Plan, explain, launch and verify SGLang / vLLM deployments of dense and hybrid (GDN, Mamba2, KDA) models."""


@cli.command(
    "plan",
    epilog=EPILOG_PLAN,
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@plan_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "shell"]),
    default="table",
    show_default=True,
    help="table for people, json (one object, docs/plan-json.md) for scripts; shell: only the "
    "launch command to run (with the fix when it fails).",
)
@click.option(
    "--concurrency",
    type=int,
    default=None,
    help="Requests that must run at once: a fix never drops the running requests below it "
    "(nor below one full-context request).",
)
@click.option("--no-fix", is_flag=True, help="Do not search a fix for a launch that fails.")
@click.option(
    "--compare",
    "compare",
    default=None,
    metavar="ENGINE",
    help="Also plan the same model and GPUs on another engine (e.g. vllm==0.33.0) and show "
    "both side by side; settings both engines share are carried over.",
)
@click.pass_context
def plan_cmd(
    ctx: click.Context,
    fmt: str,
    concurrency: int | None,
    no_fix: bool,
    compare: str | None,
    **opts,
) -> None:
    """Predict what the engine allocates at start-up, and whether it starts."""
    from servefit._plan.planner import plan
    from servefit.errors import ArgumentError

    if concurrency is not None and concurrency < 1:
        raise ArgumentError(f"--concurrency must be a positive integer, got {concurrency}")
    request = request_from_cli(ctx, opts)
    if str(request.gpu).lower() == "local":
        from servefit.hardware.nvml import local_gpus

        found = local_gpus()
        if not found.devices:  # a laptop or a CPU box: a note, and the catalog GPUs instead
            from servefit.report.table import render_no_local_gpu

            render_no_local_gpu(request, found.reason or "NVML sees no GPU", fmt)
            ctx.exit(0)
    from servefit._plan.band import with_band

    result = with_band(request, plan(request))  # how sure: the measured terms at their edges
    if compare:
        _compare(ctx, request, result, compare, fmt)
        return
    fix = None
    if not no_fix:
        from servefit._explain.analysis import fix_request

        fix = fix_request(request, result, min_running=concurrency)
    if fmt == "json":
        import json

        # the Plan object, plus the fix the table shows under its verdict (docs/plan-json.md)
        data = result.model_dump(mode="json")
        if fix is not None:
            data["fix"] = fix.model_dump(mode="json")
        click.echo(json.dumps(data, indent=2))
        ctx.exit(0 if result.verdict == "ok" else 1)
    model = request.model if isinstance(request.model, str) else result.model.name
    if fmt == "shell":
        from servefit.report.fixes import plan_shell

        plan_shell(result, fix, model, request.env)
    else:
        from servefit.report.table import render_plan
        from servefit.report.verdict import of_plan

        render_plan(result, None, of_plan(result, asked=concurrency), fix, model, request.env)
    ctx.exit(0 if result.verdict == "ok" else 1)


def _compare(ctx: click.Context, request, result, other: str, fmt: str) -> None:
    """plan --compare: the same request on another engine, its args carried by meaning."""
    from dataclasses import replace

    from servefit._plan.planner import plan
    from servefit.engines.registry import parse_engine
    from servefit.engines.vllm.translate import translate

    target = parse_engine(other)[0]
    args, dropped = translate(dict(request.args), result.engine.name, target)
    second = plan(replace(request, engine=other, args=args, warnings=()))
    note = None
    if dropped:
        note = f"not carried to {target} (its defaults apply): " + ", ".join(sorted(dropped))
    if fmt == "json":
        import json

        click.echo(
            json.dumps(
                {
                    "plans": [result.model_dump(mode="json"), second.model_dump(mode="json")],
                    "carried_args": args,
                    "not_carried": sorted(dropped),
                },
                indent=2,
            )
        )
    else:
        from servefit.report.console import make_console
        from servefit.report.table import render_compare

        console = make_console()
        render_compare(result, second, console)
        if note:
            console.print(f"[yellow]note:[/] {note}")
    ctx.exit(0 if result.verdict == "ok" else 1)


@cli.command("models")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def models_cmd(fmt: str) -> None:
    """List the bundled model catalog (usable offline as --model ID)."""
    from servefit.report.catalogs import render_models

    render_models(fmt)


@cli.command("gpus")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--cpu",
    is_flag=True,
    help="Instead: this machine's CPU as vLLM's CPU platform reads it for --device cpu (the "
    "NUMA node its worker binds, that node's memory, which can be less than /proc/meminfo "
    "says, the cgroup limit, the ISA).",
)
def gpus_cmd(fmt: str, cpu: bool) -> None:
    """List the GPU catalog (usable as --gpu NAME), or with --cpu this machine's CPU facts."""
    from servefit.report.catalogs import render_cpu, render_gpus

    if cpu:
        render_cpu(fmt)
    else:
        render_gpus(fmt)


def main(argv: list[str] | None = None) -> None:
    """Entry point: split off a launch command after `--`, turn servefit errors into one line."""
    from servefit.cli.inputs import LAUNCH_KEY

    argv = list(sys.argv[1:] if argv is None else argv)
    launch: list[str] | None = None
    if "--" in argv:
        i = argv.index("--")
        argv, launch = argv[:i], argv[i + 1 :]
    try:
        rc = cli.main(
            args=argv, prog_name="servefit", standalone_mode=False, obj={LAUNCH_KEY: launch}
        )
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # every error (click's Abort too) leaves through _fail, redacted
        sys.exit(_fail(exc, argv, _redactor(argv, launch)))
    except KeyboardInterrupt:
        click.echo("servefit: interrupted", err=True)
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)


def _fail(exc: Exception, argv: list[str], clean: Callable[[str], str]) -> int:
    """Print an error as one line (a usage error with click's usage) and return its exit
    status. Every line is passed through `clean`: an error message quotes what it was given,
    and that can be a URL with a password, a key or a token."""
    import os

    from servefit.errors import ServefitError

    if isinstance(exc, ServefitError):
        hints = getattr(exc, "hints", None)
        if hints is not None:  # the engine's argparse refuses the launch: a predicted failure
            from servefit.report.verdict import rejection

            rejection(clean(str(exc)), tuple(clean(h) for h in hints), _format_of(argv))
            return exc.exit_code
        _json_error(argv, clean(str(exc)), exc.exit_code)
        click.echo(clean(f"servefit: error: {exc}"), err=True)
        return exc.exit_code
    if isinstance(exc, click.exceptions.Abort):
        click.echo("servefit: aborted", err=True)
        return 130
    if isinstance(exc, click.ClickException):
        import io

        _json_error(argv, clean(exc.format_message()), 2)
        shown = io.StringIO()  # click's usage and `Error: ...` line, which quote the values
        exc.show(file=shown)
        click.echo(clean(shown.getvalue()), err=True, nl=False)
        return 2
    if os.environ.get("SERVEFIT_DEBUG"):  # the traceback asked for, redacted like the rest
        import traceback

        click.echo(clean("".join(traceback.format_exception(exc))), err=True, nl=False)
        return 3
    # a bug in servefit, not bad input: still one line unless debugging
    click.echo(
        clean(
            f"servefit: internal error: {type(exc).__name__}: {exc} "
            "(set SERVEFIT_DEBUG=1 for the traceback, and please report it)"
        ),
        err=True,
    )
    return 3


def _redactor(argv: list[str], launch: list[str] | None) -> Callable[[str], str]:
    """What cleans an error line: every engine's secret flags, and the secret values of this
    command line (servefit's options, the launch command, a quoted --command) and of the
    environment, so that a message quoting one of them alone is masked too."""
    import os
    import shlex

    from servefit.redact import Redactor, redact_text

    words = [*argv, *(launch or [])]
    for word in list(words):
        if any(c.isspace() for c in word):  # doctor --command "python ... --api-key K"
            try:
                words += shlex.split(word)
            except ValueError:  # an unclosed quote
                words += word.split()
    try:
        from servefit.engines.secretflags import redactor

        base = redactor()
        red: Redactor = base.with_values([*base.argv_secrets(words), *base.env_secrets(os.environ)])
    except Exception:  # a broken flag table must not cost the error line its redaction
        return redact_text
    return red.text


def _json_error(argv: list[str], message: str, code: int) -> None:
    """With --format json, an error is also one JSON object on stdout, so a script that reads
    stdout gets `{"error": ..., "exit": N}` instead of nothing (the stderr line stays). The
    message comes redacted (_fail)."""
    if _format_of(argv) == "json":
        import json

        click.echo(json.dumps({"error": message, "exit": code}))


def _format_of(argv: list[str]) -> str:
    """The --format the command line asked for (table when none)."""
    for i, a in enumerate(argv):
        if a == "--format" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--format="):
            return a.partition("=")[2]
    return "table"


if __name__ == "__main__":  # pragma: no cover
    main()
