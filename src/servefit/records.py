"""The base of servefit's result records (Plan, Explanation, FitResult and their parts).

The records are frozen stdlib dataclasses, not pydantic models: `servefit plan` builds them on
every call and `servefit fit` thousands a second, and pydantic costs ~50 ms to import, ~80 ms to
build the models and 10-20% of fit's time per candidate in validation. Nothing is validated or
converted when a record is made; `Record` gives them the part of pydantic's API that callers use,
with the same output:

- `model_dump(mode="json")` is what pydantic's was: nested records as dicts, tuples as lists and
  an int held by a float field as a float (pydantic converted 80 to 80.0 when it validated). The
  conversions come from each class's field types, read once per class, at its first dump.
- `model_dump_json(indent=...)` is pydantic-core's JSON text of it, floats and all.
- `model_copy(update=...)` is `dataclasses.replace`.
- `model_json_schema()` / `model_validate(_json)` hand the class to pydantic's TypeAdapter, which
  is imported then, off the CLI's path (only the docs and the tests use them).
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

if TYPE_CHECKING:
    from pydantic import TypeAdapter

_R = TypeVar("_R", bound="Record")
# one field's conversion at dump time: (value, json mode) -> value; None where it is the value
_Convert = Callable[[Any, bool], Any]


class Record:
    """The mixin of the records, each `@dataclass(frozen=True, slots=True, kw_only=True)`."""

    __slots__ = ()
    # read by pydantic's TypeAdapter: the JSON schema says no other keys, as the models' did
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    if TYPE_CHECKING:  # every subclass is a dataclass: what dataclasses.replace asks of its type
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def model_dump(self, *, mode: Literal["python", "json"] = "python") -> dict[str, Any]:
        return _dump(self, mode == "json")

    def model_dump_json(self, *, indent: int | None = None) -> str:
        return to_json(_dump(self, True), indent)

    def model_copy(self: _R, *, update: Mapping[str, Any] | None = None) -> _R:
        return dataclasses.replace(self, **(update or {}))

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return _adapter(cls).json_schema()

    @classmethod
    def model_validate(cls: type[_R], obj: Any) -> _R:
        return _adapter(cls).validate_python(obj)

    @classmethod
    def model_validate_json(cls: type[_R], data: str | bytes) -> _R:
        return _adapter(cls).validate_json(data)


_ADAPTERS: dict[type, Any] = {}


def _adapter(cls: type[_R]) -> TypeAdapter[_R]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


# ---- model_dump -------------------------------------------------------------------------------

_FIELDS: dict[type, tuple[tuple[str, _Convert | None], ...]] = {}


def _dump(record: Record, js: bool) -> dict[str, Any]:
    cls = type(record)
    fields = _FIELDS.get(cls) or _fields_of(cls)
    return {
        name: getattr(record, name) if conv is None else conv(getattr(record, name), js)
        for name, conv in fields
    }


def _fields_of(cls: type) -> tuple[tuple[str, _Convert | None], ...]:
    hints = typing.get_type_hints(cls)
    fields = tuple((f.name, _converter(hints[f.name])) for f in dataclasses.fields(cls))
    _FIELDS[cls] = fields
    return fields


def _converter(tp: Any) -> _Convert | None:
    """What dumping a value of type `tp` does to it; None: nothing."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is float:
        return _float
    if tp is int:
        return _int
    if tp is Any:
        return _plain
    if isinstance(tp, type) and issubclass(tp, Record):
        return _dump_record
    if origin in (types.UnionType, typing.Union):
        convs = [_converter(a) for a in args if a is not type(None)]
        if len(convs) != 1:
            raise TypeError(f"records: no dump rule for the union {tp!r}")
        return _optional(convs[0]) if convs[0] else None
    if origin is list:
        return _list(_converter(args[0]))
    if origin is dict:
        return _dict(_converter(args[1]))
    if tp in (str, bool) or origin is Literal:
        return None
    raise TypeError(f"records: no dump rule for {tp!r}")


def _float(v: Any, js: bool) -> Any:
    # pydantic's lax float: an int becomes a float (bool is an int; pydantic made it 1.0 too)
    return float(v) if isinstance(v, int) else v


