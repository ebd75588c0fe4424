from __future__ import annotations

import pytest

from servefit._plan.planner import PlanRequest
from servefit.model.inventory import load_model
from tests.seedcase import HAND_TUNED, SEED


@pytest.fixture(scope="session")
def qwen36():
    return load_model("Qwen/Qwen3.6-27B")


@pytest.fixture(scope="session")
def seed_request(qwen36):
    def make(engine: str = "sglang==0.5.9", **extra) -> PlanRequest:
        return PlanRequest(model=qwen36, gpu="A6000", engine=engine, args={**SEED, **extra})

    return make


@pytest.fixture(scope="session")
def failing_085(seed_request):
    from servefit._explain.analysis import explain_request

    return explain_request(seed_request(mem_fraction_static=0.85))


@pytest.fixture(scope="session")
def hand_tuned(seed_request):
    from servefit._explain.analysis import explain_request

    return explain_request(seed_request(**HAND_TUNED))
