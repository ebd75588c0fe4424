"""verify checks which model answers: the ids of /v1/models must be strings, and the `model`
of every completion must be the id asked for (or, for vLLM, another served name of the same
checkpoint). The server is the stand-in (tests/standin/openai_server.py, not an engine) or an
httpx mock transport for shapes no stand-in mode sends."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest

from servefit.verify.checks import CHECKS
from servefit.verify.checks.base import VerifyOptions
from servefit.verify.client import EndpointClient, EndpointError
from servefit.verify.identity import ListedModel, answer_names, parse_model_list
from servefit.verify.runner import verify
from tests.clihelp import run

MODEL = "Qwen/Qwen3-8B"
FAST = VerifyOptions(timeout_s=5.0, max_tokens=128, concurrency=(1,))
# liveness, one whole answer (determinism) and one stream (degenerate): both kinds of response
QUICK = tuple(c for c in CHECKS if c.name in ("liveness", "determinism", "degenerate"))
# the CLI runs liveness and determinism only
ONLY_DETERMINISM = [
    *("--skip", "degenerate", "--skip", "reasoning", "--skip", "tools", "--skip", "warm"),
    *("--skip", "speculative", "--skip", "reference", "--skip", "speed"),
    *("--timeout", "5", "--format", "json"),
]
WRONG = f"the server answered as 'other-model', asked for {MODEL!r}"


def summaries(report) -> dict[str, str]:
    return {c.name: f"{c.status}: {c.summary}" for c in report.checks}


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_answers_naming_another_model_fail_with_both_names(standin, engine):
    server = standin(behaviour="wrong_model", model=MODEL, engine=engine)
    report = verify(server.url, replace(FAST, model=MODEL), checks=QUICK)
    assert not report.ok
    assert summaries(report) == {
        "liveness": f"pass: serving {MODEL}",
        "determinism": f"fail: POST /v1/chat/completions: {WRONG}",
        "degenerate": f"fail: POST /v1/chat/completions (stream): {WRONG}",
    }


def test_cli_exit_1_names_both_models_with_and_without_model(capsys, standin):
    server = standin(behaviour="wrong_model", model=MODEL)
    for given in (["--model", MODEL], []):  # without --model: the id /v1/models lists
        code, out, _ = run(capsys, "verify", server.url, *given, *ONLY_DETERMINISM)
        determinism = json.loads(out)["checks"][1]
        assert code == 1, given
        assert determinism["summary"] == f"POST /v1/chat/completions: {WRONG}", given


def test_answers_are_checked_when_liveness_is_skipped(capsys, standin):
    server = standin(behaviour="wrong_model", model=MODEL)
    code, out, _ = run(
        capsys, "verify", server.url, "--model", MODEL, "--skip", "liveness", *ONLY_DETERMINISM
    )
    report = json.loads(out)
    assert code == 1
    assert report["model"] == MODEL
    assert report["checks"][1]["summary"] == f"POST /v1/chat/completions: {WRONG}"


@pytest.mark.parametrize(
    ("behaviour", "summary"),
    [
        ("nan_id", "/v1/models entry 0 has id NaN (a number), not a string"),
        ("numeric_id", "/v1/models entry 0 has id 7 (a number), not a string"),
        ("missing_id", '/v1/models entry 0 has no id: {"object": "model", '),
    ],
)
def test_model_ids_that_are_not_strings_fail(capsys, standin, behaviour, summary):
    server = standin(behaviour=behaviour, model=MODEL)
    code, out, _ = run(capsys, "verify", server.url, *ONLY_DETERMINISM)
    liveness = json.loads(out)["checks"][0]
    assert code == 1
    assert (liveness["status"], liveness["summary"][: len(summary)]) == ("fail", summary)


def test_vllm_answers_with_its_first_served_name(standin):
    # vLLM --served-model-name Qwen/Qwen3-8B qwen: a request for "qwen" is answered as
    # "Qwen/Qwen3-8B" (models/serving.py:OpenAIServingModels.model_name), one checkpoint.
    server = standin(engine="vllm", model=MODEL, aliases=("qwen",))
    report = verify(server.url, replace(FAST, model="qwen"), checks=QUICK)
    assert report.ok, summaries(report)
    assert report.check("liveness").evidence[1].startswith(f"answers may name [{MODEL!r}]")


def test_reference_answering_as_another_model_fails(standin):
    reference = standin(behaviour="wrong_model", model=MODEL, speculative=False)
    only = tuple(c for c in CHECKS if c.name in ("liveness", "reference"))
    report = verify(
        standin(model=MODEL).url, replace(FAST, reference_url=reference.url), checks=only
    )
    assert report.check("reference").summary == f"POST /v1/chat/completions: {WRONG}"


# ---------------------------------------------------------------- shapes no stand-in mode sends


def _client(handler) -> EndpointClient:
    return EndpointClient("http://x", transport=httpx.MockTransport(handler))


def _whole(model_json: str):
    body = (
        '{"object": "chat.completion", ' + model_json + '"choices": [{"index": 0, '
        '"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}'
    )
    return lambda request: httpx.Response(
        200, content=body.encode(), headers={"content-type": "application/json"}
    )


@pytest.mark.parametrize(
    ("model_json", "reason"),
    [
        (
            '"model": NaN, ',
            f"the response's model is NaN (a number), not a string; asked for {MODEL!r}",
        ),
        ('"model": null, ', f"the response's model is null, not a string; asked for {MODEL!r}"),
        ("", f'the response names no model (no "model" field), asked for {MODEL!r}'),
        ('"model": "other-model", ', WRONG),
    ],
)
def test_a_whole_answer_must_name_the_model_asked_for(model_json, reason):
    with pytest.raises(EndpointError) as info:
        _client(_whole(model_json)).chat({"model": MODEL, "messages": []})
    assert info.value.reason == f"POST /v1/chat/completions: {reason}"


def test_a_stream_whose_later_events_name_another_model_fails():
    def handler(request: httpx.Request) -> httpx.Response:
        events = [
            {"model": MODEL, "choices": [{"index": 0, "delta": {"content": "one "}}]},
            {"model": "other-model", "choices": [{"index": 0, "delta": {"content": "two"}}]},
            {"model": MODEL, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    with pytest.raises(EndpointError) as info:
        _client(handler).stream_chat({"model": MODEL, "messages": []})
    assert info.value.reason == f"POST /v1/chat/completions (stream): {WRONG}"


def test_accepted_names_are_one_checkpoints_base_ids():
    listing = {
        "data": [
            {"id": MODEL, "root": "/models/qwen3-8b"},
            {"id": "qwen", "root": "/models/qwen3-8b"},
            {"id": "sql-lora", "root": "/adapters/sql", "parent": MODEL},
            {"id": "llama", "root": "/models/llama"},
        ]
    }
    models = parse_model_list(listing)
    assert models[2] == ListedModel("sql-lora", root="/adapters/sql", parent=MODEL)
    assert answer_names(models, "qwen") == {"qwen", MODEL}
    assert answer_names(models, "sql-lora") == {"sql-lora"}  # an adapter answers as itself
    assert answer_names(models, "llama") == {"llama"}
    assert answer_names([ListedModel("m")], "m") == {"m"}  # no root: the id alone
