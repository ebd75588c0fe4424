"""The one line every command's output starts with: fails / starts but degraded / starts.

"N full-context requests at once" is min(running-request cap, KV tokens / context): requests
of the full context length that run at the same time (for vLLM the engine's own "Maximum
concurrency" figure, which also counts the Mamba blocks each request holds). A launch that
starts is degraded when
- its KV pool cannot hold one request at the context length (it starts, then refuses or
  truncates long requests),
- the engine caps the running requests below what was asked, or
- the headroom left after the pools is under the floor explain and fit demand.
"""

from __future__ import annotations

from typing import Literal

from rich.console import Group

from servefit._explain.catalogue import catalogue_for
from servefit._explain.outcome import outcome
from servefit._explain.schema import Outcome
from servefit._plan.schema import Plan
from servefit.frozen import frozen
from servefit.report.grid import Para

Status = Literal["fails", "degraded", "starts"]
STYLE = {"fails": "bold red", "degraded": "bold yellow", "starts": "bold green"}
WORDS = {"fails": "FAILS", "degraded": "STARTS BUT DEGRADED", "starts": "STARTS"}


@frozen
class Verdict:
    status: Status
    headline: str  # the rest of the first line
    reasons: tuple[str, ...] = ()  # why degraded / the cause of a failure, one per line

    def text(self) -> Group:
        word = WORDS[self.status]
        parts = [Para(self.headline, prefix=f"{word}: ", prefix_style=STYLE[self.status])]
        parts += [Para(r, prefix="  - ", indent=4) for r in self.reasons]
        return Group(*parts)

    def line(self) -> str:
        return f"{WORDS[self.status]}: {self.headline}"


@frozen
class Floor:
    gib: float  # the headroom a launch must leave
    means: str  # what the headroom is for, in words


def floor_for(engine: str, min_free_gib: float | None = None) -> Floor:
    cat = catalogue_for(engine)
    return Floor(cat.min_free_gib if min_free_gib is None else min_free_gib, cat.headroom_means)


def requests(n: float) -> str:
    """2 decimals, without a trailing .00: "10.29", "16", "0.32"."""
    s = f"{n:,.2f}"
    return s[:-3] if s.endswith(".00") else s


def counted(n: float, noun: str) -> str:
    """ "1 full-context request", "0.32 full-context requests", "16 full-context requests"."""
    shown = requests(n)
    return f"{shown} {noun}" if shown == "1" else f"{shown} {noun}s"


def first_sentence(error: str) -> str:
    """`RuntimeError: Not enough memory. Please try ...` -> `RuntimeError: Not enough memory.`"""
    head = error.strip().split("\n")[0]
    cut = head.find(". ")
    return head[: cut + 1] if cut > 0 else head


def of_outcome(o: Outcome, asked: int | None, floor: Floor, cap_reason: str = "") -> Verdict:
    """The verdict of one planned launch; `asked` is the running requests the user asked for
    (--max-running-requests / --max-num-seqs, or fit's --concurrency)."""
    if o.verdict != "ok":
        why = f"the engine stops at start-up: {first_sentence(o.error or 'it fails')}"
        cause = (f"cause: the {o.error_consumer}",) if o.error_consumer else ()
        return Verdict("fails", why, cause)
    n = min(o.full_context_requests, float(o.max_running_requests))
    head = f"{counted(n, 'full-context request')} at once"
    head += f" (of the {asked} you asked for)" if asked else ""
    head += f", {o.target_context:,} tokens each"
    if not asked:
        head += f"; up to {o.max_running_requests} running requests"
    reasons = []
    if o.full_context_requests < 1:
        reasons.append(
            f"the KV pool holds {o.kv_tokens:,} tokens, {requests(o.full_context_requests)} of "
            f"one {o.target_context:,}-token request: longer requests are refused or truncated"
        )
    if asked and o.max_running_requests < asked:
        by = f" ({cap_reason or o.cap_reason})" if (cap_reason or o.cap_reason) else ""
        reasons.append(
            f"the engine caps running requests at {o.max_running_requests}, below the "
            f"{asked} asked for{by}"
        )
    if o.free_gib < floor.gib:
        reasons.append(
            f"only {o.free_gib:.2f} GiB left after the pools {floor.means} "
            f"(at least {floor.gib:g} GiB is safe)"
        )
    return Verdict("degraded" if reasons else "starts", head, tuple(reasons))


def asked_running(plan: Plan) -> int | None:
    """What the user asked for: the running-request flag of the launch, if given."""
    v = plan.user_args.get(catalogue_for(plan.engine.name).running_dest)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def weights_exceed(plan: Plan) -> bool:
    """The weights alone (target and draft, most loaded rank) exceed the memory free before
    they load: the engine dies loading them, before any pool is sized."""
    r = plan.per_rank
    return r.weights_gib + r.draft_weights_gib >= r.pre_load_free_gib > 0


def of_plan(plan: Plan, *, asked: int | None = None, min_free_gib: float | None = None) -> Verdict:
    o = outcome(plan)
    v = of_outcome(
        o,
        asked if asked is not None else asked_running(plan),
        floor_for(plan.engine.name, min_free_gib),
    )
    if v.status == "fails" and weights_exceed(plan):
        r = plan.per_rank
        return Verdict(
            "fails",
            f"the weights alone need {r.weights_gib + r.draft_weights_gib:.2f} GiB per GPU and "
            f"{r.pre_load_free_gib:.2f} GiB is free before they load: the engine runs out of "
            "memory loading them (CUDA out of memory)",
        )
    if v.status == "fails" and plan.error_detail:
        v = Verdict(v.status, v.headline, (f"cause: {plan.error_detail}",))
    return v


def rejection(error: str, hints: tuple[str, ...], fmt: str = "table") -> None:
    """A launch the engine refuses before it loads anything (its argparse): the FAILS verdict
    with the flags probably meant; JSON `{"verdict": "fail", "error", "hints"}`; nothing for
    --format shell (there is no command to recommend)."""
    if fmt == "json":
        import json

        print(json.dumps({"verdict": "fail", "error": error, "hints": list(hints)}, indent=2))
        return
    if fmt == "shell":
        return
    from servefit.report.console import make_console

    v = Verdict("fails", f"the engine stops at start-up: {error}", hints)
    make_console().print(v.text())
