"""Models and plans for the vLLM engine tests. Configs are the bundled catalog files; where a
test needs a key a config lacks, the test says so where it adds it."""

from __future__ import annotations

import copy

from servefit import catalog
from servefit._plan.planner import PlanRequest, plan
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec

GiB = 1 << 30


def catalog_config(file: str) -> dict:
    return copy.deepcopy(read_json(catalog.DATA / file))


def qwen3_next(**extra):
    cfg = catalog_config("Qwen__Qwen3-Next-80B-A3B-Thinking.json")
    cfg.update(extra)
    return build_model_spec(cfg, name="Qwen3-Next-80B-A3B (test)", source="test")


def qwen3_8b(**extra):
    """Qwen3-8B's bundled config, with `extra` keys set (a key set to None is removed)."""
    cfg = catalog_config("Qwen__Qwen3-8B.json")
    cfg.update(extra)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    return build_model_spec(cfg, name="Qwen3-8B (test)", source="test")


def vplan(model, gpu: str, engine: str, env: dict | None = None, **args):
    return plan(PlanRequest(model=model, gpu=gpu, engine=engine, args=args, env=env or {}))
