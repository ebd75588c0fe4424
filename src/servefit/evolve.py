"""`evolve`: dataclasses.replace for servefit's own frozen dataclasses, several times faster.

`dataclasses.replace` walks the class's fields and calls `__init__` again, whose frozen
assignments go through `object.__setattr__` one by one: ~8 µs for a dozen fields. fit re-plans
thousands of candidates a second and each SGLang pool sizing replaces its records four or five
times (engines/sglang/flow/memory.py, alloc.py), so that walk was a tenth of fit's time. None of
the records evolved here has an `__init__` that does more than assign (no `__post_init__`, no
InitVar, no converting default): copying the fields and setting the changed ones makes the same
object. Each class is checked once against that, and a name that is not a field is refused as
`replace` refuses it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_T = TypeVar("_T")
_FIELDS: dict[type, tuple[frozenset[str], bool]] = {}  # class -> (its field names, slotted)


def _fields(cls: type) -> tuple[frozenset[str], bool]:
    found = _FIELDS.get(cls)
    if found is None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"evolve() takes a dataclass instance, not {cls.__name__}")
        if hasattr(cls, "__post_init__"):
            raise TypeError(f"{cls.__name__} has a __post_init__: use dataclasses.replace")
        fields = dataclasses.fields(cls)
        if any(not f.init for f in fields):
            raise TypeError(f"{cls.__name__} has a field set outside __init__: use replace")
        found = (frozenset(f.name for f in fields), "__dict__" not in dir(cls))
        _FIELDS[cls] = found
    return found


def evolve(obj: _T, /, **changes: Any) -> _T:
    """A copy of the dataclass instance `obj` with `changes` set (dataclasses.replace's result)."""
    cls = type(obj)
    names, slotted = _fields(cls)
    if not names.issuperset(changes):
        bad = sorted(set(changes) - names)[0]
        raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument '{bad}'")
    new = object.__new__(cls)
    if slotted:
        for name in names:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(obj, name))
    else:
        # only the fields: a cached_property's value held in __dict__ is not carried over
        own = obj.__dict__
        state = {name: own[name] for name in names}
        state.update(changes)
        new.__dict__.update(state)
    return new
