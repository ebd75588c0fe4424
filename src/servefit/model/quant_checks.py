"""`quantization_config` as the engines' quantization classes read it, and what each refuses.

The block read is the engines': the top-level `quantization_config`, else the text config's
(SGLang's get_config copies text_config attributes the top level lacks, vLLM's
model_arch_config_convertor.py:get_quantization_config looks there second), else
`compression_config` the same way. Per method, the checks are those of the class the engine
builds from it, in its order:

* GPTQ: SGLang's GPTQConfig (and vLLM's before 0.33) computes `Fraction(32, bits)` before it
  checks 2/3/4/8 bits (gptq.py:GPTQConfig.__init__), unless GPTQMarlinConfig takes the
  checkpoint (gptq.py:GPTQMarlinConfig.is_gptq_marlin_compatible); vLLM 0.33 builds
  AutoGPTQConfig (auto_gptq.py:AutoGPTQConfig.from_config, __init__): the keys it reads, no
  desc_act, `32 // bits`, then 4 or 8 symmetric bits only.
* AWQ: SGLang's AWQConfig takes 4 bits only (awq.py:AWQConfig.__init__; AWQMarlinConfig
  never takes 8 bits with zero points: marlin_utils.py:query_marlin_supported_quant_types
  lists uint4 alone), and its linear layers divide by group_size
  (awq/schemes/awq_linear.py:AWQLinearScheme.create_weights); vLLM 0.33's AutoAWQConfig
  likewise (auto_awq.py:AutoAWQConfig.__init__, AutoAWQLinearMethod.create_weights).
* ModelOpt: a `quant_algo` no release knows reaches SGLang's ModelOptFp8Config.from_config
  (modelopt_quant.py) and vLLM 0.33's ModelOptQuantConfigBase.from_config (modelopt.py).
* A block that is not a mapping, is empty, or only wraps another block: SGLang stops at it
  (configs/model_config.py:_quant_config_to_dict, ModelConfig._verify_quantization); vLLM
  0.33 stops at a non-mapping and loads the weights unquantized from the others
  (model_arch_config_convertor.py:_normalize_quantization_config reads quant_method '').

The keys GPTQConfig / AWQConfig.from_config require are checked for vLLM 0.33 only: the
classic classes' `Cannot find any of [...]` is not mirrored, so there a bad bit width is
refused for its bits whatever keys are present.
"""

from __future__ import annotations

from typing import Any

from servefit.model.fields import Fields
from servefit.model.readers import (
    GPTQ_AWQ_CLASSIC,
    SGLANG_MODELOPT_REGULAR_FP8,
    SGLANG_MODELOPT_STATIC_FP8,
    SGLANG_QUANT,
    VLLM_QUANT_0_33,
    ConfigIssue,
)

_MARLIN_GROUPS = (-1, 32, 64, 128)  # marlin_utils.py:MARLIN_SUPPORTED_GROUP_SIZES, both engines
# vllm 0.33 modelopt.py:QUANT_ALGOS
_VLLM_MODELOPT_ALGOS = [
    "FP8",
    "FP8_PER_CHANNEL_PER_TOKEN",
    "FP8_PB_WO",
    "NVFP4",
    "W4A16_NVFP4",
    "MXFP8",
    "MIXED_PRECISION",
]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def engine_block(top: Fields, text: Fields) -> tuple[str, str, Any] | None:
    """(field name, key, value) of the block the engines read, None when there is none."""
    for key in ("quantization_config", "compression_config"):
        for f in (top, text):
            if f.data.get(key) is not None:
                return f._name(key), key, f.data[key]
    return None


def wrapped_block(block: dict[str, Any]) -> str | None:
    """The key of a block nested in a block that has no quant_method of its own."""
    if "quant_method" in block:
        return None
    for key, value in block.items():
        if isinstance(value, dict) and (
            "quant_method" in value or key in ("quantization_config", "compression_config")
        ):
            return str(key)
    return None


def unreadable(block: Any) -> bool:
    """A block no engine quantizes from: not a mapping, empty, or wrapping another block."""
    return not isinstance(block, dict) or not block or wrapped_block(block) is not None


def quant_issues(top: Fields, text: Fields) -> tuple[ConfigIssue, ...]:
    """What the engines' quantization classes refuse in the config's quantization block."""
    found = engine_block(top, text)
    if found is None:
        return ()
    field, key, block = found
    if not isinstance(block, dict):
        return (_not_a_mapping(field, key, block),)
    method = block.get("quant_method", "")
    if not isinstance(method, str):
        return (_method_not_a_string(field, method),)
    if not method:
        inner = wrapped_block(block)
        return (_no_method(field, block, inner),) if not block or inner else ()
    checks = {"gptq": _gptq, "awq": _awq, "modelopt": _modelopt}.get(method.lower())
    return checks(field, block) if checks else ()


