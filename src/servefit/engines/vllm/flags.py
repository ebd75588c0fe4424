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
from dataclasses import dataclass
from importlib import resources
from typing import Any

from servefit.engines.base import Flag
from servefit.engines.sglang.flags import ParsedArgs
from servefit.errors import EngineVersionError

__all__ = ["VllmFlag", "available_versions", "load_flags", "parse_argv"]

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass(frozen=True)
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


def _slug(version: str) -> str:
    m = _VERSION_RE.match(version.strip())
    if not m:
        raise EngineVersionError(f"not a vLLM release version: {version!r} (expected e.g. 0.33.0)")
    return "_".join(m.groups())


def available_versions() -> tuple[str, ...]:
    names = [p.name for p in resources.files(__package__).iterdir()]
    found = [n[len("flags_") : -len(".json")] for n in names if re.match(r"flags_[\d_]+\.json$", n)]
    parsed = sorted(tuple(int(x) for x in v.split("_")) for v in found)
    return tuple(".".join(map(str, v)) for v in parsed)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


@functools.cache
def load_flags(version: str) -> tuple[VllmFlag, ...]:
    """All `vllm serve` flags of one release, in registration order."""
    res = resources.files(__package__).joinpath(f"flags_{_slug(version)}.json")
    if not res.is_file():
        have = ", ".join(available_versions())
        raise EngineVersionError(f"no vLLM flag table for {version} (have: {have})")
    return tuple(
        VllmFlag(
            names=tuple(e["names"]),
            dest=e["dest"],
            kind=e["kind"],
            choices=None if e["choices"] is None else tuple(str(c) for c in e["choices"]),
            help=e["help"],
            default=_hashable(e["default"]),
            item_kind=e["item_kind"],
            value_parser=e["value_parser"],
            optional=e["optional"],
            nargs=e["nargs"],
            const=e["const"],
            action=e["action"],
            deprecated=e["deprecated"],
            positional=e["positional"],
        )
        for e in json.loads(res.read_text(encoding="utf-8"))
    )


# --------------------------------------------------------------------------------------------
# The engine's type= callables
# --------------------------------------------------------------------------------------------


class _BadValue(ValueError):
    pass


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
            raise _BadValue(
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
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "json":
        return json.loads(raw)
    return raw


_DESCRIBE = {"int": "an int", "float": "a float", "json": "JSON"}


# --------------------------------------------------------------------------------------------
# FlexibleArgumentParser preprocessing
# --------------------------------------------------------------------------------------------


def _is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


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


def _index(flags: tuple[VllmFlag, ...]) -> dict[str, VllmFlag]:
    index: dict[str, VllmFlag] = {}
    for flag in flags:
        if not flag.positional:
            for name in flag.names:
                index.setdefault(name, flag)
    return index


def _match(index: dict[str, VllmFlag], option: str) -> tuple[VllmFlag | None, str, list[str]]:
    if option in index:
        return index[option], option, []
    if not option.startswith("--"):
        return None, option, []
    candidates = [n for n in index if n.startswith(option)]
    if len(candidates) == 1:
        return index[candidates[0]], candidates[0], []
    if len({index[c].dest for c in candidates}) == 1 and candidates:
        return index[candidates[0]], candidates[0], []
    return None, option, candidates


def parse_argv(flags: tuple[VllmFlag, ...], argv: list[str]) -> ParsedArgs:
    """Read a `vllm serve` argv against `flags`; never raises on user input."""
    tokens, dotted = _flexible(list(argv))
    index = _index(flags)
    result = ParsedArgs()
    values, errors = result.values, result.errors
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        i += 1
        if token == "--":
            result.positionals.extend(tokens[i:])
            break
        if not _is_option(token):
            result.positionals.append(token)
            continue
        option, has_inline, inline = (
            token.partition("=") if token.startswith("--") else (token, "", "")
        )
        flag, canonical, ambiguous = _match(index, option)
        if flag is None:
            if ambiguous:
                errors.append(f"ambiguous option: {option} could match {', '.join(ambiguous)}")
            else:
                result.unknown.append(option)
            if not has_inline:  # its values are not positionals
                while i < n and not _is_option(tokens[i]):
                    i += 1
            continue
        if flag.kind in ("bool", "bool_false"):
            if has_inline:
                errors.append(f"argument {canonical}: ignored explicit argument {inline!r}")
                continue
            values[flag.dest] = flag.kind == "bool"
            result.given[flag.dest] = canonical
            continue
        raws: list[str]
        if has_inline:
            raws = [inline]
        elif flag.kind == "list" or flag.action == "append":
            raws = []
            while i < n and not _is_option(tokens[i]) and (flag.kind == "list" or not raws):
                raws.append(tokens[i])
                i += 1
        elif i < n and not _is_option(tokens[i]):
            raws = [tokens[i]]
            i += 1
        else:
            raws = []
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
            except _BadValue as exc:
                errors.append(f"argument {canonical}: {exc}")
                break
            except ValueError:
                what = _DESCRIBE.get(kind, "a string")
                errors.append(f"argument {canonical}: expects {what}, got {raw!r}")
                break
            if flag.choices is not None and str(value) not in flag.choices:
                errors.append(
                    f"argument {canonical}: invalid choice: {raw!r} "
                    f"(choose from {', '.join(flag.choices)})"
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
        flag, canonical, _ = _match(index, option)
        if flag is None:
            result.unknown.append(option)
            continue
        base = values.get(flag.dest)
        merged = dict(base) if isinstance(base, dict) else {}
        merged.update(tree)
        values[flag.dest] = merged
        result.given[flag.dest] = canonical
    positional = next((f for f in flags if f.positional), None)
    if positional is not None and result.positionals:
        values.setdefault(positional.dest, result.positionals[0])
    return result
