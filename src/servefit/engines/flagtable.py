"""What reading a flag table and an argv has in common across engines.

Each engine keeps, beside its flags module, one `flags_<major>_<minor>_<patch>.json` table per
release (generated from the wheel by a tool under tools/). This module finds and reads those
tables and walks an argv the way Python's argparse consumes it (both engines build their
server CLI on argparse with `allow_abbrev` on); each engine's flags module keeps what its own
parser does differently: its flag fields, its `type=` converters, its error wording, and the
preprocessing or post-checks the engine adds around argparse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from servefit.engines.base import Flag, ParsedArgs
from servefit.errors import EngineVersionError
from servefit.frozen import frozen
from servefit.packagedata import package_dir

__all__ = [
    "KIND_ARTICLE",
    "ArgvWalk",
    "BadValue",
    "FlagTables",
    "ParsedArgs",
    "base_fields",
    "convert_plain",
    "hashable",
    "index_flags",
    "is_option",
    "match_option",
]

F = TypeVar("F", bound=Flag)

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?$")  # 0.10.1.1
_TABLE_NAME = re.compile(r"flags_[\d_]+\.json$")
# argparse's `_negative_number_matcher`: such a token is a value, not an option.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")

# How an error names the value a plain `type=` (int / float / json.loads) expects.
KIND_ARTICLE = {"int": "an int", "float": "a float", "json": "JSON"}


class BadValue(ValueError):
    """A value an engine's converter rejects with its own message (not a plain type error)."""


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


@frozen
class FlagTables:
    """Where one engine keeps its per-release flag tables, and how errors name the engine."""

    package: str  # the engine's flags package; the tables are resources in it
    engine: str  # "SGLang"
    article: str  # "an", as in "not an SGLang release version"
    example: str  # a release to show in that error, "0.5.9"

    def versions(self) -> tuple[str, ...]:
        """Releases with a table, oldest first."""
        names = [p.name for p in package_dir(self.package).iterdir()]
        found = [n[len("flags_") : -len(".json")] for n in names if _TABLE_NAME.match(n)]
        parsed = sorted(tuple(int(x) for x in v.split("_")) for v in found)
        return tuple(".".join(map(str, v)) for v in parsed)

    def entries(self, version: str) -> list[dict[str, Any]]:
        """The raw table of one release; `EngineVersionError` when there is none."""
        m = _VERSION_RE.match(version.strip())
        if not m:
            raise EngineVersionError(
                f"not {self.article} {self.engine} release version: {version!r} "
                f"(expected e.g. {self.example})"
            )
        parts = [g for g in m.groups() if g is not None]
        res = package_dir(self.package).joinpath(f"flags_{'_'.join(parts)}.json")
        if not res.is_file():
            have = ", ".join(self.versions())
            raise EngineVersionError(f"no {self.engine} flag table for {version} (have: {have})")
        return json.loads(res.read_text(encoding="utf-8"))


def base_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """The `Flag` fields of one table entry, as keyword arguments; engines add their own."""
    choices = entry["choices"]
    return {
        "names": tuple(entry["names"]),
        "dest": entry["dest"],
        "kind": entry["kind"],
        "choices": None if choices is None else tuple(str(c) for c in choices),
        "help": entry["help"],
    }


def hashable(value: Any) -> Any:
    """JSON lists/objects as tuples, so defaults can sit on frozen, hashable flags."""
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, hashable(v)) for k, v in value.items())
    return value


def convert_plain(kind: str, raw: str) -> Any:
    """A value through the plain `type=` of its kind: int, float, json.loads, or str."""
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "json":
        return json.loads(raw)
    return raw


# --------------------------------------------------------------------------------------------
# Matching options (argparse with allow_abbrev=True)
# --------------------------------------------------------------------------------------------


def is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def index_flags(flags: Iterable[F]) -> dict[str, F]:
    """Option string -> flag; the first flag registered under a name keeps it."""
    index: dict[str, F] = {}
    for flag in flags:
        for name in flag.names:
            index.setdefault(name, flag)
    return index


