"""The HTTP client against the stand-in server (tests/standin/openai_server.py, not an engine):
streamed and whole chat completions, both engines' reasoning field names, tool-call pieces,
early stop, and every HTTP fault turned into one clear reason."""

from __future__ import annotations

import json

import httpx
import pytest

from servefit.verify.client import EndpointClient, EndpointError, normalize_base_url
from tests.standin.openai_server import SEED_LOOP_UNIT

COUNT = [{"role": "user", "content": "Count from 1 to 20"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def client_for(server, timeout_s: float = 5.0) -> EndpointClient:
    return EndpointClient(server.url + "/v1/", timeout_s=timeout_s)


def test_base_url_accepts_the_v1_form():
    assert normalize_base_url("http://h:30000/v1/") == "http://h:30000"
    assert normalize_base_url(" http://h:8000 ") == "http://h:8000"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_stream_and_whole_agree_and_read_both_reasoning_fields(standin, engine):
    # SGLang sends reasoning_content, vLLM 0.33 sends reasoning; both must land in .reasoning.
    server = standin(engine=engine)
    with client_for(server) as client:
        body = {"messages": COUNT, "temperature": 0, "max_tokens": 200}
        whole, streamed = client.chat(body), client.stream_chat(body)
    expected = ", ".join(str(i) for i in range(1, 21)) + "."
    assert whole.content == streamed.content == expected
    assert whole.reasoning == streamed.reasoning == "Counting is a simple sequence."
    assert streamed.done and streamed.finish_reason == "stop"
    # usage from the final chunk (stream_options.include_usage). The stand-in's tokenizer
    # (words, punctuation runs, whitespace runs): content = 20 numbers + 19 "," + 19 " " + "."
    # = 59; reasoning "Counting is a simple sequence." = 5 words + 4 spaces + "." = 10.
    assert streamed.completion_tokens == whole.completion_tokens == 69
    assert streamed.ttft_s is not None and streamed.last_token_s >= streamed.ttft_s


def test_streamed_tool_call_pieces_are_merged(standin):
    server = standin()
    body = {
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [WEATHER],
        "chat_template_kwargs": {"enable_thinking": False},
    }
    with client_for(server) as client:
        streamed = client.stream_chat(body)
    assert streamed.finish_reason == "tool_calls"
    assert len(streamed.tool_calls) == 1
    fn = streamed.tool_calls[0]["function"]
    assert fn["name"] == "get_weather"
    assert json.loads(fn["arguments"]) == {"city": "Paris"}


def test_callback_stops_the_stream(standin):
    server = standin(behaviour="looping")
    seen: list[str] = []

    def stop_after_five(channel: str, text: str) -> bool:
        seen.append(text)
        return len(seen) >= 5

    with client_for(server) as client:
        out = client.stream_chat({"messages": COUNT, "max_tokens": 4000}, stop_after_five)
    assert out.stopped_early and not out.done
    # The loop arrives in the reasoning channel, token by token: thinking, \n\n, thinking...
    assert out.reasoning == SEED_LOOP_UNIT * 2 + "thinking"


@pytest.mark.parametrize(
    ("behaviour", "stream", "reason"),
    [
        ("error_500", False, "HTTP 500: Internal server error: CUDA error"),
        ("error_500", True, "HTTP 500: Internal server error: CUDA error"),
        ("malformed_json", False, "returned a body that is not JSON"),
        ("malformed_json", True, "is not JSON"),
        ("drop_stream", False, "closed the connection mid-response"),
        ("drop_stream", True, "without a finish_reason or [DONE]"),
        ("hang", False, "no response within 0.3 s"),
        ("hang", True, "stream stalled, no data for 0.3 s"),
    ],
)
def test_http_faults_become_one_line_reasons(standin, behaviour, stream, reason):
    server = standin(behaviour=behaviour)
    with client_for(server, timeout_s=0.3) as client:
        call = client.stream_chat if stream else client.chat
        with pytest.raises(EndpointError) as info:
            call({"messages": COUNT})
    assert reason in info.value.reason
    assert "\n" not in info.value.reason


def test_connection_refused_is_a_reason(standin):
    server = standin()
    url = server.url
    server.shutdown()
    server.server_close()
    with EndpointClient(url, timeout_s=1) as client, pytest.raises(EndpointError) as info:
        client.get_json("/v1/models")
    assert info.value.reason.startswith(f"GET /v1/models: cannot connect to {url}")


def test_error_event_mid_stream_is_reported():
    # vLLM and SGLang send {"error": {...}} as a data event when generation fails mid-stream.
    def handler(request: httpx.Request) -> httpx.Response:
        body = 'data: {"error": {"message": "out of KV cache", "code": 500}}\n\n'
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    client = EndpointClient("http://x", transport=httpx.MockTransport(handler))
    with pytest.raises(EndpointError) as info:
        client.stream_chat({"messages": COUNT})
    assert info.value.reason.endswith("error mid-stream: out of KV cache")


def test_api_key_is_sent_as_bearer():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["auth"] = request.headers.get("authorization")
        return httpx.Response(200, json={"object": "list", "data": []})

    EndpointClient("http://x", api_key="sk-1", transport=httpx.MockTransport(handler)).get_json(
        "/v1/models"
    )
    assert seen["auth"] == "Bearer sk-1"