def _not_a_mapping(field: str, key: str, block: Any) -> ConfigIssue:
    kind = type(block).__name__
    why = f" (config field {field} must be an object, got {_show(block)})"
    # SGLang: _quant_config_to_dict calls .to_dict() on a quantization_config that is no dict;
    # a compression_config goes straight to _verify_quantization's .get("quant_method")
    attr = "to_dict" if key == "quantization_config" else "get"
    return ConfigIssue(
        field,
        (
            (SGLANG_QUANT, f"AttributeError: '{kind}' object has no attribute '{attr}'{why}"),
            (VLLM_QUANT_0_33, f"AttributeError: '{kind}' object has no attribute 'get'{why}"),
        ),
        f"config field {field} must be an object, got {_show(block)}: SGLang and vLLM 0.33 read "
        "it as a mapping and stop at it; servefit sizes the weights unquantized",
    )


def _method_not_a_string(field: str, method: Any) -> ConfigIssue:
    # both call .lower() on it: SGLang ModelConfig._verify_quantization, vLLM
    # model_arch_config_convertor.py:_normalize_quantization_config
    err = (
        f"AttributeError: '{type(method).__name__}' object has no attribute 'lower' "
        f"(config field {field}.quant_method must be a string, got {_show(method)})"
    )
    return ConfigIssue(
        f"{field}.quant_method",
        ((SGLANG_QUANT, err), (VLLM_QUANT_0_33, err)),
        f"config field {field}.quant_method must be a string, got {_show(method)}: SGLang and "
        "vLLM 0.33 stop at it",
    )


def _no_method(field: str, block: dict[str, Any], inner: str | None) -> ConfigIssue:
    what = f"only wraps another block, {field}.{inner}" if inner else "is empty"
    return ConfigIssue(
        field if inner is None else f"{field}.{inner}",
        # ModelConfig._verify_quantization: quant_method "" is no registered method; the
        # message ends with the release's list of methods, left out here
        (
            (
                SGLANG_QUANT,
                "ValueError: Unknown quantization method: . Must be one of [...] "
                f"({field} has no quant_method: it {what})",
            ),
        ),
        f"{field} has no quant_method (it {what}): vLLM 0.33 loads the weights unquantized, "
        "SGLang stops at it; servefit sizes them unquantized",
    )


def _floor_32(value: Any, what: str) -> str | None:
    """vLLM 0.33's `self.pack_factor = 32 // weight_bits` on a config value."""
    if isinstance(value, bool | int):
        return "ZeroDivisionError: integer division or modulo by zero" if value == 0 else None
    if isinstance(value, float):
        return "ZeroDivisionError: float floor division by zero" if value == 0 else None
    return (
        f"TypeError: unsupported operand type(s) for //: 'int' and '{type(value).__name__}' "
        f"({what} is {_show(value)})"
    )


def _missing(q: dict[str, Any], *groups: tuple[str, ...]) -> str | None:
    """base_config.py:QuantizationConfig.get_from_keys, for each key group in order."""
    for keys in groups:
        if not any(k in q for k in keys):
            return (
                f"ValueError: Cannot find any of {list(keys)} in the model's quantization config."
            )
    return None


def _gptq_classic(q: dict[str, Any]) -> str | None:
    if "bits" not in q:
        return None
    bits, sym = q["bits"], q.get("sym")
    try:
        marlin = (bits, sym) in {(4, True), (8, True)}  # GPTQMarlinConfig.TYPE_MAP
    except TypeError:
        marlin = False
    marlin = marlin and q.get("group_size") in _MARLIN_GROUPS and q.get("desc_act") is not None
    if marlin:
        return None
    if not isinstance(bits, bool | int):
        # Fraction(32, bits) in GPTQConfig.__init__, before the bit check
        return f"TypeError: both arguments should be Rational instances (bits is {_show(bits)})"
    if bits == 0:
        return "ZeroDivisionError: Fraction(32, 0)"
    if bits not in (2, 3, 4, 8):
        return (
            "ValueError: Currently, only 2/3/4/8-bit weight quantization is supported for "
            f"GPTQ, but got {bits} bits."
        )
    return None


def _gptq_vllm(q: dict[str, Any]) -> str | None:
    missing = _missing(q, ("bits",), ("group_size",), ("desc_act",), ("sym",))
    if missing:
        return missing
    bits, sym = q["bits"], q["sym"]
    # gptq_utils.py:normalize_and_validate_gptq_desc_act (its dynamic rules are not read)
    if q["desc_act"] and q["group_size"] != -1:
        return (
            "ValueError: GPTQ group activation ordering (desc_act=True) is no longer supported. "
            "Use a checkpoint with static activation ordering or desc_act=False."
        )
    floor = _floor_32(bits, "bits")
    if floor:
        return floor
    try:
        known = (bits, sym) in {(4, True), (8, True)}  # AutoGPTQConfig.TYPE_MAP
    except TypeError:
        return f"TypeError: unhashable type: '{type(sym).__name__}'"
    if not known:
        return f"ValueError: Unsupported quantization config: bits={bits}, sym={sym}"
    return None


