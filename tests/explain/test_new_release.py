"""A new release registered with an identical copy of the newest profile explains and fixes the
seed case exactly as that profile does: explain, fix and fit ask the registry and the profile,
and name no release themselves."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from servefit._explain.analysis import explain_request
from servefit._plan.planner import PlanRequest
from servefit.engines import registry
from tests.seedcase import SEED

VLLM_SEED = {
    "tensor_parallel_size": 2,
    "max_model_len": 32768,
    "speculative_config": {"method": "mtp", "num_speculative_tokens": 3},
}
CASES = {
    # engine: (the copy's release, the seed's args: a launch that fails, so a fix is searched)
    "sglang": ("0.5.24", {**SEED, "mem_fraction_static": 0.5}),
    "vllm": ("0.34.0", {**VLLM_SEED, "max_num_seqs": 1024}),
}


def _without_engine(doc: Any) -> Any:
    """The explanation's levers and fix with the engine reference left out."""
    if isinstance(doc, dict):
        return {k: _without_engine(v) for k, v in doc.items() if k not in ("engine", "elapsed_s")}
    if isinstance(doc, list):
        return [_without_engine(v) for v in doc]
    return doc


@pytest.mark.parametrize("engine", sorted(CASES))
def test_identical_copy_of_the_newest_profile_explains_alike(engine, qwen36):
    release, args = CASES[engine]
    newest = registry.profiles(engine)[-1]

    def explain(spec: str):
        e = explain_request(PlanRequest(model=qwen36, gpu="A6000", engine=spec, args=args))
        return e, _without_engine(
            {
                "levers": [lv.model_dump(mode="json") for lv in e.levers],
                "fix": e.fix.model_dump(mode="json") if e.fix else None,
            }
        )

    base, want = explain(f"{engine}=={newest.version}")
    copy = dataclasses.replace(newest, version=release)
    with registry.registered(release, copy):
        e, got = explain(f"{engine}=={release}")
    assert e.plan.engine.profile == release and e.plan.engine.note is None
    assert base.levers and base.fix is not None and base.fix.best is not None
    assert got == want
