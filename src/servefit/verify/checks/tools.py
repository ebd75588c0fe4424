"""Tool calling: one tool offered, the call comes back parsed, with JSON arguments.

A tool-call parser (SGLang `--tool-call-parser`, vLLM `--enable-auto-tool-choice
--tool-call-parser`) turns the model's tool-call text into `tool_calls`. With none, or the
wrong one (Qwen3.5/3.6 write XML `<tool_call><function=...>` that needs `qwen3_coder`, not the
JSON `qwen25` format), the call text stays in `content`.
"""

from __future__ import annotations

import json

from servefit.verify.checks.base import CheckContext, note_loop, result, show
from servefit.verify.client import EndpointError
from servefit.verify.prompts import TOOL_PROMPT, WEATHER_TOOL
from servefit.verify.result import CheckResult

NAME, TITLE = "tools", "tool calling"
# vLLM's answer to tools with tool_choice "auto" when no parser is set (HTTP 400):
# '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
# (vllm/renderers/online_renderer.py in 0.32, entrypoints/serve/render/serving.py in 0.24,
# entrypoints/openai/chat_completion/serving.py in 0.16, entrypoints/openai/serving_chat.py in
# 0.10).
NO_PARSER = ('"auto" tool choice requires --enable-auto-tool-choice',)
CALL_MARKERS = ("<tool_call>", "<function=", "<|tool_call", '"name": "get_weather"', "[TOOL_CALLS]")


def run(ctx: CheckContext) -> CheckResult:
    body = ctx.chat_body(
        TOOL_PROMPT,
        max_tokens=max(ctx.options.short_max_tokens, 256),
        thinking=False,
        tools=[WEATHER_TOOL],
        tool_choice="auto",
    )
    try:
        completion = ctx.client.chat(body)
    except EndpointError as exc:
        if not any(m in exc.reason for m in NO_PARSER):
            raise
        return result(
            NAME,
            TITLE,
            "skip",
            "the server has no tool-call parser: start it with --enable-auto-tool-choice "
            "--tool-call-parser NAME to serve tool calls",
            [exc.reason],
        )
    evidence = [f"finish {completion.finish_reason}, {len(completion.tool_calls)} tool call(s)"]
    left = [m for m in CALL_MARKERS if m in completion.content]
    if completion.tool_calls:
        call = completion.tool_calls[0]
        fn = call.get("function") or {}
        name, arguments = fn.get("name"), fn.get("arguments")
        evidence.append(f"call: {name}({arguments})")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            return result(NAME, TITLE, "fail", "tool call arguments are not valid JSON", evidence)
        if not isinstance(parsed, dict):
            return result(
                NAME, TITLE, "fail", "tool call arguments are not a JSON object", evidence
            )
        if name != "get_weather":
            return result(
                NAME, TITLE, "fail", f"called {name!r}, not the offered get_weather", evidence
            )
        if left:
            evidence.append(f"content still holds {left}: {show(completion.content)}")
            return result(
                NAME,
                TITLE,
                "warn",
                "tool call parsed, but call text also left in content",
                evidence,
            )
        return result(NAME, TITLE, "pass", "parsed tool call with JSON arguments", evidence)
    if left:
        evidence.append(f"content: {show(completion.content)}")
        return result(
            NAME,
            TITLE,
            "fail",
            "the tool call is left in content, unparsed: tool-call parser missing or wrong "
            "(Qwen3.5/3.6 need --tool-call-parser qwen3_coder)",
            evidence,
        )
    if completion.finish_reason == "tool_calls":
        return result(
            NAME,
            TITLE,
            "fail",
            "finish_reason is tool_calls but no tool call came back",
            evidence + [f"content: {show(completion.content)}"],
        )
    evidence.append(f"content: {show(completion.content)}")
    loop = note_loop(ctx, "tool prompt", completion.content)
    if loop:
        return result(NAME, TITLE, "fail", "no tool call: the answer loops", evidence + [loop])
    return result(
        NAME, TITLE, "warn", "the model answered in text without calling the tool", evidence
    )
