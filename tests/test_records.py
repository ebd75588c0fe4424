"""servefit/records.py: the result records dump as the pydantic models they replace did."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any, Literal

import pytest
from pydantic import TypeAdapter

from servefit.records import Record, float_text, to_json


@dataclass(frozen=True, slots=True, kw_only=True)
class Leaf(Record):
    gib: float
    count: int = 0
    tags: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tree(Record):
    verdict: Literal["ok", "fail"]
    leaf: Leaf
    maybe: Leaf | None = None
    leaves: list[Leaf] = field(default_factory=list)
    share: dict[str, float] = field(default_factory=dict)
    ratio: float | None = None
    extra: Any = None


def tree() -> Tree:
    # ints where the types say float and tuples where they say list: what callers may pass
    return Tree(
        verdict="ok",
        leaf=Leaf(gib=80, count=3, tags=("a", "b")),
        leaves=[Leaf(gib=1.5)],
        share={"kv": 2, "free": 0.25},
        ratio=1,
        extra={"args": (1, (2, "é")), "leaf": Leaf(gib=0)},
    )


def test_dump_converts_as_pydantic_did():
    d = tree().model_dump(mode="json")
    assert json.dumps(d) == json.dumps(
        {
            "verdict": "ok",
            "leaf": {"gib": 80.0, "count": 3, "tags": ["a", "b"]},
            "maybe": None,
            "leaves": [{"gib": 1.5, "count": 0, "tags": []}],
            "share": {"kv": 2.0, "free": 0.25},
            "ratio": 1.0,
            "extra": {"args": [1, [2, "é"]], "leaf": {"gib": 0.0, "count": 0, "tags": []}},
        }
    )
    # python mode keeps the tuples of an Any field, as pydantic's did
    assert tree().model_dump()["extra"]["args"] == (1, (2, "é"))


def test_dump_json_is_pydantics_text():
    t = tree()
    ours = json.loads(t.model_dump_json())
    assert t.model_dump_json(indent=2) == TypeAdapter(Any).dump_json(ours, indent=2).decode()
    assert t.model_dump_json() == TypeAdapter(Any).dump_json(ours).decode()


def test_float_text_is_pydantic_cores():
    rng = random.Random(0)
    values = [0.0, -0.0, 1e-5, 1.5e-5, -9.99e-5, 1e-4, 1e-6, 5e-324, 1e15, 1e16, 1e22, 0.1 + 0.2]
    values += [10 ** rng.uniform(-12, 24) * rng.choice((1, -1)) for _ in range(2000)]
    values += [math.inf, -math.inf, math.nan]
    assert [float_text(v) for v in values] == [
        TypeAdapter(float).dump_json(v).decode() for v in values
    ]


def test_to_json_of_containers_and_strings():
    value = {"a": [], "b": {}, "c": [None, True, 3, 'x\n"\u2028\x00é'], 7: {"d": [[]]}}
    assert to_json(value, 2) == TypeAdapter(Any).dump_json(value, indent=2).decode()
    with pytest.raises(TypeError):
        to_json({"s": {1, 2}})


def test_records_are_frozen_copies_replace_and_schemas_forbid_extra_keys():
    t = tree()
    with pytest.raises(FrozenInstanceError):
        t.verdict = "fail"
    c = t.model_copy(update={"verdict": "fail"})
    assert (c.verdict, c.leaf, t.verdict) == ("fail", t.leaf, "ok")
    assert Leaf.model_json_schema()["additionalProperties"] is False
    leaf = Leaf(gib=1.0, tags=["x"])
    assert Leaf.model_validate_json(leaf.model_dump_json()) == leaf


def test_the_result_schemas_import_without_pydantic():
    code = (
        "import sys, servefit._plan.schema, servefit._explain.schema, servefit._fit.schema; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