def _gptq(field: str, q: dict[str, Any]) -> tuple[ConfigIssue, ...]:
    refusals = [
        (reader, err)
        for reader, err in ((GPTQ_AWQ_CLASSIC, _gptq_classic(q)), (VLLM_QUANT_0_33, _gptq_vllm(q)))
        if err
    ]
    return (ConfigIssue(field, tuple(refusals)),) if refusals else ()


def _group_division(group: Any) -> str | None:
    """`input_size_per_partition % group_size` in the AWQ linear layers' create_weights."""
    if isinstance(group, bool | int):
        return "ZeroDivisionError: integer modulo by zero" if group == 0 else None
    if isinstance(group, float):
        return "ZeroDivisionError: float modulo" if group == 0 else None
    return (
        f"TypeError: unsupported operand type(s) for %: 'int' and '{type(group).__name__}' "
        f"(group_size is {_show(group)})"
    )


def _first(q: dict[str, Any], *keys: str) -> Any:
    return next((q[k] for k in keys if k in q), None)


def _awq_classic(q: dict[str, Any]) -> str | None:
    if "w_bit" not in q and "bits" not in q:
        return None
    bits = _first(q, "w_bit", "bits")
    if bits != 4:
        return (
            "ValueError: Currently, only 4-bit weight quantization is supported for AWQ, "
            f"but got {bits} bits."
        )
    group = _first(q, "q_group_size", "group_size")
    if group is None or group in _MARLIN_GROUPS:
        return None
    return _group_division(group)


def _awq_vllm(q: dict[str, Any]) -> str | None:
    missing = _missing(q, ("w_bit", "bits"), ("q_group_size", "group_size"), ("zero_point",))
    if missing:
        return missing
    bits = _first(q, "w_bit", "bits")
    floor = _floor_32(bits, "bits")
    if floor:
        return floor
    if bits != 4:
        return (
            f"ValueError: Unsupported num_bits = {bits}. Supported: 4. For 8-bit AWQ, use Marlin "
            "backend by setting backend='awq:marlin' or backend='marlin'."
        )
    group = _first(q, "q_group_size", "group_size")
    return None if group in _MARLIN_GROUPS else _group_division(group)


def _awq(field: str, q: dict[str, Any]) -> tuple[ConfigIssue, ...]:
    refusals = [
        (reader, err)
        for reader, err in ((GPTQ_AWQ_CLASSIC, _awq_classic(q)), (VLLM_QUANT_0_33, _awq_vllm(q)))
        if err
    ]
    return (ConfigIssue(field, tuple(refusals)),) if refusals else ()


def _modelopt(field: str, q: dict[str, Any]) -> tuple[ConfigIssue, ...]:
    algo = q.get("quant_algo")
    if algo is None and isinstance(q.get("quantization"), dict):
        return ()  # the nested hf_quant_config.json form, read by another path
    if algo is None:
        sglang = (
            "ValueError: Cannot find 'quant_algo' in the model's quantization config. Expected "
            "either flat format (config.json) or nested format (hf_quant_config.json)."
        )
        vllm = "ValueError: Missing 'quant_algo' in quantization config"
        return (
            ConfigIssue(
                f"{field}.quant_algo",
                (
                    (SGLANG_MODELOPT_STATIC_FP8, sglang),
                    (SGLANG_MODELOPT_REGULAR_FP8, sglang),
                    (VLLM_QUANT_0_33, vllm),
                ),
                f"{field} is a ModelOpt block without quant_algo: SGLang and vLLM 0.33 stop at it",
            ),
        )
    name = str(algo)
    refusals: list[tuple[str, str]] = []
    unknown = not any(s in name.upper() for s in ("FP8", "FP4")) and name != "MIXED_PRECISION"
    if unknown:
        refusals += [
            (
                SGLANG_MODELOPT_STATIC_FP8,
                "ValueError: ModelOptFp8Config only supports static FP8 quantization in SGLang. "
                "For FP4 quantization, use ModelOptFp4Config. Check the quantization config for "
                "your model's configuration.",
            ),
            (
                SGLANG_MODELOPT_REGULAR_FP8,
                "ValueError: ModelOptFp8Config only supports regular FP8 quantization, but found "
                f"{algo!r}. Use the native 'mxfp8' quantization method for MXFP8 or "
                "ModelOptFp4Config for FP4.",
            ),
        ]
    if name.upper() not in _VLLM_MODELOPT_ALGOS:
        refusals.append(
            (
                VLLM_QUANT_0_33,
                f"ValueError: ModelOpt currently only supports: {_VLLM_MODELOPT_ALGOS} "
                "quantizations in vLLM. Please check the `hf_quant_config.json` file for your "
                "model's quant configuration.",
            )
        )
    if not refusals:
        return ()
    note = (
        f"{field}.quant_algo {_show(algo)} is no ModelOpt algorithm SGLang or vLLM 0.33 loads: "
        "both stop at it"
        if unknown
        else None
    )
    return (ConfigIssue(f"{field}.quant_algo", tuple(refusals), note),)
