"""Architecture support per SGLang release, from each wheel: what a release registers
(sglang/srt/models/*.py:EntryClass, archs_<v>.txt) and what it can load."""

from __future__ import annotations

import pytest

from servefit import catalog
from servefit.engines.base import ParallelSizes
from servefit.engines.sglang import v0_5_9, v0_5_10, v0_5_15, v0_5_23
from servefit.errors import EngineRejection
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec
from servefit.model.spec import ModelSpec
from tests.engines.release_archs import refusal
from tests.engines.sglang.handbuilt import gpus

ONE_RANK = ParallelSizes(tp=1, pp=1, dp=1, ep=1, world=1, attn_tp=1)


def _catalog(name: str, repo: str) -> ModelSpec:
    return build_model_spec(read_json(catalog.DATA / name), name=repo, source=name)


def test_lfm2_vl_registered_from_0_5_10():
    """models/lfm2_vl.py (EntryClass Lfm2VlForConditionalGeneration) is new in 0.5.10."""
    model = _catalog("LiquidAI__LFM2.5-VL-1.6B.json", "LiquidAI/LFM2.5-VL-1.6B")
    assert model.architecture == "Lfm2VlForConditionalGeneration"
    with pytest.raises(EngineRejection, match="SGLang 0.5.9 does not register"):
        v0_5_9.PROFILE.check_model(model, ONE_RANK)
    for prof in (v0_5_10, v0_5_15, v0_5_23):
        prof.PROFILE.check_model(model, ONE_RANK)  # registered: no rejection


def test_nemotron3_layers_block_type_cannot_load_on_0_5_9():
    """configs/nemotron_h.py: 0.5.9's NemotronHConfig reads only hybrid_override_pattern
    (default 52 layers); the Ultra config gives its 108 layers as layers_block_type, which
    NemotronHConfig._resolve_layers_block_type reads from 0.5.10."""
    model = _catalog(
        "nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.json",
        "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
    )
    assert "hybrid_override_pattern" not in model.raw_config
    assert len(model.raw_config["layers_block_type"]) == 108
    # refused with the architecture, before anything resolves (Profile.check_model), so
    # `servefit models` does not list 0.5.9 among the releases that serve it
    prof = v0_5_9.PROFILE
    with pytest.raises(EngineRejection, match="0.5.9 cannot load .*108 layers"):
        prof.check_model(model, prof.parallel_sizes({"tp_size": 8}))
    v0_5_10.PROFILE.check_model(model, prof.parallel_sizes({"tp_size": 8}))
    resolved = v0_5_10.resolve_args(model, gpus("H200", 143771, 8), {"tp_size": 8}, {})
    assert resolved.error is None


def test_nemotron3_with_pattern_loads_on_0_5_9():
    """The Nano config carries hybrid_override_pattern: 0.5.9 reads its layout."""
    model = _catalog(
        "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json",
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    )
    v0_5_9.PROFILE.check_model(model, v0_5_9.PROFILE.parallel_sizes({}))
    assert v0_5_9.resolve_args(model, gpus("H200", 143771, 1), {}, {}).error is None


SEED = "Qwen__Qwen3.6-27B.DERIVED-from-nvidia-NVFP4.json"


@pytest.mark.parametrize(
    ("engine", "refused"),
    [
        ("sglang==0.5.8", True),  # archs_0_5_8.txt: no Qwen3_5 module before 0.5.9
        ("sglang==0.5.8.post1", True),  # a post release has its own list
        ("sglang==0.5.3", True),
        ("sglang==0.4.10", True),  # older than every list: 0.5.1's, which lacks it too
        ("sglang==0.5.9", False),
        ("sglang==0.5.23", False),
    ],
)
def test_a_release_outside_the_mirrored_range_plans_only_what_it_registers(engine, refused):
    # the releases before 0.5.9 are planned with 0.5.9's profile, but with their own
    # architecture lists (tools/extract_architectures.py on each wheel)
    seed = build_model_spec(read_json(catalog.DATA / SEED), name="Qwen/Qwen3.6-27B", source=SEED)
    error = refusal(engine, seed)
    assert (error is not None) is refused, error
    if refused:
        release = engine.split("==")[1]
        assert error.startswith(
            f"SGLang {release} does not register Qwen3_5ForConditionalGeneration"
        )


def test_qwen3_next_is_registered_from_0_5_2():
    # archs_0_5_1.txt / archs_0_5_2.txt: models/qwen3_next.py is new in 0.5.2
    model = _catalog("Qwen__Qwen3-Next-80B-A3B-Thinking.json", "Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert refusal("sglang==0.5.1", model) is not None
    assert refusal("sglang==0.5.2", model) is None
