"""vLLM's `vllm serve` CLI, per release, and a reader for a user's flags that behaves like it.

The tables `flags_<version>.json` beside this file are generated from the released wheels by
`tools/extract_vllm_flags.py` (static AST walk of `make_arg_parser` -> `FrontendArgs` /
`EngineArgs.add_cli_args` and the config dataclasses behind `get_kwargs`; no torch).

`parse_argv` mirrors `vllm/utils/argparse_utils.py:FlexibleArgumentParser.parse_args` before
argparse runs, then argparse itself (allow_abbrev stays on, as in vLLM):
  * underscores in option names become dashes (`--max_model_len` == `--max-model-len`);
  * `-O3` / `-O 3` -> `--optimization-level 3`;
  * dotted JSON keys: `--speculative-config.method mtp --speculative-config.num_speculative_tokens 3`
    builds `{"method": "mtp", "num_speculative_tokens": 3}` (values parsed as JSON when they are);
  * `vllm serve MODEL`: the first positional is `model_tag`; `--model X` is moved there too.
Values use the engine's own converters (`human_readable_int`: 1k = 1000, 1K = 1024;
`human_readable_int_or_auto`: also -1 / auto; `optional_type`: "" and "None" -> None;
BooleanOptionalAction `--x` / `--no-x`). It never exits: unknown flags are listed, bad values
become one-line errors.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from servefit.engines.base import Flag
from servefit.engines.flagtable import (
    KIND_ARTICLE,
    ArgvWalk,
    BadValue,
    FlagTables,
    ParsedArgs,
    base_fields,
    convert_plain,
    hashable,
    index_flags,
    match_option,
)
from servefit.frozen import frozen

__all__ = ["VllmFlag", "available_versions", "load_flags", "parse_argv"]

_TABLES = FlagTables(package=__package__, engine="vLLM", article="a", example="0.33.0")


@frozen
class VllmFlag(Flag):
    """A `Flag` plus what vLLM's argparse kwargs say about reading it."""

    default: Any = None
    item_kind: str | None = None
    value_parser: str | None = None
    optional: bool = False
    nargs: str | int | None = None
    const: Any = None
    action: str | None = None
    deprecated: bool = False
    positional: bool = False


def available_versions() -> tuple[str, ...]:
    return _TABLES.versions()


@functools.cache
def load_flags(version: str) -> tuple[VllmFlag, ...]:
    """All `vllm serve` flags of one release, in registration order."""
    return tuple(
        VllmFlag(
            **base_fields(e),
            default=hashable(e["default"]),
            item_kind=e["item_kind"],
            value_parser=e["value_parser"],
            optional=e["optional"],
            nargs=e["nargs"],
            const=e["const"],
            action=e["action"],
            deprecated=e["deprecated"],
            positional=e["positional"],
        )
        for e in _TABLES.entries(version)
    )


# --------------------------------------------------------------------------------------------
# The engine's type= callables
# --------------------------------------------------------------------------------------------


def human_readable_int(raw: str) -> int:
    """vllm/utils/argparse_utils.py:human_readable_int: 1k = 1000, 1K = 1024, 25.6k = 25600."""
    value = raw.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if m:
        number, suffix = m.groups()
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        if "." in number:
            raise BadValue(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?"
            )
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(value)


def _convert(flag: VllmFlag, raw: str, kind: str) -> Any:
    if flag.optional and raw in ("", "None"):  # arg_utils.optional_type
        return None
    parser = flag.value_parser
    if parser == "human_readable_int_or_auto":
        return (
            -1
            if raw.strip() in ("-1",) or raw.strip().lower() == "auto"
            else human_readable_int(raw)
        )
    if parser == "human_readable_int":
        return human_readable_int(raw)
    if parser == "lower_underscore":  # `lambda s: s.lower().replace("-", "_")`
        return raw.lower().replace("-", "_")
    if parser == "union_dict_and_str":  # arg_utils.union_dict_and_str
        return json.loads(raw) if re.match(r"(?s)^\s*{.*}\s*$", raw) else raw
    if parser == "device_ids":
        return [int(d) if d.isdigit() else d for d in raw.split(",")]
    return convert_plain(kind, raw)


# --------------------------------------------------------------------------------------------
# FlexibleArgumentParser preprocessing
# --------------------------------------------------------------------------------------------


