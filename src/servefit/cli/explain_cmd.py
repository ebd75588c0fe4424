"""`servefit explain`: which memory, which consumer, which flag, and the minimal fix."""

from __future__ import annotations

import click

from servefit.cli.inputs import plan_options, request_from_cli
from servefit.cli.output import emit, format_options, require_html
from servefit.validate import COUNT, GIB_OR_ZERO

EPILOG = """\b
Examples:
  servefit explain --gpu A6000 --engine sglang==0.5.9 -- \\
      python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp-size 2 \\
      --context-length 32768 --speculative-algo NEXTN --speculative-num-steps 3 \\
      --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --mem-fraction-static 0.85
  servefit explain -m Qwen/Qwen3.6-27B --gpu A6000 --tp-size 2 --html explain.html
  servefit explain --gpu A6000 -- vllm serve Qwen/Qwen3.6-27B --tensor-parallel-size 2 \\
      --max-model-len 32768 --max-num-seqs 1024

\b
Same inputs as `servefit plan`. Shows the consumers per rank with their formulas, re-plans
every lever of the engine (SGLang or vLLM), saying which have no effect here and why, whether
each of your flags mattered, and for a failing launch the fix: the change closest to what you
asked and the best one, both starting with the headroom, at least one full-context request at
once and --concurrency running requests; more GPUs of the same kind when no flag does it.
Exit status: 0 starts, 1 fails, 2 bad input.
"""


@click.command(
    "explain",
    epilog=EPILOG,
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@plan_options
@format_options
@click.option(
    "--min-free-gib",
    type=GIB_OR_ZERO,
    default=None,
    help="Headroom the minimal fix must leave after the pools [default: 2 for SGLang "
    "(activations, CUDA graphs), 1 for vLLM (its budget holds them; slack only)].",
)
@click.option(
    "--concurrency",
    type=COUNT,
    default=None,
    help="Requests that must run at once: a fix never drops the running requests below it "
    "(nor below one full-context request).",
)
@click.option("--allow-lossy", is_flag=True, help="Let the fix change the KV / SSM-state dtypes.")
@click.option("--no-fix", is_flag=True, help="Skip the minimal-fix search.")
@click.pass_context
def explain(
    ctx: click.Context,
    fmt: str,
    html_path: str | None,
    min_free_gib: float | None,
    concurrency: int | None,
    allow_lossy: bool,
    no_fix: bool,
    **opts,
) -> None:
    """Which memory, which consumer, which flag: explain a launch and find the minimal fix."""
    from servefit._explain.analysis import explain_request
    from servefit.report.explain_view import explain_shell, render_explanation

    require_html(html_path)
    request = request_from_cli(ctx, opts)
    result = explain_request(
        request,
        min_free_gib=min_free_gib,
        with_fix=not no_fix,
        allow_lossy=allow_lossy,
        min_running=concurrency,
    )
    model = request.model if isinstance(request.model, str) else result.plan.model.name
    # the model as the user named it, for the commands printed
    emit(
        ctx,
        result,
        fmt,
        html_path,
        lambda e: render_explanation(e, model=model, env=request.env),
        result.outcome.verdict == "ok",
        lambda e: explain_shell(e, model, request.env),
        {"model": model, "env": request.env},
    )
