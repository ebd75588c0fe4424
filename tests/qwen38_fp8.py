"""Qwen3.8-27B-FP8, the checkpoint of the H100 / MI355X ground-truth logs, whose config.json is
not in the bundled catalog.

It is the Qwen3_5ForConditionalGeneration architecture (case notes), so the tests take the
Qwen3.5-27B config and ASSUME the quantization_config of Qwen's official block-FP8 releases.
in_proj_a / in_proj_b must stay unquantized: SGLang's block-FP8 linear requires every merged
output partition to be a multiple of block_n = 128 and in_proj_ba is [48, 48]
(sglang/srt/layers/quantization/fp8.py:Fp8LinearMethod.create_weights).
"""

from __future__ import annotations

import copy

from servefit import catalog
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec
from servefit.model.spec import ModelSpec

QWEN_FP8 = {
    "quant_method": "fp8",
    "fmt": "e4m3",
    "activation_scheme": "dynamic",
    "weight_block_size": [128, 128],
    "modules_to_not_convert": [
        "lm_head",
        "model.visual",
        "mtp",
        "linear_attn.in_proj_a",
        "linear_attn.in_proj_b",
    ],
}


def qwen38_fp8_spec(name: str) -> ModelSpec:
    """The Qwen3.5-27B config with QWEN_FP8 as its quantization_config."""
    cfg = copy.deepcopy(read_json(catalog.DATA / "Qwen__Qwen3.5-27B.json"))
    cfg["quantization_config"] = QWEN_FP8
    return build_model_spec(cfg, name=name, source="test")
