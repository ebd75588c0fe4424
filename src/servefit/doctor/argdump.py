"""Read the server arguments an engine prints at start-up.

* SGLang: `server_args=ServerArgs(model_path='...', tp_size=2, ...)` — the dataclass repr after
  ServerArgs.__post_init__, i.e. the *resolved* values (sglang/srt/entrypoints/engine.py).
* vLLM: `non-default args: {'model': '...', 'tensor_parallel_size': 2}` — a dict repr of what the
  user set (vllm/entrypoints/common/startup.py).
* The launch command itself, when the log (or --command) carries it: `args_from_command`.

Both are Python reprs. A repr can be cut (log excerpts, the 64 KiB line limit) or hold values
that are not literals (`<Enum: 1>`, `{...}`), so fields are split at top-level commas and each
value is read with `ast.literal_eval`, falling back to the raw text; a cut field is dropped.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from servefit.engines import registry
from servefit.engines.command import parse_launch_command
from servefit.errors import ServefitError

_OPEN = {"(": ")", "[": "]", "{": "}"}


# The characters that matter to the split; everything between them is copied as it is.
_SPECIAL = re.compile(r"[\\'\"()\[\]{}]|,")
_SIMPLE_VALUE = re.compile(r"-?(?:0|[1-9]\d*)|-?\d+\.\d*(?:e-?\d+)?|'[^'\\]*'|\"[^\"\\]*\"")
_CONSTANTS = {"None": None, "True": True, "False": False}


def _split_top(body: str, sep: str = ",") -> tuple[list[str], bool]:
    """Top-level pieces of `body` (quotes and brackets respected) and whether it closed.

    Only the quote, bracket, backslash and separator characters are visited (one regex scan):
    a server_args dump is 10 KB of mostly plain text, and a log may hold thousands of them."""
    special = _SPECIAL if sep == "," else re.compile(_SPECIAL.pattern[:-1] + re.escape(sep))
    parts: list[str] = []
    depth: list[str] = []
    quote: str | None = None
    start = 0
    skip_to = -1  # the character after a backslash inside a quote is not special
    for m in special.finditer(body):
        i = m.start()
        if i < skip_to:
            continue
        c = body[i]
        if quote:
            if c == "\\":
                skip_to = i + 2
            elif c == quote:
                quote = None
            continue
        if c in "'\"":
            quote = c
        elif c in _OPEN:
            depth.append(_OPEN[c])
        elif depth and c == depth[-1]:
            depth.pop()
        elif not depth and c in ")}":
            parts.append(body[start:i])
            return [p for p in parts if p.strip()], True
        elif not depth and c == sep:
            parts.append(body[start:i])
            start = i + 1
    if start < len(body) and not quote and not depth:
        parts.append(body[start:])
    return [p for p in parts if p.strip()], False


def _value(text: str) -> Any:
    text = text.strip()
    if text in _CONSTANTS:
        return _CONSTANTS[text]
    if _SIMPLE_VALUE.fullmatch(text):  # ints, floats, plain quoted strings: no parser needed
        if text[0] in "'\"":
            return text[1:-1]
        return float(text) if "." in text or "e" in text else int(text)
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


# ---------------------------------------------------------------------------------------------
# A launch command
# ---------------------------------------------------------------------------------------------

# vLLM flag aliases to the names printed in `non-default args`
_VLLM_ALIASES = {
    "tp": "tensor_parallel_size",
    "pp": "pipeline_parallel_size",
    "dp": "data_parallel_size",
    "tensor_parallel": "tensor_parallel_size",
}


def args_from_command(text: str) -> dict[str, Any]:
    """Engine args of a launch command (engine dest names); {} if it is not one."""
    try:
        cmd = parse_launch_command(text)
    except ServefitError:
        return {}
    if cmd.engine == "sglang":
        # SGLang does not print its version: the first release (oldest first) whose own flags
        # read the command without an error
        values: dict[str, Any] = {}
        for prof in registry.profiles(cmd.engine):
            parsed = prof.parse_argv(cmd.argv)
            if not parsed.errors:
                return dict(parsed.values)
            values = values or dict(parsed.values)
        return values
    return _generic_args(cmd.argv)


def _generic_args(argv: list[str]) -> dict[str, Any]:
    """`--flag value` / `--flag=value` / `--flag` pairs (vLLM), names as argparse dests."""
    out: dict[str, Any] = {}
    i = 0
    if argv and not argv[0].startswith("-"):
        out["model"] = argv[0]
        i = 1
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("-"):
            continue
        name, eq, val = tok.lstrip("-").partition("=")
        dest = name.replace("-", "_")
        dest = _VLLM_ALIASES.get(dest, dest)
        if not eq:
            if i < len(argv) and (not argv[i].startswith("-") or re.match(r"^-\d", argv[i])):
                val = argv[i]
                i += 1
            else:
                out[dest] = True
                continue
        out[dest] = _typed(val)
    return out


def _typed(val: str) -> Any:
    if val.startswith("{"):  # vLLM's JSON flags (--speculative-config '{"method": ...}')
        try:
            return json.loads(val)
        except ValueError:
            return val
    for conv in (int, float):
        try:
            return conv(val)
        except ValueError:
            pass
    if val in ("True", "true"):
        return True
    if val in ("False", "false"):
        return False
    return val