def _int(v: Any, js: bool) -> Any:
    # pydantic's lax int: a float with no fraction becomes an int
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _dump_record(v: Any, js: bool) -> Any:
    return _dump(v, js)


def _optional(conv: _Convert) -> _Convert:
    return lambda v, js: None if v is None else conv(v, js)


def _list(item: _Convert | None) -> _Convert:
    if item is None:
        return lambda v, js: list(v)
    return lambda v, js: [item(x, js) for x in v]


def _dict(value: _Convert | None) -> _Convert:
    if value is None:
        return lambda v, js: dict(v)
    return lambda v, js: {k: value(x, js) for k, x in v.items()}


def _plain(v: Any, js: bool) -> Any:
    """A value of an `Any` field, as pydantic dumped one: records as dicts, containers copied,
    tuples as lists in JSON mode."""
    if isinstance(v, Record):
        return _dump(v, js)
    if isinstance(v, dict):
        return {k: _plain(x, js) for k, x in v.items()}
    if isinstance(v, list) or (js and isinstance(v, tuple)):
        return [_plain(x, js) for x in v]
    if isinstance(v, tuple):
        return tuple(_plain(x, js) for x in v)
    if js and not isinstance(v, str | int | float | None):
        raise TypeError(f"records: {type(v).__name__} has no JSON form")
    return v


# ---- JSON text --------------------------------------------------------------------------------


def to_json(value: Any, indent: int | None = None) -> str:
    """pydantic-core's JSON text of a `model_dump(mode="json")` tree (what model_dump_json
    printed): UTF-8 text unescaped, no spaces without an indent, floats as `float_text`."""
    out: list[str] = []
    _write(value, out, indent, 0)
    return "".join(out)


def float_text(x: float) -> str:
    """A float as pydantic-core writes it: the shortest repr, as Python's, but NaN and infinity
    are null, the exponent has no leading zeros (1e-7, Python's 1e-07) and 1e-5 <= |x| < 1e-4
    is written out (0.000015, Python's 1.5e-05)."""
    if not math.isfinite(x):
        return "null"
    text = float.__repr__(x)
    mantissa, e, exp = text.partition("e")
    if not e:
        return text
    power = int(exp)
    if power == -5:
        sign, digits = ("-", mantissa[1:]) if mantissa[0] == "-" else ("", mantissa)
        return f"{sign}0.0000{digits.replace('.', '')}"
    return f"{mantissa}e{power:+d}"


def _write(v: Any, out: list[str], indent: int | None, depth: int) -> None:
    if isinstance(v, str):
        out.append(json.dumps(v, ensure_ascii=False))
    elif v is None or isinstance(v, bool):
        out.append("null" if v is None else "true" if v else "false")
    elif isinstance(v, int):
        out.append(int.__repr__(v))
    elif isinstance(v, float):
        out.append(float_text(v))
    elif isinstance(v, dict | list | tuple):
        _write_container(v, out, indent, depth)
    else:
        raise TypeError(f"records: {type(v).__name__} has no JSON form")


def _write_container(
    v: dict[Any, Any] | list[Any] | tuple[Any, ...], out: list[str], indent: int | None, depth: int
) -> None:
    is_dict = isinstance(v, dict)
    if not v:
        out.append("{}" if is_dict else "[]")
        return
    out.append("{" if is_dict else "[")
    inner = "" if indent is None else "\n" + " " * (indent * (depth + 1))
    items = v.items() if isinstance(v, dict) else ((None, x) for x in v)
    for i, (key, item) in enumerate(items):
        out.append(("," if i else "") + inner)
        if is_dict:
            if not isinstance(key, str | int) or isinstance(key, bool):
                raise TypeError(f"records: a {type(key).__name__} key has no JSON form")
            out.append(json.dumps(str(key), ensure_ascii=False) + (":" if indent is None else ": "))
        _write(item, out, indent, depth + 1)
    out.append(
        ("" if indent is None else "\n" + " " * (indent * depth)) + ("}" if is_dict else "]")
    )
