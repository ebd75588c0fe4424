"""SGLang's server CLI, per release, and an argparse-faithful reader for a user's flags.

The tables `flags_<version>.json` beside this file are generated from the released wheels by
`tools/extract_sglang_flags.py` (static AST walk, no torch). `load_flags` turns one into
`EngineFlag`s; `parse_argv` reads argv the way the engine's `argparse` parser would, except that
it never exits: unknown flags become `unknown`, bad values become `errors`.

Behaviour mirrored from argparse with `allow_abbrev=True`, which SGLang keeps (the tests check
agreement with the running interpreter's own argparse on parsers built from these tables):
  * `--flag value` and `--flag=value`; store_true / store_false flags take no value;
    nargs "+" / "*" lists take every following token up to the next option; nargs "?" takes
    one if present, else the flag's const.
  * Repeated flags: last one wins (lists are replaced, not extended).
  * Unambiguous prefixes of long options are accepted (`--speculative-algo`, `--tp`) and an
    ambiguous one is an error, as argparse reports it (0.5.23 `--cuda-graph-max-bs` matches both
    `--cuda-graph-max-bs-decode` and `--cuda-graph-max-bs-prefill`).
  * Values are converted with the engine's own type: int / float / str, JSON for `json.loads`
    flags, SI/IEC suffixes for `human_readable_int` flags (0.5.23 `--context-length 32k`),
    `nullable_str` ("None" -> None); then checked against `choices`.
  * A value token may not start with "-" unless it is a negative number.

Where it departs from argparse, on purpose: stray positionals are collected (SGLang would stop
with "unrecognized arguments"); an unknown flag swallows the values after it instead of
making them positionals; a missing required flag (`--model-path`) is listed in `missing`, not
`errors`, since servefit can take the model from elsewhere; deprecation notices the engine
prints go to `warnings`.

`ParsedArgs.values` holds only what the command sets, keyed by the ServerArgs attribute
(`tp_size`, even in 0.5.9 where argparse's dest is `tensor_parallel_size`); engine defaults are
on each flag (`EngineFlag.default`, and `fallback` for 0.5.23 fields resolved later).
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

__all__ = [
    "EngineFlag",
    "ParsedArgs",
    "available_versions",
    "load_flags",
    "parse_argv",
]

_TABLES = FlagTables(package=__package__, engine="SGLang", article="an", example="0.5.9")


@frozen
class EngineFlag(Flag):
    """A `Flag` plus what the engine's argparse action needs to read it faithfully.

    kind "list" items are converted with `item_kind`; `value_parser` names the engine's own
    `type=` callable when it is not int/float/str; `action` names a non-standard argparse
    action (deprecations, BooleanOptionalAction, LoRAPathAction); `deprecated` is the
    replacement the engine names ("" when it names none, None when not deprecated).
    """

    default: Any = None
    item_kind: str | None = None
    value_parser: str | None = None
    nargs: str | int | None = None
    const: Any = None
    required: bool = False
    action: str | None = None
    deprecated: str | None = None
    fallback: Any = None


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def available_versions() -> tuple[str, ...]:
    """Versions with a flag table, oldest first."""
    return _TABLES.versions()


@functools.cache
def load_flags(version: str) -> tuple[EngineFlag, ...]:
    """All server flags of one SGLang release, in the engine's registration order."""
    return tuple(
        EngineFlag(
            **base_fields(e),
            default=hashable(e["default"]),
            item_kind=e["item_kind"],
            value_parser=e["value_parser"],
            nargs=e["nargs"],
            const=hashable(e["const"]),
            required=e["required"],
            action=e["action"],
            deprecated=e["deprecated"],
            fallback=hashable(e["fallback"]),
        )
        for e in _TABLES.entries(version)
    )


# --------------------------------------------------------------------------------------------
# Value conversion (the engine's type= callables)
# --------------------------------------------------------------------------------------------

_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _human_readable_int(raw: str) -> int:
    """SGLang 0.5.2x `human_readable_int`: 32768, 32k (SI), 32Ki (IEC)."""
    value = raw.strip()
    m = _HUMAN_INT.fullmatch(value)
    if m:
        number, suffix = m.groups()
        if suffix in _IEC:
            if "." in number:
                raise BadValue(f"decimals are not allowed with IEC suffix {suffix!r}")
            return int(number) * _IEC[suffix]
        # Decimal arithmetic in the engine; exact for the inputs anyone writes.
        whole, _, frac = number.partition(".")
        return (int(whole + frac) * _SI[suffix]) // (10 ** len(frac))
    return int(value)


def _convert_one(kind: str, value_parser: str | None, raw: str) -> Any:
    if value_parser == "human_readable_int":
        return _human_readable_int(raw)
    if value_parser == "nullable_str":
        return None if not raw or raw == "None" else raw
    if value_parser == "parse_cuda_graph_backend_arg" and raw == "tc_piecewise":
        raise BadValue("tc_piecewise was removed; select breakable, full, or disabled")
    return convert_plain(kind, raw)


