"""PlanRequest(text=False): the same plan less the text the profile skips, and so the same fit
and the same fix as with the text. fit's candidates and the fix search plan that way; this is
what makes it exact (engines/base.py:SizePools)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servefit._explain.analysis import fix_request
from servefit._fit.search import FitRequest, fit
from servefit._plan.planner import PlanRequest, plan
from servefit.model.inventory import load_model
from tests.seedcase import HAND_TUNED, SEED

RELEASES = ["sglang==0.5.9", "sglang==0.5.12", "sglang==0.5.23", "vllm==0.33.0"]

SHOWN = ("consumers", "log_lines")  # the display text


def _seed_args(engine: str, **more: object) -> dict[str, object]:
    if engine.startswith("vllm"):
        return {"tensor_parallel_size": 2, "max_model_len": 32768, **more}
    return {**SEED, **more}


@pytest.mark.parametrize("engine", RELEASES)
@pytest.mark.parametrize(
    "extra",
    [{}, {"mem_fraction_static": 0.85}, {"mem_fraction_static": 0.6}, {"max_running_requests": 3}],
    ids=["default", "0.85", "0.6", "mrr3"],
)
def test_every_figure_is_the_same(engine, extra):
    if engine.startswith("vllm") and extra:
        extra = {"gpu_memory_utilization": extra.get("mem_fraction_static", 0.9)}
    req = PlanRequest(
        model="Qwen/Qwen3.6-27B", gpu="A6000", engine=engine, args=_seed_args(engine, **extra)
    )
    full, quiet = plan(req), plan(replace(req, text=False))
    a, b = full.model_dump(), quiet.model_dump()
    for key in SHOWN:
        a.pop(key), b.pop(key)
    assert b == a
    if engine.startswith("sglang"):
        # the sizing's text skipped; the lines resolve printed (built before sizing) stay
        assert quiet.consumers == []
        assert quiet.log_lines == full.log_lines[: len(quiet.log_lines)]
        if full.consumers:  # sized (a launch refused while resolving its args is not)
            assert len(quiet.log_lines) < len(full.log_lines)
    else:  # vLLM builds its text in the pass that sizes the pools: kept
        assert quiet.consumers == full.consumers and quiet.log_lines == full.log_lines


def _with_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """fit and the fix search planning every candidate with its text, as before PlanRequest.text."""
    import servefit._plan.planner as planner

    real = planner._plan

    def texted(request, *, rejections_fail):
        return real(replace(request, text=True), rejections_fail=rejections_fail)

    monkeypatch.setattr(planner, "_plan", texted)


def _fit_dump(engine: str) -> dict[str, object]:
    baseline = {**SEED, **HAND_TUNED} if engine.startswith("sglang") else None
    result = fit(
        FitRequest(
            model=load_model("Qwen/Qwen3.6-27B"), gpu="A6000", num_gpus=2, context=32768,
            concurrency=16, spec="mtp", engine=engine, baseline=baseline,
            model_path="Qwen/Qwen3.6-27B",
        )
    ).model_dump()
    del result["elapsed_s"], result["candidates_per_s"]  # the clock's
    return result


@pytest.mark.parametrize("engine", ["sglang==0.5.9", "sglang==0.5.23"])
def test_fit_is_the_same_as_with_text(engine, monkeypatch):
    quiet = _fit_dump(engine)
    _with_text(monkeypatch)
    assert _fit_dump(engine) == quiet


@pytest.mark.parametrize(
    ("engine", "args"),
    [
        ("sglang==0.5.9", {**SEED, "mem_fraction_static": 0.85}),
        ("sglang==0.5.23", {**SEED, "mem_fraction_static": 0.5}),
        ("sglang==0.5.9", {"tp_size": 1}),
    ],
    ids=["seed-0.85", "0.5.23-0.5", "tp1-gpus"],
)
def test_fix_is_the_same_as_with_text(engine, args, monkeypatch):
    req = PlanRequest(model="Qwen/Qwen3.6-27B", gpu="A6000", engine=engine, args=args)
    base = plan(req)
    assert base.verdict == "fail"
    quiet = fix_request(req, base).model_dump()
    _with_text(monkeypatch)
    assert fix_request(req, base).model_dump() == quiet
