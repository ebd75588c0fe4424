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