def _describe(kind: str, value_parser: str | None) -> str:
    if value_parser == "human_readable_int":
        return "an int (e.g. 32768, 32k, 32Ki)"
    return KIND_ARTICLE.get(kind, "a string")


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _takes_no_value(flag: Flag) -> bool:
    nargs = getattr(flag, "nargs", None)
    return flag.kind in ("bool", "bool_false") or nargs == 0


def parse_argv(flags: tuple[Flag, ...], argv: list[str]) -> ParsedArgs:
    """Read an engine argv against `flags`; never raises on user input."""
    index = index_flags(flags)
    result = ParsedArgs()
    values, errors, warnings = result.values, result.errors, result.warnings
    walk = ArgvWalk(argv)
    for flag, canonical, inline in walk.options(lambda option: match_option(index, option), result):
        action = getattr(flag, "action", None)
        nargs = getattr(flag, "nargs", None)
        deprecated = getattr(flag, "deprecated", None)
        if _takes_no_value(flag):
            _store_switch(flag, canonical, inline, result)
            continue
        # -- gather the raw value(s) -----------------------------------------------------
        is_list = flag.kind == "list"
        if inline is not None:
            raws = [inline]
        elif is_list:
            raws = walk.take_all()
        else:
            raws = walk.take_one()
        if not raws:
            if nargs == "?":
                values[flag.dest] = getattr(flag, "const", None)
                result.given[flag.dest] = canonical
                continue
            if is_list and nargs == "*":
                values[flag.dest] = []
                result.given[flag.dest] = canonical
                continue
            what = "at least one argument" if is_list else "one argument"
            errors.append(f"{canonical}: expected {what}")
            continue
        converted = _convert_all(flag, canonical, raws, errors)
        if converted is None:
            continue
        if deprecated is not None:
            warnings.append(_deprecation_notice(canonical, deprecated))
        if action == "DeprecatedStoreConstAction":
            values[flag.dest] = getattr(flag, "const", None)
        else:
            values[flag.dest] = converted if is_list else converted[0]
        result.given[flag.dest] = canonical

    result.missing.extend(
        flag.names[0]
        for flag in flags
        if getattr(flag, "required", False) and flag.dest not in values
    )
    return result


def _store_switch(flag: Any, canonical: str, inline: str | None, result: ParsedArgs) -> None:
    """A flag without a value: store_true / store_false / deprecated actions."""
    action = getattr(flag, "action", None)
    deprecated = getattr(flag, "deprecated", None)
    if inline is not None:
        result.errors.append(f"{canonical}: ignored explicit argument {inline!r}")
        return
    if action == "DeprecatedAction":
        if deprecated:
            result.errors.append(deprecated)
        else:
            result.warnings.append(
                f"The command line argument '{canonical}' is deprecated and will be "
                "removed in future versions."
            )
        return
    if deprecated is not None:
        result.warnings.append(_deprecation_notice(canonical, deprecated))
    value: Any = flag.kind != "bool_false"
    if action == "DeprecatedStoreConstAction":
        value = getattr(flag, "const", None)
    result.values[flag.dest] = value
    result.given[flag.dest] = canonical


def _convert_all(flag: Any, canonical: str, raws: list[str], errors: list[str]) -> list[Any] | None:
    """Each raw value converted and checked against the choices; None after any error."""
    action = getattr(flag, "action", None)
    kind = (getattr(flag, "item_kind", None) or "str") if flag.kind == "list" else flag.kind
    parser = getattr(flag, "value_parser", None)
    converted: list[Any] = []
    bad = False
    for raw in raws:
        if action == "LoRAPathAction":
            item = raw.strip()
            try:
                converted.append(
                    json.loads(item) if item.startswith("{") and item.endswith("}") else item
                )
            except ValueError:
                errors.append(f"{canonical} expects JSON, got {raw!r}")
                bad = True
            continue
        try:
            value = _convert_one(kind, parser, raw)
        except BadValue as exc:
            errors.append(f"{canonical}: {exc}")
            bad = True
            continue
        except ValueError:
            errors.append(f"{canonical} expects {_describe(kind, parser)}, got {raw!r}")
            bad = True
            continue
        if flag.choices is not None and str(value) not in flag.choices:
            errors.append(
                f"{canonical}: invalid choice {raw!r} (choose from {', '.join(flag.choices)})"
            )
            bad = True
            continue
        converted.append(value)
    return None if bad else converted


def _deprecation_notice(option: str, replacement: str) -> str:
    use = f" Use '{replacement}' instead." if replacement else ""
    return f"'{option}' is deprecated and will be removed in a future release.{use}"
