"""The fixed prompts verify sends. Short, and each with an answer that is easy to judge."""

from __future__ import annotations

COUNT = "Count from 1 to 20, separated by commas. Reply with the numbers only."
REASONING = (
    "A shop has 3 boxes with 12 apples in each box. It sells 10 apples. "
    "How many apples are left? Think it through, then give the number."
)
REASONING_ANSWER = "26"
EXPLAIN = "Explain in three sentences what a prefix cache in an LLM server does."
STEPS = "Give five numbered steps for checking that a deployed LLM server answers correctly."

# The degenerate-output prompt set: counting, reasoning, an explanation, a numbered list.
DEGENERATE_SET = (("count", COUNT), ("reasoning", REASONING), ("steps", STEPS))

DETERMINISM = EXPLAIN
REFERENCE_SET = (("count", COUNT), ("explain", EXPLAIN))

TOOL_PROMPT = "What is the weather in Paris right now? Use the get_weather tool."
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

# A shared document long enough to fill several KV pages (vLLM blocks hold 16 tokens, SGLang
# pages 1 to 64), so the rerun can hit the prefix cache.
WARM_DOCUMENT = " ".join(
    [
        "A serving engine keeps the attention keys and values of every token it has processed.",
        "When a new request starts with the same tokens as an earlier one, the engine can reuse",
        "those entries instead of computing them again; this is the prefix cache. It saves the",
        "prefill time of the shared part, which for long system prompts and multi-turn chats is",
        "most of the work. The cache is organised in pages or blocks of tokens, and only whole",
        "matching pages are reused. Entries are evicted when memory runs short, oldest first.",
        "Hybrid models with recurrent layers must also keep the recurrent state at the end of",
        "the shared prefix, which is larger than the attention entries of a single token, so",
        "engines cache it only at some positions. A cached answer must be identical to the",
        "answer computed from scratch: reuse changes the cost, never the result.",
    ]
)
WARM_QUESTION = "Summarise the text above in two sentences."

SPEED = (
    "Write a detailed, 400-word explanation of how a GPU generates text with a large "
    "language model, from the prompt to the last token."
)
