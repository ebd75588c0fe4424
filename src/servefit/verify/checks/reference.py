"""Reference comparison: speculative greedy output = the same model without speculation.

Greedy speculative decoding keeps only tokens the target model would pick itself, so with
`--reference` (the same model served with speculation off) the two greedy outputs should match
token for token. Tokens come from the servers' logprobs; a server that returns none is
compared word by word. As for determinism, a late difference can be numeric drift between the
verify pass and plain decoding; an early one is a broken speculative path.
"""

from __future__ import annotations

from servefit.verify.checks.base import CheckContext, first_difference, result, show
from servefit.verify.checks.determinism import EARLY_WORDS
from servefit.verify.client import Completion, EndpointClient, EndpointError
from servefit.verify.detectors import tokenize_words
from servefit.verify.identity import ListedModel, ModelListError, answer_names, parse_model_list
from servefit.verify.prompts import REFERENCE_SET
from servefit.verify.result import CheckResult

NAME, TITLE = "reference", "speculative vs reference"


def _served(ctx: CheckContext) -> list[ListedModel]:
    """The reference's models (string ids, as for the server under test); its answers are
    checked against the same id, with the names its own listing gives that checkpoint."""
    assert ctx.reference is not None
    models = parse_model_list(ctx.reference.get_json("/v1/models"), "reference /v1/models")
    if ctx.model is not None:
        ctx.reference.expect(ctx.model, answer_names(models, ctx.model))
    return models


def _chat(client: EndpointClient, body: dict) -> Completion:
    """With logprobs (for tokens) when the server takes them, else plain text."""
    try:
        return client.chat(body)
    except EndpointError as exc:
        if ": HTTP 400:" not in exc.reason:
            raise
        return client.chat({k: v for k, v in body.items() if k != "logprobs"})


def run(ctx: CheckContext) -> CheckResult:
    if ctx.reference is None:
        return result(
            NAME,
            TITLE,
            "skip",
            "no --reference server (the same model with speculative decoding off)",
        )
    try:
        served = [m.id for m in _served(ctx)]
    except ModelListError as exc:
        return result(NAME, TITLE, "fail", str(exc))
    if ctx.model not in served:
        return result(
            NAME,
            TITLE,
            "fail",
            f"the reference does not serve {ctx.model!r}",
            [f"reference /v1/models lists {served}"],
        )
    evidence: list[str] = []
    worst: int | None = None
    for label, prompt in REFERENCE_SET:
        body = ctx.chat_body(
            prompt, max_tokens=ctx.options.short_max_tokens, thinking=False, logprobs=True
        )
        ours, theirs = _chat(ctx.client, body), _chat(ctx.reference, body)
        if ours.tokens and theirs.tokens:
            a, b, unit = ours.tokens, theirs.tokens, "token"
        else:
            a, b, unit = tokenize_words(ours.content), tokenize_words(theirs.content), "word"
        at = first_difference(a, b)
        if at is None:
            evidence.append(f"{label}: identical, {len(a)} {unit}s")
            continue
        worst = at if worst is None else min(worst, at)
        evidence.append(
            f"{label}: differ at {unit} {at}: {show(''.join(a[at : at + 8]) if unit == 'token' else ' '.join(a[at : at + 8]))}"
            f" vs reference {show(''.join(b[at : at + 8]) if unit == 'token' else ' '.join(b[at : at + 8]))}"
        )
    if worst is None:
        return result(NAME, TITLE, "pass", "greedy outputs match the reference", evidence)
    status = "fail" if worst < EARLY_WORDS else "warn"
    return result(
        NAME,
        TITLE,
        status,
        f"greedy outputs leave the reference at position {worst}",
        evidence,
        first_difference=worst,
    )
