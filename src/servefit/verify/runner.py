"""Run the checks against one endpoint and collect the report."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import fields, replace

from servefit.redact import Redactor, redact_url
from servefit.verify.checks import CHECKS
from servefit.verify.checks.base import Check, CheckContext, VerifyOptions, result
from servefit.verify.client import Deadline, EndpointClient, EndpointError
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


# What a check's context holds besides the clients: copied back once the check has ended.
_SHARED = tuple(f.name for f in fields(CheckContext) if f.name not in ("client", "reference"))
# A check's thread gets this much after its deadline to notice it before it is left behind.
_GRACE_S = 2.0


def _budget(left: float, checks_left: int) -> float:
    """A check's share of the time left: twice a fair share, so that a slow check can use what
    quick ones left over, never more than what is left."""
    return min(left, 2.0 * left / max(checks_left, 1))


def _run_bounded(check: Check, ctx: CheckContext, seconds: float) -> CheckResult:
    """Run a check with its own deadline, in a thread: a check still busy at its deadline (plus
    a grace period) is reported as failed and left behind, its clients' deadline expired so that
    it sends nothing more. The verify run as a whole never waits on a server."""
    deadline = Deadline.after(seconds)
    own = replace(
        ctx,
        client=ctx.client.bound(deadline),
        reference=ctx.reference.bound(deadline) if ctx.reference is not None else None,
    )
    box: list[CheckResult] = []
    worker = threading.Thread(target=lambda: box.append(_run_one(check, own)), daemon=True)
    worker.start()
    worker.join(seconds + _GRACE_S)
    if worker.is_alive() or not box:
        deadline.expire()
        return result(
            check.name,
            check.title,
            "fail",
            f"no result within the check's deadline ({seconds:.0f} s): the server kept it busy",
        )
    for name in _SHARED:
        setattr(ctx, name, getattr(own, name))
    return box[0]


def _redactor(options: VerifyOptions) -> Callable[[CheckResult], CheckResult]:
    """What every result goes through before it is shown or returned: URLs (credentials,
    secret query values) and the API key itself, wherever a server echoed it."""
    redactor = Redactor().with_values([options.api_key] if options.api_key else [])

    def text(line: str) -> str:
        return redact_url(redactor.text(line))

    def clean(outcome: CheckResult) -> CheckResult:
        return outcome.model_copy(
            update={
                "summary": text(outcome.summary),
                "evidence": [text(line) for line in outcome.evidence],
                "data": redactor.data(outcome.data),
            }
        )

    return clean


def verify(
    url: str,
    options: VerifyOptions | None = None,
    *,
    checks: tuple[Check, ...] = CHECKS,
    progress: Progress | None = None,
) -> VerifyReport:
    """Run every check against `url` (an OpenAI-compatible server) and return the report, within
    options.deadline_s whatever the server does."""
    options = options or VerifyOptions()
    end = time.monotonic() + options.deadline_s
    client = EndpointClient(url, api_key=options.api_key, timeout_s=options.timeout_s)
    try:
        reference = (
            EndpointClient(
                options.reference_url, api_key=options.api_key, timeout_s=options.timeout_s
            )
            if options.reference_url
            else None
        )
    except BaseException:  # a reference URL that cannot be used (ArgumentError, exit 2)
        client.close()
        raise
    ctx = CheckContext(client=client, options=options, reference=reference)
    clean = _redactor(options)
    outcomes: list[CheckResult] = []
    try:
        for i, check in enumerate(checks):
            down = ctx.results.get("liveness")
            left = end - time.monotonic()
            if check.name in options.skip:
                outcome = result(check.name, check.title, "skip", "skipped with --skip")
            elif check.needs_generation and down is not None and down.status == "fail":
                outcome = result(
                    check.name, check.title, "skip", "skipped: the endpoint is not serving"
                )
            elif left <= 0:
                outcome = result(
                    check.name,
                    check.title,
                    "skip",
                    f"not run: the verify deadline ({options.deadline_s:g} s) had passed",
                )
            else:
                outcome = _run_bounded(check, ctx, _budget(left, len(checks) - i))
            outcome = clean(outcome)
            ctx.results[check.name] = outcome
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    finally:
        client.close()
        if reference is not None:
            reference.close()
    # --model names the report when liveness, which checks that the server serves it, was
    # skipped: every request still asked for it and every answer was checked against it
    asked = options.model if "liveness" in options.skip else None
    return VerifyReport(
        url=client.shown_url,
        model=ctx.model or asked,
        engine=ctx.engine,
        reference_url=reference.shown_url if reference else None,
        checks=outcomes,
    )
