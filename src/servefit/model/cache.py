"""Values computed from a ModelSpec that explain and fit ask for thousands of times.

explain and fit re-plan one ModelSpec object over and over: values are looked up by the
object's identity first (hashing a ModelSpec walks every layer), keeping the object so its id
cannot be reused, then by value.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import Any, TypeVar

from servefit.model.spec import ModelSpec
from servefit.model.weights import PPSplit, WeightBreakdown, weights_per_rank

T = TypeVar("T")

_BY_ID: dict[tuple[Hashable, ...], tuple[ModelSpec, Any]] = {}


def by_identity(model: ModelSpec, key: tuple[Hashable, ...], make: Callable[[], T]) -> T:
    """`make()`, computed once per (model object, key)."""
    cache_key = (id(model), *key)
    hit = _BY_ID.get(cache_key)
    if hit is not None and hit[0] is model:
        value: T = hit[1]
        return value
    if len(_BY_ID) > 512:
        _BY_ID.clear()
    value = make()
    _BY_ID[cache_key] = (model, value)
    return value


@lru_cache(maxsize=256)
def _weights_by_value(
    model: ModelSpec, tp: int, pp: int, ep: int, pp_split: PPSplit
) -> WeightBreakdown:
    return weights_per_rank(model, tp=tp, pp=pp, ep=ep, include_mtp=True, pp_split=pp_split)


def weights(model: ModelSpec, tp: int, pp: int, ep: int, pp_split: PPSplit) -> WeightBreakdown:
    """weights_per_rank(model, tp, pp, ep, include_mtp=True) with the engine's PP layer split:
    the most of a plan's time."""
    return by_identity(
        model, ("w", tp, pp, ep, pp_split), lambda: _weights_by_value(model, tp, pp, ep, pp_split)
    )
