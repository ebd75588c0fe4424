"""quantization_config as the engines' quantization classes read it (model/quant_checks.py):
each reader's refusal with its text, the note every plan carries, and the sizing of a block no
engine quantizes from."""

from __future__ import annotations

import json

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.catalog import find
from servefit.model import readers
from servefit.model.inventory import build_model_spec
from servefit.model.readers import config_refusal

DENSE = json.loads(find("Qwen/Qwen3-8B").read_text())  # type: ignore[union-attr]
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
SGLANG = {readers.SGLANG_QUANT, readers.GPTQ_AWQ_CLASSIC, readers.SGLANG_MODELOPT_REGULAR_FP8}
SGLANG_0_5_9 = {readers.SGLANG_QUANT, readers.GPTQ_AWQ_CLASSIC, readers.SGLANG_MODELOPT_STATIC_FP8}
VLLM = {readers.VLLM_QUANT_0_33}


def _spec(q, where: str = "quantization_config"):
    return build_model_spec({**DENSE, where: q}, name="t", source="t")


CASES = [
    # gptq.py:GPTQConfig.__init__ Fraction(32, bits); auto_gptq.py:AutoGPTQConfig.__init__
    (
        {**GPTQ, "bits": 4.5},
        "TypeError: both arguments should be Rational instances (bits is 4.5)",
        "ValueError: Unsupported quantization config: bits=4.5, sym=True",
    ),
    (
        {**GPTQ, "bits": "4"},
        "TypeError: both arguments should be Rational instances (bits is '4')",
        "TypeError: unsupported operand type(s) for //: 'int' and 'str' (bits is '4')",
    ),
    (
        {**GPTQ, "bits": 3},
        None,  # GPTQConfig takes 2/3/4/8 bits; AutoGPTQConfig.TYPE_MAP 4 and 8 symmetric
        "ValueError: Unsupported quantization config: bits=3, sym=True",
    ),
    (
        {**GPTQ, "desc_act": True},
        None,
        "ValueError: GPTQ group activation ordering (desc_act=True) is no longer supported. "
        "Use a checkpoint with static activation ordering or desc_act=False.",
    ),
    (
        {"quant_method": "gptq", "bits": 4},
        None,
        "ValueError: Cannot find any of ['group_size'] in the model's quantization config.",
    ),
    # awq/schemes/awq_linear.py:AWQLinearScheme.create_weights, auto_awq.py:AutoAWQLinearMethod
    (
        {**AWQ, "group_size": 0},
        "ZeroDivisionError: integer modulo by zero",
        "ZeroDivisionError: integer modulo by zero",
    ),
    (
        {**AWQ, "bits": 8},
        "ValueError: Currently, only 4-bit weight quantization is supported for AWQ, but got 8 "
        "bits.",
        "ValueError: Unsupported num_bits = 8. Supported: 4. For 8-bit AWQ, use Marlin backend "
        "by setting backend='awq:marlin' or backend='marlin'.",
    ),
    # SGLang modelopt_quant.py:ModelOptFp8Config.from_config; vLLM modelopt.py
    (
        {"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"},
        "ValueError: ModelOptFp8Config only supports regular FP8 quantization, but found "
        "'W4A8_AWQ'. Use the native 'mxfp8' quantization method for MXFP8 or ModelOptFp4Config "
        "for FP4.",
        "ValueError: ModelOpt currently only supports: ['FP8', 'FP8_PER_CHANNEL_PER_TOKEN', "
        "'FP8_PB_WO', 'NVFP4', 'W4A16_NVFP4', 'MXFP8', 'MIXED_PRECISION'] quantizations in vLLM. "
        "Please check the `hf_quant_config.json` file for your model's quant configuration.",
    ),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}, None, None),
    (GPTQ, None, None),
    (AWQ, None, None),
]


@pytest.mark.parametrize(("q", "sglang", "vllm"), CASES)
def test_each_reader_refuses_as_its_class_does(q, sglang, vllm):
    issues = _spec(q).issues
    assert config_refusal(issues, SGLANG) == sglang
    assert config_refusal(issues, VLLM) == vllm


