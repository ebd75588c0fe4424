"""The types explain, fix and fit share: a lever, its candidate values, the context values are
generated from, and an engine's lever catalogue (_explain/catalogue.py builds one per engine).

A Lever says when it applies (a state pool, a speculative algorithm, ...) and generates
candidate values from the current plan; the attribute it sets in a release, and whether the
release has it at all, is the release profile's to say (engines/base.py:Profile.levers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from servefit._plan.planner import PlanRequest
from servefit._plan.schema import Plan
from servefit.engines import registry
from servefit.engines.base import Profile
from servefit.engines.remedy import Remedy
from servefit.frozen import frozen
from servefit.model.spec import ModelSpec


@frozen
class Context:
    """What lever values are generated from."""

    request: PlanRequest
    plan: Plan
    model: ModelSpec
    profile: str  # the profile the plan used (EngineRef.profile)
    catalogue: Catalogue  # the plan's engine's levers and flag spellings (_explain/catalogue.py)

    @property
    def args(self) -> dict[str, Any]:
        return self.plan.resolved_args

    @property
    def engine_profile(self) -> Profile:
        return registry.profile(self.plan.engine.name, self.profile)

    @property
    def lever_dests(self) -> Mapping[str, str]:
        """lever name -> the attribute it sets in this release (the profile's levers)."""
        return self.engine_profile.levers

    def dest(self, lever: Lever) -> str | None:
        """The attribute `lever` sets in this release; None when the release has no such lever."""
        return self.lever_dests.get(lever.name)

    @property
    def has_state(self) -> bool:
        return self.plan.pools.mamba_layers > 0

    @property
    def spec(self) -> str | None:
        return self.args.get("speculative_algorithm")

    @property
    def world(self) -> int:
        return self.plan.hardware.tp_size * self.plan.hardware.pp_size

    @property
    def running(self) -> int:
        """The running-request count the launch aims at: the resolved cap, else the engine's."""
        mrr = self.args.get(self.catalogue.running_dest)
        return int(mrr) if mrr else max(1, self.plan.pools.effective_max_running_requests)


@frozen
class Option:
    label: str
    args: dict[str, Any]
    num_gpus: int | None = None  # parallelism values that need a different GPU count


@frozen
class Lever:
    name: str
    title: str
    values: Callable[[Context], list[Option]]  # explain's values
    fix_values: Callable[[Context], list[Option]] | None = None  # None: not used by the fix
    applies: Callable[[Context], bool] = lambda c: True
    unused_when: Callable[[Context], str | None] = lambda c: None
    lossy: bool = False  # changes numerics: only with allow_lossy in fix and fit
    tags: tuple[str, ...] = field(default_factory=tuple)
    context: bool = False  # sets the context length: its values are judged at their own context


@frozen
class Catalogue:
    engine: str
    levers: tuple[Lever, ...]
    flag: Callable[[str, str], str]  # (mirrored release, engine attribute) -> CLI flag
    tokens: Callable[[str, str, Any], list[str]]  # (release, attribute, value) -> CLI tokens
    running_dest: str  # the running-request cap
    fraction_dest: str  # the memory share the engine sizes its pools from
    context_dest: str
    tp_dest: str
    pp_dest: str
    headroom: Callable[[Plan], float]  # GiB left after everything the engine reserves
    headroom_means: str  # what that headroom is for, in words
    min_free_gib: float  # the headroom a fix or fit candidate must leave, unless told otherwise
    budget_notes: Callable[[Plan, bool], list[str]]  # (plan, failing) -> sentences
    not_user_levers: frozenset[str]  # user args that are not worth re-planning without
    remedies: tuple[
        Remedy, ...
    ] = ()  # the engine's messages that name their fix (engines/remedy.py)


def fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def options(dest: str, values: list[Any], current: Any) -> list[Option]:
    out, seen = [], set()
    for v in values:
        if v is None or v == current or v in seen:
            continue
        seen.add(v)
        out.append(Option(fmt_value(v), {dest: v}))
    return out


def parallel_values(c: Context) -> list[Option]:
    """Every TP x PP over the launch's GPUs and over twice as many (the engine's own names)."""
    n = c.request.num_gpus or c.world
    hw = c.plan.hardware
    tp_dest, pp_dest = c.catalogue.tp_dest, c.catalogue.pp_dest
    out = []
    for total in (n, 2 * n):
        for tp in _divisors(total):
            pp = total // tp
            if (tp, pp) == (hw.tp_size, hw.pp_size):
                continue
            label = f"TP {tp} x PP {pp}" + ("" if total == n else f" ({total} GPUs)")
            out.append(Option(label, {tp_dest: tp, pp_dest: pp}, num_gpus=total))
    return out


def parallel_fix(c: Context) -> list[Option]:
    n = c.request.num_gpus or c.world
    return [o for o in parallel_values(c) if o.num_gpus == n]


# No launch spans more GPUs than this: an absurd --tp-size gets no parallel-layout suggestions
# (listing the divisors of 10**20 would never end).
_MAX_GPUS = 1 << 16


def _divisors(n: int) -> list[int]:
    if n > _MAX_GPUS:
        return []
    return [d for d in range(1, n + 1) if n % d == 0]


def change_reason(c: Context, arg: str) -> str | None:
    ch = next((x for x in c.plan.changes if x.arg == arg), None)
    return ch.reason if ch else None


def levers_for(c: Context) -> list[Lever]:
    """The levers of the plan's engine (its catalogue) that exist in this release and apply."""
    return [lv for lv in c.catalogue.levers if c.dest(lv) and lv.applies(c)]
