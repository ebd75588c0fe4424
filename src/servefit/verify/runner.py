"""Run the checks against one endpoint and collect the report."""

from __future__ import annotations

from collections.abc import Callable

from servefit.verify.checks import CHECKS
from servefit.verify.checks.base import Check, CheckContext, VerifyOptions, result
from servefit.verify.client import EndpointClient, EndpointError
from servefit.verify.result import CheckResult, VerifyReport

# Called after each check, e.g. to print progress.
Progress = Callable[[CheckResult], None]


def _run_one(check: Check, ctx: CheckContext) -> CheckResult:
    try:
        return check.run(ctx)
    except EndpointError as exc:
        return result(check.name, check.title, "fail", exc.reason)
    except Exception as exc:  # a response shape nothing anticipated: report it, do not crash
        return result(
            check.name, check.title, "fail", f"unexpected response: {type(exc).__name__}: {exc}"
        )


def verify(
    url: str,
    options: VerifyOptions | None = None,
    *,
    checks: tuple[Check, ...] = CHECKS,
    progress: Progress | None = None,
) -> VerifyReport:
    """Run every check against `url` (an OpenAI-compatible server) and return the report."""
    options = options or VerifyOptions()
    client = EndpointClient(url, api_key=options.api_key, timeout_s=options.timeout_s)
    reference = (
        EndpointClient(options.reference_url, api_key=options.api_key, timeout_s=options.timeout_s)
        if options.reference_url
        else None
    )
    ctx = CheckContext(client=client, options=options, reference=reference)
    outcomes: list[CheckResult] = []
    try:
        for check in checks:
            down = ctx.results.get("liveness")
            if check.name in options.skip:
                outcome = result(check.name, check.title, "skip", "skipped with --skip")
            elif check.needs_generation and down is not None and down.status == "fail":
                outcome = result(
                    check.name, check.title, "skip", "skipped: the endpoint is not serving"
                )
            else:
                outcome = _run_one(check, ctx)
            ctx.results[check.name] = outcome
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    finally:
        client.close()
        if reference is not None:
            reference.close()
    return VerifyReport(
        url=client.shown_url,
        model=ctx.model,
        engine=ctx.engine,
        reference_url=reference.shown_url if reference else None,
        checks=outcomes,
    )