def _flexible(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Underscores -> dashes, -O levels, and dotted JSON keys gathered into dicts."""
    out: list[str] = []
    dotted: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg.startswith("--"):
            key, eq, value = arg.partition("=")
            head, dot, tail = key[2:].partition(".")
            key = "--" + head.replace("_", "-") + dot + tail
            if dot:  # --json-arg.key[.key...][+] value
                if not eq:
                    if i >= len(argv):
                        out.append(key)  # argparse reports the missing value
                        continue
                    value = argv[i]
                    i += 1
                path = tail.split(".")
                if path[-1].endswith("+"):
                    path[-1] = path[-1][:-1]
                    parsed: Any = value.split(",")
                else:
                    try:
                        parsed = json.loads(value)
                    except ValueError:
                        parsed = value
                node = dotted.setdefault("--" + head.replace("_", "-"), {})
                for part in path[:-1]:
                    node = node.setdefault(part, {})
                if isinstance(parsed, list) and isinstance(node.get(path[-1]), list):
                    node[path[-1]] += parsed
                else:
                    node[path[-1]] = parsed
                continue
            out.append(key + (eq + value if eq else ""))
        elif arg.startswith("-O") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2:3] == "=" else arg[2:]]
        elif arg == "-O" and i < len(argv) and argv[i] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(arg)
    return out, dotted


def _match(index: dict[str, VllmFlag], option: str) -> tuple[VllmFlag | None, str, list[str]]:
    flag, canonical, candidates = match_option(index, option)
    # A prefix whose candidates are all spellings of one flag stands for that flag.
    if flag is None and candidates and len({index[c].dest for c in candidates}) == 1:
        return index[candidates[0]], candidates[0], []
    return flag, canonical, candidates


def parse_argv(flags: tuple[VllmFlag, ...], argv: list[str]) -> ParsedArgs:
    """Read a `vllm serve` argv against `flags`; never raises on user input."""
    tokens, dotted = _flexible(list(argv))
    index = index_flags(f for f in flags if not f.positional)
    result = ParsedArgs()
    values, errors = result.values, result.errors
    walk = ArgvWalk(tokens)
    for flag, canonical, inline in walk.options(lambda option: _match(index, option), result):
        if flag.kind in ("bool", "bool_false"):
            if inline is not None:
                errors.append(f"argument {canonical}: ignored explicit argument {inline!r}")
                continue
            values[flag.dest] = flag.kind == "bool"
            result.given[flag.dest] = canonical
            continue
        if inline is not None:
            raws = [inline]
        elif flag.kind == "list":
            raws = walk.take_all()
        else:  # one value; action="append" adds it to those before
            raws = walk.take_one()
        if not raws:
            if flag.nargs == "?":
                values[flag.dest] = flag.const
                result.given[flag.dest] = canonical
            else:
                errors.append(
                    f"argument {canonical}: expected at least one argument"
                    if flag.kind == "list"
                    else f"argument {canonical}: expected one argument"
                )
            continue
        kind = (flag.item_kind or "str") if flag.kind == "list" else flag.kind
        converted: list[Any] = []
        for raw in raws:
            try:
                value = _convert(flag, raw, kind)
            except BadValue as exc:
                errors.append(f"argument {canonical}: {exc}")
                break
            except ValueError:
                what = KIND_ARTICLE.get(kind, "a string")
                errors.append(f"argument {canonical}: expects {what}, got {raw!r}")
                break
            if flag.choices is not None and str(value) not in flag.choices:
                # argparse's _check_value writes the value and each choice by repr: "(choose
                # from 'align', 'none')"; --max-lora-rank's choices are ints
                shown = [int(c) if kind == "int" else c for c in flag.choices]
                errors.append(
                    f"argument {canonical}: invalid choice: {value!r} "
                    f"(choose from {', '.join(map(repr, shown))})"
                )
                break
            converted.append(value)
        else:
            if flag.action == "append":
                values.setdefault(flag.dest, [])
                values[flag.dest] = [*values[flag.dest], *converted]
            else:
                values[flag.dest] = converted if flag.kind == "list" else converted[0]
            result.given[flag.dest] = canonical
    for option, tree in dotted.items():
        dotted_flag, canonical, _ = _match(index, option)
        if dotted_flag is None:
            result.unknown.append(option)
            continue
        base = values.get(dotted_flag.dest)
        merged = dict(base) if isinstance(base, dict) else {}
        merged.update(tree)
        values[dotted_flag.dest] = merged
        result.given[dotted_flag.dest] = canonical
    positional = next((f for f in flags if f.positional), None)
    if positional is not None and result.positionals:
        values.setdefault(positional.dest, result.positionals[0])
    return result