def match_option(index: dict[str, F], option: str) -> tuple[F | None, str, list[str]]:
    """(flag, canonical option string, ambiguous candidates) for an option as written.

    An unambiguous prefix of a long option stands for it; several candidates are ambiguous.
    """
    if option in index:
        return index[option], option, []
    if not option.startswith("--"):
        return None, option, []
    candidates = [name for name in index if name.startswith(option)]
    if len(candidates) == 1:
        return index[candidates[0]], candidates[0], []
    return None, option, candidates


# --------------------------------------------------------------------------------------------
# Walking argv
# --------------------------------------------------------------------------------------------


class ArgvWalk:
    """An argv read left to right, as argparse consumes it.

    `options` yields each known option; the caller then takes that option's values with
    `take_one` / `take_all` before the walk goes on.
    """

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = tokens
        self._i = 0

    def options(
        self,
        match: Callable[[str], tuple[F | None, str, list[str]]],
        result: ParsedArgs,
    ) -> Iterator[tuple[F, str, str | None]]:
        """(flag, canonical option string, inline `=value` or None) for each known option.

        Positionals and everything after `--` go to `result.positionals`; unknown options to
        `result.unknown` and ambiguous ones to `result.errors`, each with the values after it
        skipped (taken as its values, not as positionals).
        """
        tokens = self._tokens
        while self._i < len(tokens):
            token = tokens[self._i]
            self._i += 1
            if token == "--":
                result.positionals.extend(tokens[self._i :])
                self._i = len(tokens)
                return
            if not is_option(token):
                result.positionals.append(token)
                continue
            if token.startswith("--"):
                option, has_inline, inline = token.partition("=")
            else:
                option, has_inline, inline = self._short_inline(token, match)
            flag, canonical, ambiguous = match(option)
            if flag is None:
                if ambiguous:
                    shown = ", ".join(ambiguous)
                    result.errors.append(f"ambiguous option: {option} could match {shown}")
                else:
                    result.unknown.append(option)
                if not has_inline:
                    self.take_all()
                continue
            yield flag, canonical, inline if has_inline else None

    @staticmethod
    def _short_inline(
        token: str, match: Callable[[str], tuple[F | None, str, list[str]]]
    ) -> tuple[str, str, str]:
        """`-dp=8`: a single-dash option with its value after "=" when the part before it is an
        option (CPython argparse.py:ArgumentParser._parse_optional, its `'=' in arg_string`
        branch, which applies to every option string, not only to the long ones)."""
        option, has_inline, inline = token.partition("=")
        if has_inline and match(option)[0] is not None:
            return option, has_inline, inline
        return token, "", ""

    def take_one(self) -> list[str]:
        """The next token as a value, if it is not an option ([] when there is none)."""
        if self._i < len(self._tokens) and not is_option(self._tokens[self._i]):
            self._i += 1
            return [self._tokens[self._i - 1]]
        return []

    def take_all(self) -> list[str]:
        """Every value up to the next option (nargs "+" / "*")."""
        start = self._i
        while self._i < len(self._tokens) and not is_option(self._tokens[self._i]):
            self._i += 1
        return self._tokens[start : self._i]


def read_architectures(package: str, version: str) -> frozenset[str]:
    """The model architectures one release registers: archs_<version>.txt in the engine's
    package, generated from the wheel by tools/extract_architectures.py."""
    name = f"archs_{version.replace('.', '_')}.txt"
    res = package_dir(package) / name
    if not res.is_file():
        raise EngineVersionError(f"no architecture list {name} in {package}")
    return frozenset(res.read_text(encoding="utf-8").split())


def release_numbers(release: str) -> tuple[int, ...]:
    """A release's leading numbers, to order it against the architecture lists kept:
    "0.8.5.post1" -> (0, 8, 5)."""
    out = []
    for part in release.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)
