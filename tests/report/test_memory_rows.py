"""The memory table adds up: its rows (what the engine allocated, memory outside torch, CUDA
graphs, what was in use before loading, what is left free) partition one rank's GPU, for every
catalog model x catalog GPU x each engine's newest release and every catalog model x four GPU
sizes x every other registered release, starting or not. Before, SGLang's
"reserved (1 - mem_fraction_static)" and vLLM's "profiling peak" rows were counted on top of
the free memory they lie in: the seed's column summed to 113 %."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from servefit import catalog
from servefit._plan.planner import PlanRequest, plan, resolve_model
from servefit.engines import registry
from servefit.errors import ServefitError
from servefit.hardware.catalog import get_gpu, list_gpus
from servefit.report.table import memory_rows
from tests.seedcase import SEED

PROFILES = [(e, p.version) for e in ("sglang", "vllm") for p in registry.profiles(e)]
NEWEST = {e: registry.profiles(e)[-1].version for e in ("sglang", "vllm")}
TP = {"sglang": "tp_size", "vllm": "tensor_parallel_size"}
# every other release on four sizes of GPU (the profiles' arithmetic does not depend on the
# kind, the catalog's memory figures do): 24, 48, 80 and 141 GB
SIZES = ("RTX 4090", "A6000", "H100", "H200")


@cache
def _models() -> tuple[Any, ...]:
    rows = json.loads((catalog.DATA / "index.json").read_text())
    return tuple(resolve_model(r["id"]) for r in rows if r["kind"] != "defaults")


@pytest.mark.parametrize(("engine", "version"), PROFILES, ids=[f"{e}=={v}" for e, v in PROFILES])
def test_rows_partition_the_gpu(engine, version):
    """Every catalog model on every catalog GPU at each engine's newest release, on four GPU
    sizes at every other, at TP 1 and TP 8 in turn."""
    models = _models()
    gpus = list_gpus() if version == NEWEST[engine] else [get_gpu(n) for n in SIZES]
    planned = 0
    for m in models:
        for i, gpu in enumerate(gpus):
            tp = (1, 8)[i % 2]  # every GPU kind at one of the two, each model at both
            try:
                p = plan(PlanRequest(model=m, gpu=gpu, engine=f"{engine}=={version}",
                                     args={TP[engine]: tp}))  # fmt: skip
            except ServefitError:
                continue  # a model this release does not plan at all (no rows to add up)
            planned += 1
            total = sum(gib for _, gib in memory_rows(p))
            assert total == pytest.approx(p.per_rank.total_gib, abs=1e-6), (m.name, gpu.name, tp)
    assert planned >= len(models) * len(gpus) // 2


def test_seed_adds_up_to_100_percent():
    """The seed's failing launch (README, --mem-fraction-static 0.85): weights 25.48, KV 0,
    state 3.44, speculative state 13.76, draft weights 0.44, CUDA/NCCL 0.82 and free 4.04 GiB
    of 47.99: 53.1 + 0.0 + 7.2 + 28.7 + 0.9 + 1.7 + 8.4 = 100.0 %. The 7.08 GiB outside
    --mem-fraction-static is in the pools table, not a row."""
    p = plan(PlanRequest(model="Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9",
                         args={**SEED, "mem_fraction_static": 0.85}))  # fmt: skip
    rows = dict(memory_rows(p))
    shares = [round(100 * v / p.per_rank.total_gib, 1) for v in rows.values()]
    assert shares == [53.1, 0.0, 7.2, 28.7, 0.9, 1.7, 8.4]
    assert round(sum(shares), 1) == 100.0
    assert "reserved (1 - mem_fraction_static)" not in rows
    assert round(p.per_rank.reserved_gib, 2) == 7.08
