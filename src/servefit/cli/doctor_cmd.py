"""`servefit doctor LOG`: read an SGLang / vLLM log, find the root cause, re-plan from its numbers."""

from __future__ import annotations

import click

EPILOG = """\b
Examples:
  servefit doctor sglang-serve.log
  servefit doctor sglang-serve.log --since "10:40" \\
      --command "python -m sglang.launch_server --model-path /root/models/Qwen3.6-27B --tp-size 2 ..."
  servefit doctor vllm.log --gpu H100 --format json
  journalctl -u sglang | servefit doctor -

\b
LOG is a file, or - (or /dev/stdin) for standard input. It may be gzip, xz, lzma, bzip2 or
zstd compressed (told by its first bytes; zstd needs the zstandard package), UTF-8 (with or
without a byte-order mark) or UTF-16, with LF, CRLF or bare CR line ends.

\b
The diagnosis uses the latest complete launch in the file (or the one whose arguments match
--command) and says which. Memory figures are re-planned with the log's own measurements.
Exit status: 0 nothing wrong, 1 the launch failed or something needs attention, 2 bad input.
"""


@click.command("doctor", epilog=EPILOG)
@click.argument("log", metavar="LOG")
@click.option(
    "--command",
    "command",
    default=None,
    help="The launch command you are debugging: the log is checked against it, and the fix is applied to it.",
)
@click.option(
    "--since",
    default=None,
    help="When you started that launch ('2026-04-20 10:40', '10:40', or an age like 30m): "
    "older launches in the file are reported as stale.",
)
@click.option(
    "-m",
    "--model",
    default=None,
    help="Model config for the re-plan (path, catalog id or Hub id), "
    "when the log's model path is not readable here.",
)
@click.option(
    "-g",
    "--gpu",
    default=None,
    help="GPU name (see `servefit gpus`), when the log does not say; cpu for a log of vLLM's "
    "CPU platform (replayed on this machine's CPU).",
)
@click.option(
    "-e",
    "--engine",
    default=None,
    help="Engine version for the re-plan, e.g. sglang==0.5.9 (SGLang does not print its version).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "shell"]),
    default="table",
    show_default=True,
    help="table for people, json (one object, docs/doctor-json.md) for scripts; shell: only "
    "the fixed launch command (nothing when there is no fix).",
)
@click.option(
    "--no-record",
    is_flag=True,
    help="Do not store what the log measured in the calibration store (docs/calibration.md; "
    "by default plan, explain and fit of the same model, GPU and layout use it).",
)
@click.pass_context
def doctor(
    ctx: click.Context,
    log: str,
    command: str | None,
    since: str | None,
    model: str | None,
    gpu: str | None,
    engine: str | None,
    fmt: str,
    no_record: bool,
) -> None:
    """Diagnose an SGLang or vLLM log: root cause, fix, and what to watch on a server that started."""
    from servefit.doctor.diagnose import diagnose
    from servefit.doctor.launches import read_log

    if engine is not None:
        from servefit.engines.registry import select

        select(engine)  # one clear line for a malformed --engine or release
    if gpu is not None and gpu.lower() not in ("local", "cpu"):
        from servefit.hardware.catalog import get_gpu

        get_gpu(gpu)  # one clear line for a GPU servefit does not know
    if model is not None:
        from servefit.model.inventory import load_model

        load_model(model)  # a --model that cannot be read is an error, not a silent fallback
    if command is not None:
        from servefit.engines.secretflags import redactor

        command = redactor().text(command)  # it is quoted back, and fixed, in the report
    facts = read_log(log)
    report = diagnose(facts, command=command, since=since, model=model, gpu=gpu, engine=engine)
    recorded = None if no_record else _record(report.calibration)
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    elif fmt == "shell":
        if report.fix is not None and report.fix.command:
            from servefit.report.commands import command_block

            click.echo(command_block(report.fix.command))
    else:
        from servefit.doctor.render import render

        render(report)
        if recorded:
            from servefit.report.console import make_console
            from servefit.report.grid import Para

            make_console().print(Para(recorded))
    ctx.exit(0 if report.status == "ok" else 1)


def _record(entry: dict | None) -> str | None:
    """Store the report's calibration entry; the line that says so (None: nothing to store)."""
    if entry is None:
        return None
    from servefit.calibration import store
    from servefit.calibration.entry import from_dict
    from servefit.errors import ServefitError

    try:
        _, written = store.save(from_dict(entry, "doctor"))
    except ServefitError as exc:
        return f"calibration not recorded: {exc}"
    if not written:
        return (
            f"calibration {entry['id']} already recorded (servefit calibration show {entry['id']})"
        )
    return (
        f"calibration {entry['id']} recorded: plan, explain and fit of this model, GPU and layout "
        f"now use it (servefit calibration show {entry['id']}; --no-calibration for the cold plan)"
    )
