"""Every registered release keeps the engine contract (engines/base.py:Profile).

For each release of registry.available(): its profile has a flag table, a non-empty lever list
whose levers the engine's catalogue knows, an architecture list, a docs page
(docs/engines/<engine>-<profile>.md), and plans the seed case (tests/seedcase.py: Qwen3.6-27B
on 2x A6000, TP 2, 32K context, MTP) without an exception. A release added without one of them
fails here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from servefit._explain.catalogue import catalogue_for
from servefit._plan.planner import PlanRequest, plan
from servefit.engines import registry
from servefit.errors import EngineVersionError
from tests.seedcase import SEED_SIZING_ARGV

DOCS = Path(__file__).resolve().parents[2] / "docs" / "engines"

# The seed launch as each engine's own command line (after the program name).
SEED_ARGV = {
    "sglang": SEED_SIZING_ARGV,
    "vllm": [
        "Qwen/Qwen3.6-27B",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "32768",
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 3}',
    ],
}
MODEL_KEYS = ("model_path", "model", "model_tag")


def problems(engine: str, release: str) -> list[str]:
    """What the profile of `release` lacks of the contract, in words; [] when nothing."""
    out: list[str] = []
    try:
        prof, ref = registry.select(f"{engine}=={release}")
    except EngineVersionError as exc:
        return [f"no profile: {exc}"]
    if not prof.flags:
        out.append("no flag table")
    if not prof.architectures:
        out.append("no architecture list")
    known = {lv.name for lv in catalogue_for(engine).levers}
    if not prof.levers:
        out.append("no levers")
    elif unknown := sorted(set(prof.levers) - known):
        out.append(f"levers the {engine} catalogue does not know: {unknown}")
    dests = {f.dest for f in prof.flags}
    if missing := sorted(
        d for d in prof.levers.values() if d not in dests and d != "num_speculative_tokens"
    ):
        out.append(f"lever attributes without a flag: {missing}")
    if not (DOCS / f"{engine}-{ref.profile}.md").is_file():
        out.append(f"no docs/engines/{engine}-{ref.profile}.md")
    parsed = prof.parse_argv(list(SEED_ARGV[engine]))
    if parsed.errors:
        out.append(f"cannot read the seed command: {parsed.errors}")
    args = {k: v for k, v in parsed.values.items() if k not in MODEL_KEYS}
    try:
        p = plan(
            PlanRequest(
                model="Qwen/Qwen3.6-27B", gpu="A6000", engine=f"{engine}=={release}", args=args
            )
        )
    except Exception as exc:  # the point: nothing may escape
        out.append(f"the seed case raises {type(exc).__name__}: {exc}")
    else:
        if p.engine.profile != prof.version or p.hardware.tp_size != 2:
            out.append(f"the seed case planned {p.engine} TP {p.hardware.tp_size}")
    return out


RELEASES = [(e, r) for e, rs in registry.available().items() for r in rs]


@pytest.mark.parametrize(("engine", "release"), RELEASES)
def test_every_registered_release_keeps_the_contract(engine, release):
    assert problems(engine, release) == []


def test_a_release_missing_a_piece_fails_the_contract():
    real = registry.profiles("sglang")[-1]
    broken = dataclasses.replace(real, version="0.5.99", flags=(), levers={})
    with registry.registered("0.5.99", broken):
        assert problems("sglang", "0.5.99") == [
            "no flag table",
            "no levers",
            "no docs/engines/sglang-0.5.99.md",
        ]

    def gap(*args, **kwargs):
        raise KeyError("speculative_num_steps")

    crashing = dataclasses.replace(real, size_pools=gap)
    with registry.registered("0.5.98", crashing):
        assert problems("sglang", "0.5.98") == [
            "the seed case raises KeyError: 'speculative_num_steps'"
        ]


def test_every_profile_is_some_release_s():
    for engine in registry.engines():
        assert set(registry.profile_ids(engine)) == set(registry.RELEASES[engine].values())
        for prof in registry.profiles(engine):
            assert prof.engine == engine and prof.version in registry.RELEASES[engine]
