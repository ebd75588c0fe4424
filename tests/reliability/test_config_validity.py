"""Configs the engines would refuse, or read differently from the plan, through the CLI: the
layer layout (Qwen3.5 `layer_types` / `full_attention_interval`, Nemotron-H's pattern) and the
`quantization_config` block, each on the releases that read it differently.

ERROR / RESULT / WARNING as in tests/reliability/corpus.py: servefit's own refusal (exit 2, one
line), a plan (exit 0 or 1; `code` when it must be one of them), a plan that says what the
engines make of the field (`needle`). `absent` must not appear in what the user reads."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from servefit.catalog import find
from servefit.cli.main import main
from tests.reliability.corpus import ERROR, RESULT, WARNING


def _catalog(name: str) -> dict:
    return json.loads(find(name).read_text())  # type: ignore[union-attr]


DENSE = _catalog("Qwen/Qwen3-8B")
QWEN35 = _catalog("Qwen/Qwen3.5-27B")  # text_config: 64 layers, every 4th full attention
NEMOTRON = _catalog("nvidia/Nemotron-H-56B-Base-8K")  # 118 layers in hybrid_override_pattern
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}


def _text(**fields) -> dict:
    cfg = copy.deepcopy(QWEN35)
    for key, value in fields.items():
        if value is None:
            cfg["text_config"].pop(key)
        else:
            cfg["text_config"][key] = value
    return cfg


def _quant(q) -> dict:
    return {**DENSE, "quantization_config": q}


_PATTERN = NEMOTRON["hybrid_override_pattern"]
CONFIGS: dict[str, dict] = {
    "qwen35.json": QWEN35,
    "layer_types_short.json": _text(layer_types=QWEN35["text_config"]["layer_types"][:10]),
    "layer_types_short_no_interval.json": _text(
        layer_types=QWEN35["text_config"]["layer_types"][:10], full_attention_interval=None
    ),
    "layer_types_only.json": _text(full_attention_interval=None),
    "interval_disagrees.json": _text(full_attention_interval=2),
    "all_linear.json": _text(full_attention_interval=65, layer_types=None),
    "nemotron_short.json": {**NEMOTRON, "hybrid_override_pattern": _PATTERN[:-4]},
    "gptq_bits_4_5.json": _quant({**GPTQ, "bits": 4.5}),
    "gptq_bits_string.json": _quant({**GPTQ, "bits": "4"}),
    "gptq_desc_act.json": _quant({**GPTQ, "desc_act": True}),
    "awq_group_0.json": _quant({**AWQ, "group_size": 0}),
    "quant_a_string.json": _quant("gptq"),
    "quant_empty.json": _quant({}),
    "quant_nested.json": _quant({"quantization_config": GPTQ}),
    "modelopt_unknown.json": _quant({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}),
    "gptq_valid.json": _quant(GPTQ),
    "large_field.json": {**DENSE, "extra_ints": list(range(200_000))},
}


@dataclass(frozen=True)
class Case:
    file: str
    engine: str
    expect: str
    needle: str = ""
    code: int | None = None
    absent: str = ""

    @property
    def id(self) -> str:
        return f"{self.file.removesuffix('.json')}-{self.engine}"


S9, S23, V32, V33 = "sglang==0.5.9", "sglang==0.5.23", "vllm==0.32.0", "vllm==0.33.0"
SHORT = "must be equal to the number of `layer_types` (10)"
CASES = [
    Case("qwen35.json", S23, RESULT, code=0, absent="layer_types"),
    Case("qwen35.json", V33, RESULT, absent="layer_types"),  # fails on memory, not config
    # SGLang 0.5.9's transformers has no qwen3_5: its own class never reads layer_types
    Case("layer_types_short.json", S9, WARNING, "never reads layer_types", code=0),
    Case("layer_types_short.json", S23, RESULT, SHORT, code=1),
    Case("layer_types_short.json", V33, RESULT, SHORT, code=1),
    # no reader can build it: servefit's own error
    Case("layer_types_short_no_interval.json", S23, ERROR, "layer_types has 10 entries"),
    Case("layer_types_only.json", S23, RESULT, "no attribute 'full_attention_interval'", code=1),
    Case("layer_types_only.json", V33, RESULT, absent="full_attention_interval"),
    Case("interval_disagrees.json", S23, WARNING, "layer_types makes 16"),
    Case("interval_disagrees.json", V33, WARNING, "vLLM builds the layers layer_types lists"),
    Case("all_linear.json", S9, RESULT, "ZeroDivisionError: integer division", code=1),
    Case("all_linear.json", S23, WARNING, "leaves none of the 64 layers full attention"),
    Case("nemotron_short.json", S9, RESULT, "AssertionError: hybrid_override_pattern", code=1),
    Case("nemotron_short.json", S23, WARNING, "disagrees with the 114 layers"),
    Case("nemotron_short.json", V33, WARNING, "the engines build 114"),
    Case("gptq_bits_4_5.json", S23, RESULT, "both arguments should be Rational", code=1),
    Case("gptq_bits_4_5.json", V33, RESULT, "Unsupported quantization config: bits=4.5", code=1),
    Case("gptq_bits_string.json", S23, RESULT, "(bits is '4')", code=1),
    Case("gptq_bits_string.json", V33, RESULT, "for //: 'int' and 'str'", code=1),
    Case("gptq_desc_act.json", S23, RESULT, code=0, absent="desc_act"),
    Case("gptq_desc_act.json", V33, RESULT, "(desc_act=True) is no longer supported", code=1),
    Case("awq_group_0.json", S23, RESULT, "ZeroDivisionError: integer modulo by zero", code=1),
    Case("awq_group_0.json", V33, RESULT, "ZeroDivisionError: integer modulo by zero", code=1),
    Case("quant_a_string.json", S23, RESULT, "no attribute 'to_dict'", code=1),
    Case("quant_a_string.json", V33, RESULT, "no attribute 'get'", code=1),
    Case("quant_a_string.json", V32, WARNING, "quantization_config must be an object", code=0),
    Case("quant_empty.json", S9, RESULT, "Unknown quantization method: .", code=1),
    Case("quant_empty.json", V33, WARNING, "vLLM 0.33 loads the weights unquantized", code=0),
    Case("quant_nested.json", S23, RESULT, "quantization_config.quantization_config", code=1),
    Case("quant_nested.json", V33, WARNING, "only wraps another block", code=0),
    Case("modelopt_unknown.json", S9, RESULT, "supports static FP8 quantization", code=1),
    Case("modelopt_unknown.json", S23, RESULT, "but found 'W4A8_AWQ'", code=1),
    Case("modelopt_unknown.json", V33, RESULT, "ModelOpt currently only supports", code=1),
    Case("gptq_valid.json", V33, RESULT, code=0, absent="quantization_config"),
    Case("large_field.json", V33, RESULT, code=0),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("validity")
    for name, cfg in CONFIGS.items():
        (d / name).write_text(json.dumps(cfg))
    return d


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, files: Path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    argv = ["plan", "--gpu", "H100", "--engine", case.engine, "--format", "json"]
    code, out, err = _run(capsys, [*argv, "-m", str(files / case.file)])
    said = out + err
    assert "internal error" not in err and "Traceback" not in said, err[-2000:]
    if case.expect == ERROR:
        assert code == 2, f"exit {code}, wanted a clear error: {said[-800:]}"
        assert err.strip().splitlines()[-1].startswith("servefit: error: "), err[-800:]
    else:
        assert code in (0, 1), f"exit {code}, wanted an answer: {said[-800:]}"
        plan = json.loads(out)
        if case.expect == WARNING:
            assert any(case.needle in w for w in plan["warnings"]), plan["warnings"]
    if case.code is not None:
        assert code == case.code, said[-800:]
    if case.needle:
        assert case.needle in said, f"{case.needle!r} not in: {said[-1500:]}"
    if case.absent:  # in what servefit says of the config, not in the plan's echo of it
        plan = json.loads(out)
        told = " ".join([*plan["warnings"], plan["error"] or ""])
        assert case.absent not in told, told
