"""`@frozen`: a frozen stdlib dataclass whose `__eq__`, `__hash__` and `__repr__` are shared
functions instead of ones compiled for the class.

`dataclasses.dataclass` writes each generated method as source and compiles it, ~0.1 ms a
method on this project's CI machine, six per frozen class (`__init__`, `__setattr__`,
`__delattr__`, `__eq__`, `__hash__`, `__repr__`). `servefit plan` defines ~90 such classes on
its way, and their compiling was 40 % of the command's time (benchmarks/bench_plan.py). The
three methods that only walk the fields are written once here and read the class's fields
through an `operator.attrgetter` made when the class is; `__init__` and the frozen
`__setattr__` / `__delattr__` stay the dataclass's own.

What they return is what the dataclass's would (tests/test_frozen.py): `==` compares the
`compare` fields of two instances of the same class (NotImplemented for another class),
`hash()` is the hash of the tuple of the fields that hash (`hash=True`, or `compare` when not
set), `repr()` is `Name(field=value, ...)` over the `repr` fields. A method the class body
defines itself is kept, as `dataclass` keeps it. The class is still a dataclass:
`dataclasses.fields`, `replace`, `asdict` and pydantic's TypeAdapter read it unchanged.
"""

from __future__ import annotations

import dataclasses
import reprlib
import sys
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, overload

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pydantic's dependency; only Python 3.10 reads it
    from typing_extensions import dataclass_transform

_T = TypeVar("_T")


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """obj -> the tuple of its `names` (attrgetter returns a bare value for one name)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        key = self._frozen_compare
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self._frozen_hash(self))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._frozen_repr)
    return f"{self.__class__.__qualname__}({shown})"


def _share_methods(cls: type[_T], body: dict[str, Any]) -> type[_T]:
    """Set the shared methods on the dataclass `cls`, except those its class body (`body`, the
    namespace before `dataclass` rebuilt a slotted class) defines."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields if f.compare]
    hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    # static: a lambda held by the class would be bound to the instance it is read from
    cls._frozen_compare = staticmethod(_getter(names))  # type: ignore[attr-defined]
    cls._frozen_hash = staticmethod(_getter(hashed))  # type: ignore[attr-defined]
    cls._frozen_repr = tuple(f.name for f in fields if f.repr)  # type: ignore[attr-defined]
    if "__eq__" not in body:
        cls.__eq__ = _eq  # type: ignore[method-assign]
    # dataclasses._hash_action, eq and frozen: a __hash__ of the class body is kept, unless it
    # is the None Python puts there for a body that defines __eq__
    explicit = "__hash__" in body and not (body["__hash__"] is None and "__eq__" in body)
    if not explicit:
        cls.__hash__ = _hash  # type: ignore[method-assign]
    if "__repr__" not in body:
        cls.__repr__ = _repr  # type: ignore[method-assign]
    return cls


@overload
def frozen(cls: type[_T], /) -> type[_T]: ...
@overload
def frozen(
    *, slots: bool = False, kw_only: bool = False
) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True)
def frozen(
    cls: type[_T] | None = None, /, *, slots: bool = False, kw_only: bool = False
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """`@dataclass(frozen=True)` (with `slots` / `kw_only` as given), eq/hash/repr shared."""

    def wrap(c: type[_T]) -> type[_T]:
        body = dict(c.__dict__)
        made = dataclasses.dataclass(
            frozen=True, slots=slots, kw_only=kw_only, eq=False, repr=False
        )(c)
        return _share_methods(made, body)

    return wrap if cls is None else wrap(cls)
