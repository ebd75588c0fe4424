"""What a release refuses of a model before anything resolves (Profile.check_model at one rank),
as the registry selects the release: its own architecture list included."""

from __future__ import annotations

from servefit.engines import registry
from servefit.engines.base import ParallelSizes
from servefit.errors import EngineRejection
from servefit.model.spec import ModelSpec

ONE_RANK = ParallelSizes(tp=1, pp=1, dp=1, ep=1, world=1, attn_tp=1)


def refusal(engine: str, model: ModelSpec) -> str | None:
    """The engine's refusal of `model` on `engine` ("sglang==0.5.8"), or None."""
    prof, _ = registry.select(engine)
    try:
        prof.check_model(model, ONE_RANK)
    except EngineRejection as exc:
        return str(exc)
    return None
