"""A release that does not serve the model: no flag and no GPU count fixes it, the fix names the
registered releases that do.

vLLM registers Qwen3_5ForConditionalGeneration (Qwen3.5/3.6) from 0.17.0 on
(vllm/model_executor/models/registry.py:_VLLM_MODELS, extracted per release into
engines/vllm/archs_<release>.txt by tools/extract_architectures.py: absent from
archs_0_16_0.txt, present in archs_0_17_0.txt and every later list).
"""

from __future__ import annotations

from servefit._explain.analysis import explain_request
from servefit._plan.planner import PlanRequest
from servefit.engines import registry

SEED = {"tensor_parallel_size": 2, "max_model_len": 32768}


def test_a_release_without_the_architecture_names_the_releases_that_have_it(qwen36):
    e = explain_request(PlanRequest(model=qwen36, gpu="A6000", engine="vllm==0.16.0", args=SEED))
    # the engine's text goes on with the 284 architectures 0.16.0 registers
    assert e.plan.error.startswith(
        "ValueError: Model architectures ['Qwen3_5ForConditionalGeneration'] are not supported "
        "for now. Supported architectures: dict_keys(["
    )
    newest = registry.releases("vllm")[-1]
    assert e.fix is not None and e.fix.best is None and e.fix.gpus is None
    assert e.fix.note == (
        "vllm 0.16.0 does not serve Qwen3_5ForConditionalGeneration; "
        f"vllm 0.17.0-{newest} do: --engine vllm=={newest}"
    )


def test_the_releases_serving_a_model_follow_each_releases_own_list(qwen36):
    every = registry.releases("vllm")
    assert registry.serving_releases(qwen36)["vllm"] == every[every.index("0.17.0") :]


def test_release_runs_collapse_three_or_more_consecutive_releases():
    every = registry.releases("vllm")
    assert registry.release_runs("vllm", every[-3:]) == f"vllm {every[-3]}-{every[-1]}"
    assert registry.release_runs("vllm", every[-2:]) == f"vllm {every[-2]}, {every[-1]}"
    assert registry.release_runs("vllm", []) == "vllm: none"
