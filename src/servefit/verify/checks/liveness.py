"""Models list and liveness: the endpoint answers, and serves the model asked for.

The ids of /v1/models must be strings; the one chosen (--model, else the first) is the name
every later answer is checked against (verify/identity.py).

Also tells the engine apart (SGLang answers /server_info, vLLM publishes `vllm:` metrics) and
takes the speculative-decoding baseline the later checks subtract.
"""

from __future__ import annotations

from servefit.verify.checks.base import CheckContext, result
from servefit.verify.client import EndpointError
from servefit.verify.identity import ListedModel, ModelListError, answer_names, parse_model_list
from servefit.verify.result import CheckResult
from servefit.verify.spec_metrics import parse_prometheus

NAME, TITLE = "liveness", "models & liveness"


def _detect_engine(ctx: CheckContext, owned_by: str) -> None:
    for path in ("/server_info", "/get_server_info"):
        try:
            info = ctx.client.get_json(path)
        except EndpointError:
            continue
        if isinstance(info, dict) and "internal_states" in info:
            ctx.engine, ctx.server_info = "sglang", info
            return
    try:
        response = ctx.client.get("/metrics")
    except EndpointError:
        response = None
    if response is not None and response.status_code == 200 and "vllm:" in response.text:
        ctx.engine, ctx.metrics_baseline = "vllm", parse_prometheus(response.text)
        return
    if owned_by in ("sglang", "vllm"):
        ctx.engine = owned_by


def _listing(ctx: CheckContext) -> tuple[list[ListedModel], CheckResult | None]:
    """The served models, or the failed result when /v1/models does not list them by string
    ids (a NaN, a number, an entry without id): the id is what every answer is checked
    against, so a list that names no model by a string cannot be verified."""
    try:
        models = parse_model_list(ctx.client.get_json("/v1/models"))
    except ModelListError as exc:
        return [], result(NAME, TITLE, "fail", str(exc))
    if not models:
        return [], result(NAME, TITLE, "fail", "/v1/models lists no model")
    return models, None


def run(ctx: CheckContext) -> CheckResult:
    models, failed = _listing(ctx)
    if failed is not None:
        return failed
    ids = [m.id for m in models]
    wanted = ctx.options.model
    if wanted and wanted not in ids:
        return result(
            NAME,
            TITLE,
            "fail",
            f"the server does not serve {wanted!r}",
            [f"/v1/models lists {ids}"],
        )
    ctx.model = wanted or ids[0]
    entry = next(m for m in models if m.id == ctx.model)
    # every later answer must name this model (or another name of its checkpoint)
    names = answer_names(models, ctx.model)
    ctx.client.expect(ctx.model, names)
    evidence = [f"/v1/models lists {ids}" + ("" if wanted else f"; using {ctx.model!r}")]
    if len(names) > 1:
        others = sorted(names - {ctx.model})
        evidence.append(f"answers may name {others}: the same checkpoint ({entry.root})")
    # vLLM (vllm/entrypoints/openai/models/serving.py:OpenAIServingModels.show_available_models)
    # and SGLang list the context length: the generation prompts are sized to fit it
    if entry.max_model_len is not None:
        ctx.max_model_len = entry.max_model_len
        evidence.append(
            f"max_model_len {ctx.max_model_len:,}: each request's max_tokens is capped to fit it"
        )

    health = ctx.client.get("/health")
    evidence.append(f"GET /health -> HTTP {health.status_code}")
    _detect_engine(ctx, entry.owned_by)
    evidence.append(f"engine: {ctx.engine or 'not recognised (neither SGLang nor vLLM endpoints)'}")
    if health.status_code >= 400 and health.status_code != 404:
        return result(
            NAME,
            TITLE,
            "fail",
            f"/health answers HTTP {health.status_code}",
            evidence,
            models=ids,
            engine=ctx.engine,
        )
    return result(
        NAME, TITLE, "pass", f"serving {ctx.model}", evidence, models=ids, engine=ctx.engine
    )
