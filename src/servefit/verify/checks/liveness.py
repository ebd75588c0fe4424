"""Models list and liveness: the endpoint answers, and serves the model asked for.

Also tells the engine apart (SGLang answers /server_info, vLLM publishes `vllm:` metrics) and
takes the speculative-decoding baseline the later checks subtract.
"""

from __future__ import annotations

from servefit.verify.checks.base import CheckContext, result
from servefit.verify.client import EndpointError
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


def run(ctx: CheckContext) -> CheckResult:
    listing = ctx.client.get_json("/v1/models")
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return result(
            NAME, TITLE, "fail", f"/v1/models is not a model list: {str(listing)[:120]!r}"
        )
    ids = [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]
    if not ids:
        return result(NAME, TITLE, "fail", "/v1/models lists no model")
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
    entry = next((m for m in data if isinstance(m, dict) and m.get("id") == ctx.model), {})
    owned_by = str(entry.get("owned_by", ""))
    evidence = [f"/v1/models lists {ids}" + ("" if wanted else f"; using {ctx.model!r}")]
    # vLLM (vllm/entrypoints/openai/models/serving.py:OpenAIServingModels.show_available_models)
    # and SGLang list the context length: the generation prompts are sized to fit it
    if isinstance(entry.get("max_model_len"), int) and entry["max_model_len"] > 0:
        ctx.max_model_len = entry["max_model_len"]
        evidence.append(
            f"max_model_len {ctx.max_model_len:,}: each request's max_tokens is capped to fit it"
        )

    health = ctx.client.get("/health")
    evidence.append(f"GET /health -> HTTP {health.status_code}")
    _detect_engine(ctx, owned_by)
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
