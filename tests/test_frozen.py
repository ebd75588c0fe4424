"""@frozen against @dataclass(frozen=True): the same ==, hash() and repr() for every field option
the stdlib takes (compare, hash, repr, defaults, slots, kw_only, inheritance, methods of the
class body), and the same refusals. servefit's value classes use it (servefit/frozen.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

from servefit.frozen import frozen


def _pair(body: dict[str, Any], annotations: dict[str, str], **opts: Any) -> tuple[type, type]:
    """The same class made by @dataclass(frozen=True, **opts) and by @frozen(**opts)."""
    made = []
    for deco in (dataclass(frozen=True, **opts), frozen(**opts)):
        ns = {"__annotations__": dict(annotations), **body}
        made.append(deco(type("Thing", (), ns)))
    return made[0], made[1]


SHAPES = {
    "plain": ({"b": 2}, {"a": "int", "b": "int"}, {}, [dict(a=1), dict(a=1, b=3), dict(a=2)]),
    "no compare": (
        {"b": field(default=0, compare=False)},
        {"a": "int", "b": "int"},
        {},
        [dict(a=1, b=1), dict(a=1, b=2), dict(a=3)],
    ),
    "hash off": (
        {"b": field(default=0, hash=False)},
        {"a": "int", "b": "int"},
        {},
        [dict(a=1, b=1), dict(a=1, b=2)],
    ),
    "repr off": (
        {"b": field(default="x", repr=False)},
        {"a": "int", "b": "str"},
        {},
        [dict(a=1), dict(a=1, b="y")],
    ),
    "one field": ({}, {"a": "tuple"}, {}, [dict(a=(1, 2)), dict(a=(1,))]),
    "no fields": ({}, {}, {}, [dict()]),
    "factory": (
        {"b": field(default_factory=tuple)},
        {"a": "float", "b": "tuple"},
        {},
        [dict(a=0.5), dict(a=0.5, b=(1,)), dict(a=float("nan"))],
    ),
    "slots kw_only": (
        {"b": None},
        {"a": "int", "b": "str | None"},
        {"slots": True, "kw_only": True},
        [dict(a=1), dict(a=1, b="z"), dict(a=4)],
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_same_as_the_stdlib(shape):
    body, annotations, opts, kwargs = SHAPES[shape]
    std, ours = _pair(body, annotations, **opts)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(std)]
    made_std = [std(**kw) for kw in kwargs]
    made_ours = [ours(**kw) for kw in kwargs]
    for i, (x_std, x_ours) in enumerate(zip(made_std, made_ours, strict=True)):
        assert repr(x_ours) == repr(x_std)
        assert hash(x_ours) == hash(x_std)
        for y_std, y_ours in zip(made_std, made_ours, strict=True):
            assert (x_ours == y_ours) is (x_std == y_std)
            assert (x_ours != y_ours) is (x_std != y_std)
        assert x_ours != made_std[i]  # another class: not equal, as the stdlib's
        assert (x_ours == 3) is False
        with pytest.raises(FrozenInstanceError):
            x_ours.a = 9  # type: ignore[attr-defined]
    if opts.get("slots"):
        assert not hasattr(made_ours[0], "__dict__")


def test_methods_of_the_class_body_are_kept():
    @frozen
    class Named:
        a: int

        def __repr__(self) -> str:
            return "mine"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    assert repr(Named(1)) == "mine" and Named(1) == Named(2) and hash(Named(1)) == 7

    @frozen
    class EqOnly:  # __eq__ in the body and no __hash__: Python's None, then the field hash
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, EqOnly)

    @dataclass(frozen=True)
    class EqOnlyStd:
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, EqOnlyStd)

    assert hash(EqOnly(5)) == hash(EqOnlyStd(5))


def test_a_subclass_compares_its_own_fields():
    @frozen
    class Base:
        a: int

    @frozen
    class Child(Base):
        b: int = 0

    assert Child(1, 2) != Child(1, 3) and Child(1, 2) == Child(1, 2)
    assert Base(1) != Child(1)  # classes differ
    assert repr(Child(1, 2)) == "test_a_subclass_compares_its_own_fields.<locals>.Child(a=1, b=2)"


def test_a_recursive_repr_does_not_loop():
    @frozen
    class Box:
        items: list[Any]

    box = Box([])
    box.items.append(box)
    assert repr(box).endswith("Box(items=[...])")


def test_replace_and_asdict_read_it_as_a_dataclass():
    @frozen(slots=True, kw_only=True)
    class Rec:
        a: int
        b: list[int] = field(default_factory=list)

    r = Rec(a=1, b=[2])
    assert dataclasses.is_dataclass(r)
    assert dataclasses.replace(r, a=5) == Rec(a=5, b=[2])
    assert dataclasses.asdict(r) == {"a": 1, "b": [2]}
