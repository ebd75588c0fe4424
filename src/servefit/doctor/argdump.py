"""Read the server arguments an engine prints at start-up.

* SGLang: `server_args=ServerArgs(model_path='...', tp_size=2, ...)` — the dataclass repr after
  ServerArgs.__post_init__, i.e. the *resolved* values (sglang/srt/entrypoints/engine.py).
* vLLM: `non-default args: {'model': '...', 'tensor_parallel_size': 2}` — a dict repr of what the
  user set (vllm/entrypoints/common/startup.py).

Both are Python reprs. A repr can be cut (log excerpts, the 64 KiB line limit) or hold values
that are not literals (`<Enum: 1>`, `{...}`), so fields are split at top-level commas and each
value is read with `ast.literal_eval`, falling back to the raw text; a cut field is dropped.
"""

from __future__ import annotations

import ast
from typing import Any

_OPEN = {"(": ")", "[": "]", "{": "}"}


def _split_top(body: str, sep: str = ",") -> tuple[list[str], bool]:
    """Top-level pieces of `body` (quotes and brackets respected) and whether it closed."""
    parts: list[str] = []
    depth: list[str] = []
    quote: str | None = None
    cur: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(body):
                cur.append(body[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "'\"":
            quote = c
        elif c in _OPEN:
            depth.append(_OPEN[c])
        elif depth and c == depth[-1]:
            depth.pop()
        elif not depth and c in ")}":
            parts.append("".join(cur))
            return [p for p in parts if p.strip()], True
        elif not depth and c == sep:
            parts.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    if cur and not quote and not depth:
        parts.append("".join(cur))
    return [p for p in parts if p.strip()], False


def _value(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def parse_server_args(body: str) -> dict[str, Any]:
    """`model_path='x', tp_size=2, ...)` (the text after `ServerArgs(`) -> dict."""
    parts, closed = _split_top(body)
    out: dict[str, Any] = {}
    for i, part in enumerate(parts):
        if not closed and i == len(parts) - 1:
            break  # the last field of a cut repr may itself be cut
        key, eq, val = part.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            continue
        out[key] = _value(val)
    return out


def parse_dict_repr(body: str) -> dict[str, Any]:
    """`{'model': 'x', 'tensor_parallel_size': 2}` -> dict (tolerant of cut or odd values)."""
    body = body.strip()
    try:
        val = ast.literal_eval(body)
        if isinstance(val, dict):
            return {str(k): v for k, v in val.items()}
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    if not body.startswith("{"):
        return {}
    parts, closed = _split_top(body[1:])
    out: dict[str, Any] = {}
    for i, part in enumerate(parts):
        if not closed and i == len(parts) - 1:
            break
        key, colon, val = part.partition(":")
        if not colon:
            continue
        k = _value(key)
        if isinstance(k, str):
            out[k] = _value(val)
    return out
