"""`servefit fit`: search parallelism and memory flags for the best launch command."""

from __future__ import annotations

import click

from servefit.cli.fit_inputs import fit_options
from servefit.cli.output import emit, format_options, require_html

EPILOG = """\b
Examples:
  servefit fit Qwen/Qwen3.6-27B --gpu A6000 --num-gpus 2 --context 32768 --spec mtp \\
      --concurrency 16 --engine sglang==0.5.9
  servefit fit Qwen/Qwen3.5-397B-A17B --gpu H100 --num-gpus 8 --nodes 2 --context 131072
  servefit fit --gpu A6000 --concurrency 16 --engine sglang==0.5.9 -- \\
      python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp-size 2 ...
  servefit fit Qwen/Qwen3.6-27B --gpu A6000 --num-gpus 2 --context 32768 --spec mtp \\
      --engine vllm==0.33.0

\b
A launch command after `--` is your baseline: it is planned and shown beside the best, it
fills in MODEL, --num-gpus, --context, --spec and --engine when they are not given, and its
other flags (parsers, host, port) are kept in the commands servefit prints.
Effective concurrency = min(running requests, KV tokens / context): requests of the target
context that run at once. SGLang: TP/PP, --max-running-requests, the state pool and
--mem-fraction-static are searched; vLLM: TP/PP, --max-num-seqs and --gpu-memory-utilization
(--max-model-len is the target context). Exit status: 0 something starts, 1 nothing does, 2 bad input.
"""


@click.command("fit", epilog=EPILOG)
@fit_options
@format_options
@click.pass_context
def fit(ctx: click.Context, fmt: str, html_path: str | None, **opts) -> None:
    """Search TP/PP and memory flags for the launch with the best effective concurrency."""
    from servefit._fit.search import fit as run_fit
    from servefit.cli.fit_inputs import fit_request_from_cli
    from servefit.report.fit_view import render_fit, render_fit_shell

    require_html(html_path)
    result = run_fit(fit_request_from_cli(ctx, opts))
    emit(ctx, result, fmt, html_path, render_fit, bool(result.best), render_fit_shell)
