"""evolve(): the same object dataclasses.replace builds, for the records it is used on, and the
same refusals (a name that is not a field); classes whose __init__ does more than assign are
refused rather than copied wrongly."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from functools import cached_property

import pytest

from servefit.evolve import evolve


@dataclass(frozen=True)
class _Plain:
    a: int
    b: str = "x"
    c: tuple[int, ...] = field(default_factory=tuple)

    @cached_property
    def doubled(self) -> int:
        return self.a * 2


@dataclass(frozen=True, slots=True)
class _Slotted:
    a: int
    b: float = 1.5


@dataclass(frozen=True)
class _Post:
    a: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", self.a + 1)


@dataclass
class _NoInit:
    a: int
    b: int = field(init=False, default=0)


@pytest.mark.parametrize(
    ("obj", "changes"),
    [
        (_Plain(1, "y", (2, 3)), {"a": 7}),
        (_Plain(1), {"b": "z", "c": (9,)}),
        (_Plain(1), {}),
        (_Slotted(4), {"b": 2.5}),
        (_Slotted(4, 0.5), {}),
    ],
)
def test_equals_dataclasses_replace(obj: object, changes: dict[str, object]) -> None:
    got = evolve(obj, **changes)
    want = replace(obj, **changes)  # type: ignore[type-var]
    assert got == want
    assert type(got) is type(want)
    assert got is not obj
    assert dataclasses.asdict(got) == dataclasses.asdict(want)  # type: ignore[call-overload]


def test_cached_property_not_carried_over() -> None:
    # a value cached in __dict__ belongs to the old fields: the copy computes its own
    old = _Plain(3)
    assert old.doubled == 6
    new = evolve(old, a=5)
    assert new.doubled == 10


def test_unknown_field_refused_like_replace() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'zz'"):
        evolve(_Plain(1), zz=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'zz'"):
        replace(_Plain(1), zz=2)  # type: ignore[call-arg]


def test_post_init_and_non_init_fields_refused() -> None:
    with pytest.raises(TypeError, match="__post_init__"):
        evolve(_Post(1), a=2)
    with pytest.raises(TypeError, match="outside __init__"):
        evolve(_NoInit(1), a=2)
    with pytest.raises(TypeError, match="dataclass"):
        evolve(3, a=1)


_USERS = [
    "servefit._explain.replan",
    "servefit.engines.sglang.flow.declare",
    "servefit.engines.sglang.flow.memory",
    "servefit.engines.sglang.flow.alloc",
    "servefit.engines.sglang.flow.pools",
    "servefit._fit.search",
    "servefit._fit.rank",
]


def _seed_fit() -> dict[str, object]:
    from servefit._fit.search import FitRequest, fit
    from servefit.model.inventory import load_model
    from tests.seedcase import HAND_TUNED, SEED, SEED_FIT

    model = load_model("Qwen/Qwen3.6-27B")
    req = FitRequest(
        model=model, **SEED_FIT, concurrency=16, baseline={**SEED, **HAND_TUNED},
        model_path="Qwen/Qwen3.6-27B",
    )
    dump = fit(req).model_dump()
    del dump["elapsed_s"], dump["candidates_per_s"]  # the clock's, not the plan's
    return dump


def test_fit_is_the_same_with_dataclasses_replace(monkeypatch: pytest.MonkeyPatch) -> None:
    # every module that evolves records, switched back to dataclasses.replace: the seed's fit
    # (thousands of SGLang pool sizings, baseline, fixes) is identical field for field
    import importlib

    fast = _seed_fit()
    for name in _USERS:
        module = importlib.import_module(name)
        assert module.evolve is evolve, name
        monkeypatch.setattr(module, "evolve", replace)
    assert _seed_fit() == fast