def test_sglang_up_to_0_5_17_says_static_fp8():
    issues = _spec({"quant_method": "modelopt", "quant_algo": "INT4_AWQ"}).issues
    assert config_refusal(issues, SGLANG_0_5_9) == (
        "ValueError: ModelOptFp8Config only supports static FP8 quantization in SGLang. For FP4 "
        "quantization, use ModelOptFp4Config. Check the quantization config for your model's "
        "configuration."
    )


@pytest.mark.parametrize(
    ("q", "sglang", "vllm"),
    [
        (
            [1, 2],
            "AttributeError: 'list' object has no attribute 'to_dict' (config field "
            "quantization_config must be an object, got [1, 2])",
            "AttributeError: 'list' object has no attribute 'get' (config field "
            "quantization_config must be an object, got [1, 2])",
        ),
        (
            "gptq",
            "AttributeError: 'str' object has no attribute 'to_dict' (config field "
            "quantization_config must be an object, got 'gptq')",
            "AttributeError: 'str' object has no attribute 'get' (config field "
            "quantization_config must be an object, got 'gptq')",
        ),
    ],
)
def test_a_block_that_is_no_mapping_is_refused_naming_the_field(q, sglang, vllm):
    m = _spec(q)
    assert config_refusal(m.issues, SGLANG) == sglang
    assert config_refusal(m.issues, VLLM) == vllm
    assert m.quant.method == "none"
    assert m.notes[0].startswith(
        f"config field quantization_config must be an object, got {q!r}: SGLang and vLLM 0.33"
    )


@pytest.mark.parametrize(
    ("q", "field", "why"),
    [
        ({}, "quantization_config", "it is empty"),
        (
            {"quantization_config": GPTQ},
            "quantization_config.quantization_config",
            "it only wraps another block, quantization_config.quantization_config",
        ),
    ],
)
def test_an_empty_or_wrapping_block_is_unquantized_for_vllm_and_refused_by_sglang(q, field, why):
    m = _spec(q)
    assert m.quant.method == "none"  # not GPTQ, not "unknown": the engines do not quantize
    assert [i.field for i in m.issues] == [field]
    assert config_refusal(m.issues, SGLANG) == (
        "ValueError: Unknown quantization method: . Must be one of [...] "
        f"(quantization_config has no quant_method: {why})"
    )
    assert config_refusal(m.issues, VLLM) is None
    assert m.notes == [
        f"quantization_config has no quant_method ({why}): vLLM 0.33 loads the weights "
        "unquantized, SGLang stops at it; servefit sizes them unquantized"
    ]


def test_the_block_read_is_the_top_level_one():
    cfg = json.loads(find("Qwen/Qwen3.5-27B").read_text())  # type: ignore[union-attr]
    cfg["quantization_config"] = {**AWQ, "group_size": 0}
    cfg["text_config"]["quantization_config"] = AWQ
    issues = build_model_spec(cfg, name="t", source="t").issues
    assert [i.field for i in issues] == ["quantization_config"]
    cfg["text_config"]["quantization_config"] = "x"
    del cfg["quantization_config"]
    issues = build_model_spec(cfg, name="t", source="t").issues
    assert [i.field for i in issues] == ["text_config.quantization_config"]


def test_plans_fail_with_the_release_text_and_keep_the_note():
    cfg = {**DENSE, "quantization_config": {**GPTQ, "bits": 4.5}}
    m = build_model_spec(cfg, name="t", source="t")
    want = {
        "sglang==0.5.9": "TypeError: both arguments should be Rational instances (bits is 4.5)",
        "vllm==0.32.0": "TypeError: both arguments should be Rational instances (bits is 4.5)",
        "vllm==0.33.0": "ValueError: Unsupported quantization config: bits=4.5, sym=True",
    }
    for engine, error in want.items():
        p = plan(PlanRequest(model=m, gpu="H100", engine=engine))
        assert p.verdict == "fail" and p.error == error, engine
    listed = build_model_spec({**DENSE, "quantization_config": []}, name="t", source="t")
    p = plan(PlanRequest(model=listed, gpu="H100", engine="vllm==0.32.0"))
    assert p.verdict == "ok" and listed.notes[0] in p.warnings  # no reader of its: the note
