"""Every catalog model x TP 1-16 x SGLang 0.5.9, SGLang 0.5.23 and vLLM 0.33.0: the layouts the
engine can build the model in (engines/sglang/layout.py, engines/vllm/layout.py), as committed
values, and a plan of every other layout fails with the engine's refusal, whatever the GPU.

The values follow from the configs' fields and the mirrored checks; the per-engine tests
(tests/engines/sglang/test_layout.py, tests/engines/vllm/test_layout.py) work the reasons out by
hand for the cases that differ. Before these checks servefit planned "ok", and recommended,
Qwen3.6-27B at TP 3 and 6 (16 vision heads) on both engines, Nemotron-H at TP 3 and 6 on SGLang,
and pipeline stages with MTP on SGLang."""

from __future__ import annotations

import json

import pytest

from servefit import catalog
from servefit._plan.planner import PlanRequest, plan, resolve_model
from servefit.engines import registry
from servefit.engines.base import ParallelSizes
from servefit.errors import EngineRejection

POW2 = [1, 2, 4, 8]
POW2_16 = [1, 2, 4, 8, 16]
# 24 text heads / 16 vision heads (Qwen3.5/3.6 27B), 4 KV heads with 28 heads (Qwen2.5-7B),
# Mamba2 groups and vocabularies that 3 does not split (Nemotron): powers of two only
_TO_8 = (
    "Qwen/Qwen3.5-27B", "Qwen/Qwen3.6-27B", "nvidia/Qwen3.6-27B-NVFP4",
    "nvidia/Nemotron-H-56B-Base-8K", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
)  # fmt: skip
_SERVED_NOWHERE = {"sglang==0.5.9": ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
                                     "moonshotai/Kimi-K3", "MiniMaxAI/MiniMax-M1",
                                     "LiquidAI/LFM2.5-VL-1.6B"),
                   "sglang==0.5.23": ("MiniMaxAI/MiniMax-M1",),
                   "vllm==0.33.0": ("MiniMaxAI/MiniMax-M1",)}  # fmt: skip


def _expected(engine: str, model: str) -> list[int]:
    if model in _SERVED_NOWHERE[engine]:
        return []  # the architecture or config itself is refused
    if model == "Qwen/Qwen2.5-7B-Instruct":
        return [1, 2, 4]  # 28 heads: 8 does not divide them
    if model == "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16" or model in _TO_8:
        return POW2
    if model == "moonshotai/Kimi-K3" and engine == "sglang==0.5.23":
        # 96 MLA / KDA heads, and 0.5.23 pads the 163,840-token vocabulary to 64 x tp; vLLM
        # does not pad (163840 = 2^15 x 5), so it keeps the powers of two
        return [1, 2, 3, 4, 6, 8, 12, 16]
    return POW2_16


ENGINES = ("sglang==0.5.9", "sglang==0.5.23", "vllm==0.33.0")


def _catalog() -> list[str]:
    rows = json.loads((catalog.DATA / "index.json").read_text())
    return [r["id"] for r in rows if r["kind"] != "defaults"]


@pytest.mark.parametrize("engine", ENGINES)
def test_buildable_tp_sizes(engine):
    name, version = engine.split("==")
    profile = registry.profile(name, version)
    got = {}
    for model_id in _catalog():
        m = resolve_model(model_id)
        ok = []
        for tp in range(1, 17):
            try:
                profile.check_model(m, ParallelSizes(tp=tp, pp=1, dp=1, ep=1, world=tp, attn_tp=tp))
            except EngineRejection:
                continue
            ok.append(tp)
        got[model_id] = ok
    assert got == {m: _expected(engine, m) for m in got}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_refused_layout_is_a_plan_that_fails_with_the_refusal(engine):
    name, version = engine.split("==")
    profile = registry.profile(name, version)
    tp_dest = "tp_size" if name == "sglang" else "tensor_parallel_size"
    for model_id in _catalog():
        m = resolve_model(model_id)
        for tp in (3, 5, 6, 7, 12):
            try:
                profile.check_model(m, ParallelSizes(tp=tp, pp=1, dp=1, ep=1, world=tp, attn_tp=tp))
            except EngineRejection as exc:
                refused = str(exc)
            else:
                continue
            p = plan(PlanRequest(model=m, gpu="H200", engine=engine, args={tp_dest: tp}))
            assert (p.verdict, p.error) == ("fail", refused), (model_id, tp)
