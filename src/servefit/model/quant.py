"""Quantization: parse `quantization_config` into a QuantSpec, decide each weight's storage
format, and count its bytes (weights + scales + zeros).

Which modules a scheme quantizes mirrors the engines' `get_quant_method` rules:
* linear layers and routed experts are quantized unless a skip list names them
  (`modules_to_not_convert`, `ignored_layers`, `ignore`, `exclude_modules`);
* embeddings, norms, routers, convolutions and the LM head stay in the model dtype unless the
  config names them explicitly (SGLang's Fp8Config only quantizes `LinearBase`/`FusedMoE`:
  sglang/srt/layers/quantization/fp8.py:Fp8Config.get_quant_method; ParallelLMHead is an
  embedding, not a LinearBase);
* vision towers stay unquantized unless a layer is named explicitly (a generic "Linear"
  compressed-tensors target is taken to mean the language model, as the released checkpoints
  all ignore their vision towers);
* mxfp4 (gpt-oss) quantizes only the MoE experts (sglang/srt/layers/quantization/mxfp4.py:
  Mxfp4Config.get_quant_method returns UnquantizedLinearMethod for linear layers).
"""

from __future__ import annotations

import fnmatch
import re
from math import ceil
from typing import Any

from servefit.frozen import frozen
from servefit.model.fields import Fields
from servefit.model.quant_checks import engine_block, unreadable
from servefit.model.spec import QuantSpec

QUANTIZABLE_ROLES = ("linear", "expert")


@frozen
class WeightFormat:
    """Storage of one quantized matrix.

    kind: "fp8" | "nvfp4" | "mxfp4" | "int" ; bits: bits per weight element;
    block: fp8 (block_n, block_k) scale blocks; group: elements per scale along the input dim
    (0 = one scale per output channel for "int", per-tensor for "fp8");
    zeros: packed zero points stored (AWQ / GPTQ qzeros); g_idx: GPTQ act-order index.
    """

    kind: str
    bits: int
    block: tuple[int, int] | None = None
    group: int = 0
    per_channel: bool = False
    zeros: bool = False
    g_idx: bool = False

    def matrix_bytes(self, out: int, inp: int) -> int:
        n = out * inp
        if self.kind == "fp8":
            if self.block:
                bn, bk = self.block
                # weight_scale_inv: fp32 [ceil(out/bn), ceil(in/bk)] (fp8.py:create_fp8_weight_)
                return n + ceil(out / bn) * ceil(inp / bk) * 4
            if self.per_channel:
                return n + out * 4
            return n + 8  # per-tensor weight_scale + input_scale
        if self.kind == "nvfp4":
            # packed e2m1 + fp8 scale per 16 + fp32 weight_scale_2 and input_scale
            return ceil(n / 2) + out * ceil(inp / 16) + 8
        if self.kind == "mxfp4":
            # packed e2m1 + uint8 e8m0 scale per 32
            return ceil(n / 2) + out * ceil(inp / 32)
        # integer (AWQ / GPTQ / auto-round / w8a8 / bitsandbytes)
        groups = ceil(inp / self.group) if self.group > 0 else 1
        total = ceil(n * self.bits / 8) + out * groups * 2  # fp16 scales
        if self.zeros:
            total += ceil(out * groups * self.bits / 8)
        if self.g_idx:
            total += inp * 4
        return total


# --------------------------------------------------------------------------------------------
# Parsing


def _qcfg(config: dict[str, Any], text: dict[str, Any]) -> dict[str, Any]:
    for src in (text, config):
        for key in ("quantization_config", "compression_config"):
            value = src.get(key)
            if isinstance(value, dict) and value:
                return value
    return {}


def _as_pos_int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    return default


def _modelopt_fields(q: dict[str, Any]) -> dict[str, Any]:
    # hf_quant_config.json nests everything under "quantization".
    inner = q.get("quantization")
    return inner if isinstance(inner, dict) else q


def _kv_fp8(q: dict[str, Any]) -> bool:
    mo = _modelopt_fields(q)
    algo = mo.get("kv_cache_quant_algo")
    if isinstance(algo, str) and algo.upper().startswith("FP8"):
        return True
    scheme = q.get("kv_cache_scheme") or mo.get("kv_cache_scheme")
    if isinstance(scheme, dict):
        return scheme.get("type") == "float" and scheme.get("num_bits") == 8
    return False


def _ct_main_weights(q: dict[str, Any]) -> dict[str, Any]:
    """compressed-tensors: the weights scheme of the group with the most targets."""
    groups = q.get("config_groups")
    best: dict[str, Any] = {}
    best_n = -1
    if isinstance(groups, dict):
        for group in groups.values():
            if not isinstance(group, dict) or not isinstance(group.get("weights"), dict):
                continue
            targets = group.get("targets")
            n = len(targets) if isinstance(targets, list) else 0
            if "Linear" in (targets or []):
                n += 1_000_000
            if n > best_n:
                best, best_n = group["weights"], n
    return best


def _engines_read_nothing(config: dict[str, Any], text: dict[str, Any]) -> bool:
    """The block the engines read is one no engine quantizes from: vLLM loads such a
    checkpoint unquantized, SGLang refuses it (quant_checks.py)."""
    found = engine_block(Fields(config), Fields(text, "text_config"))
    return found is not None and unreadable(found[2])


def parse_quant(config: dict[str, Any], text: dict[str, Any]) -> QuantSpec:
    """Normalize the checkpoint's quantization_config (top level or text_config)."""
    if _engines_read_nothing(config, text):
        return QuantSpec()
    q = _qcfg(config, text)
    if not q:
        return QuantSpec()
    method = q.get("quant_method")
    method = method.lower().replace("_", "-") if isinstance(method, str) else ""
    kv = _kv_fp8(q)
    if method == "fp8" or method == "fbgemm-fp8":
        block = q.get("weight_block_size")
        group = _as_pos_int(block[1], 0) if isinstance(block, list) and len(block) == 2 else 0
        return QuantSpec("fp8", 8, group, kv, q)
    if method == "modelopt" or (not method and "quantization" in q):
        algo = str(_modelopt_fields(q).get("quant_algo") or "").upper()
        if "FP4" in algo or (algo == "MIXED-PRECISION" or algo == "MIXED_PRECISION"):
            layers = _modelopt_fields(q).get("quantized_layers")
            if algo.startswith("MIXED") and isinstance(layers, dict):
                algos = {
                    str(v.get("quant_algo", "")).upper()
                    for v in layers.values()
                    if isinstance(v, dict)
                }
                if not any("FP4" in a for a in algos):
                    return QuantSpec("fp8", 8, 0, kv, q)
            return QuantSpec("nvfp4", 4, 16, kv, q)
        if "FP8" in algo:
            return QuantSpec("fp8", 8, 0, kv, q)
        if "INT4" in algo or "W4A8" in algo:
            return QuantSpec(
                "awq", 4, _as_pos_int(_modelopt_fields(q).get("group_size"), 128), kv, q
            )
        return QuantSpec("modelopt", 16, 0, kv, q)
    if method == "mxfp4":
        return QuantSpec("mxfp4", 4, 32, kv, q)
    if method in (
        "awq",
        "gptq",
        "auto-round",
        "autoround",
        "intel/auto-round",
        "awq-marlin",
        "gptq-marlin",
    ):
        norm = {"autoround": "auto-round", "intel/auto-round": "auto-round"}.get(method, method)
        norm = norm.replace("-marlin", "")
        raw_bits = q.get("bits", q.get("w_bit"))
        # AWQ / GPTQ bit widths are kept as written: the engines refuse the ones they cannot
        # load (check_quantization), and sizing them as 4-bit would be a wrong answer.
        exact = norm in ("awq", "gptq") and not isinstance(raw_bits, bool)
        bits = raw_bits if exact and isinstance(raw_bits, int) else _as_pos_int(raw_bits, 4)
        raw_group = q.get("group_size", q.get("q_group_size"))
        group = -1 if raw_group == -1 else _as_pos_int(raw_group, 128)
        return QuantSpec(norm, bits, max(group, 0), kv, q)
    if method == "compressed-tensors":
        w = _ct_main_weights(q)
        bits = _as_pos_int(w.get("num_bits"), 16)
        group = _as_pos_int(w.get("group_size"), 0)
        return QuantSpec("compressed-tensors", bits, group, kv, q)
    if method == "bitsandbytes":
        bits = 4 if q.get("load_in_4bit") else 8
        return QuantSpec("bitsandbytes", bits, 64 if bits == 4 else 0, kv, q)
    bits = _as_pos_int(q.get("bits"), 16)
    return QuantSpec(method or "unknown", bits, _as_pos_int(q.get("group_size"), 0), kv, q)


# --------------------------------------------------------------------------------------------
# Per-module decisions


def module_path_match(pattern: str, name: str) -> bool:
    """Skip-list matching on dotted boundaries, so `mlp.gate` does not hit `mlp.gate_up_proj`
    (sglang/srt/layers/quantization/utils.py:_module_path_match); `re:` patterns are regexes
    (compressed-tensors), `*`/`?` patterns are globs (modelopt exclude_modules)."""
    if pattern.startswith("re:"):
        try:
            return re.match(pattern[3:], name) is not None
        except re.error:
            return False
    if any(c in pattern for c in "*?["):
        # a glob names a module: it also covers everything below it
        parts = name.split(".")
        return any(
            fnmatch.fnmatchcase(".".join(parts[:k]), pattern) for k in range(len(parts), 0, -1)
        )
    pattern = pattern.rstrip(".")
    return pattern == name or name.startswith(pattern + ".") or f".{pattern}." in f".{name}."


def _aliases(names: tuple[str, ...]) -> tuple[str, ...]:
    # Checkpoints of VLMs prefix the text model with "model.language_model."; some configs
    # name modules without it. Try both spellings.
    out: list[str] = []
    for n in names:
        out.append(n)
        if ".language_model." in n:
            out.append(n.replace("model.language_model.", "model.").replace("language_model.", ""))
    return tuple(out)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


class QuantPolicy:
    """Decides the storage of each weight of one model under its QuantSpec."""

    def __init__(self, quant: QuantSpec) -> None:
        self.quant = quant
        q = quant.raw if isinstance(quant.raw, dict) else {}
        self.q = q
        mo = _modelopt_fields(q)
        self.skip: list[str] = []
        for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules"):
            self.skip += _strings(q.get(key)) + (_strings(mo.get(key)) if mo is not q else [])
        layers = mo.get("quantized_layers")
        self.per_layer: dict[str, Any] = layers if isinstance(layers, dict) else {}
        extra = q.get("extra_config")
        self.extra: dict[str, Any] = extra if isinstance(extra, dict) else {}

    def _skipped(self, names: tuple[str, ...]) -> bool:
        return any(module_path_match(p, n) for p in self.skip for n in names)

    def fmt(self, names: tuple[str, ...], role: str) -> WeightFormat | None:
        """Storage of a matrix with these checkpoint names and role, None = model dtype.

        role: "linear" | "expert" | "lm_head" | "embedding" | "vision" | "none"."""
        m = self.quant.method
        if m == "none" or role in ("none", "embedding"):
            return None
        names = _aliases(names)
        if self.per_layer:
            return self._modelopt_layer(names)
        if m == "compressed-tensors":
            return self._compressed_tensors(names, role)
        explicit = role in ("lm_head", "vision")
        if explicit and not self._explicitly_quantized(names):
            return None
        if role == "linear" and m == "mxfp4":
            return None
        if self._skipped(names):
            return None
        return self._scheme_format(names)

    def _explicitly_quantized(self, names: tuple[str, ...]) -> bool:
        # GPTQ/auto-round "lm_head": true quantizes the head too.
        return bool(self.q.get("lm_head") is True and any(n.endswith("lm_head") for n in names))

    def _scheme_format(self, names: tuple[str, ...]) -> WeightFormat | None:
        m, q = self.quant.method, self.q
        if m == "fp8":
            block = q.get("weight_block_size")
            if isinstance(block, list) and len(block) == 2:
                bn, bk = (_as_pos_int(b, 128) for b in block)
                return WeightFormat("fp8", 8, block=(bn, bk))
            return WeightFormat("fp8", 8)
        if m == "nvfp4":
            return WeightFormat("nvfp4", 4, group=16)
        if m == "mxfp4":
            return WeightFormat("mxfp4", 4, group=32)
        if m in ("awq", "gptq", "auto-round"):
            bits, group = self.quant.weight_bits, self.quant.group_size
            for n in names:  # auto-round per-layer overrides: {"name": {"bits": 16}}
                override = self.extra.get(n)
                if isinstance(override, dict) and _as_pos_int(override.get("bits"), bits) >= 16:
                    return None
            if bits >= 16:
                return None
            zeros = m != "auto-round" or not q.get("sym", True)
            g_idx = m == "gptq" and bool(q.get("desc_act"))
            return WeightFormat("int", bits, group=group, zeros=zeros or m == "gptq", g_idx=g_idx)
        if m == "bitsandbytes":
            if self.quant.weight_bits == 4:
                return WeightFormat("int", 4, group=64)  # nf4 + absmax per 64 (counted as fp16)
            return WeightFormat("int", 8, per_channel=True)
        if self.quant.weight_bits < 16:
            return WeightFormat("int", self.quant.weight_bits, group=self.quant.group_size)
        return None

    def _modelopt_layer(self, names: tuple[str, ...]) -> WeightFormat | None:
        # MIXED_PRECISION: only the layers listed in quantized_layers are quantized
        # (modelopt_quant.py:ModelOptMixedPrecisionConfig); everything else keeps the dtype.
        if self._skipped(names):
            return None
        for n in names:
            entry = self.per_layer.get(n)
            if isinstance(entry, dict):
                algo = str(entry.get("quant_algo", "")).upper()
                if "FP4" in algo:
                    return WeightFormat("nvfp4", 4, group=16)
                if "FP8" in algo:
                    return WeightFormat("fp8", 8)
                if "INT4" in algo or "W4A8" in algo:
                    group = _as_pos_int(entry.get("group_size"), 128)
                    return WeightFormat("int", 4, group=group, zeros=False)
        return None

    def _compressed_tensors(self, names: tuple[str, ...], role: str) -> WeightFormat | None:
        if self._skipped(names):
            return None
        groups = self.q.get("config_groups")
        if not isinstance(groups, dict):
            return None
        for group in groups.values():
            if not isinstance(group, dict):
                continue
            weights = group.get("weights")
            if not isinstance(weights, dict):
                continue
            for target in _strings(group.get("targets")):
                generic = target == "Linear" and role in QUANTIZABLE_ROLES
                if generic or any(module_path_match(target, n) for n in names):
                    return _ct_format(weights, group.get("format") or self.q.get("format"))
        return None


def _ct_format(weights: dict[str, Any], fmt: Any) -> WeightFormat | None:
    bits = _as_pos_int(weights.get("num_bits"), 16)
    if bits >= 16:
        return None
    group = _as_pos_int(weights.get("group_size"), 0)
    kind = weights.get("type")
    fmt = fmt if isinstance(fmt, str) else ""
    if kind == "float" and bits == 4:
        if "mxfp4" in fmt or group == 32:
            return WeightFormat("mxfp4", 4, group=32)
        return WeightFormat("nvfp4", 4, group=16)
    if kind == "float" and bits == 8:
        strategy = weights.get("strategy")
        block = weights.get("block_structure")
        if strategy == "block" and isinstance(block, list) and len(block) == 2:
            return WeightFormat(
                "fp8", 8, block=(_as_pos_int(block[0], 128), _as_pos_int(block[1], 128))
            )
        return WeightFormat("fp8", 8, per_channel=strategy == "channel")
    symmetric = weights.get("symmetric", True) is not False
    if weights.get("strategy") == "channel" or group == 0:
        return WeightFormat("int", bits, per_channel=True, zeros=not symmetric)
    return WeightFormat("int", bits, group=group, zeros=not symmetric)


# The methods parse_quant understands; anything else is sized in the model dtype.
KNOWN_METHODS = frozenset(
    {
        "none",
        "fp8",
        "nvfp4",
        "mxfp4",
        "awq",
        "gptq",
        "auto-round",
        "compressed-tensors",
        "bitsandbytes",
        "modelopt",
    }
)


def unknown_method_warning(quant: QuantSpec, dtype: str) -> str | None:
    """A quant_method servefit does not know is sized as plain weights: say so, and how."""
    if quant.method in KNOWN_METHODS:
        return None
    bits = f"{quant.weight_bits}-bit (its `bits`)" if quant.weight_bits < 16 else dtype
    return (
        f"quantization method {quant.method!r:.40} is not one servefit knows: its weights are "
        f"sized as {bits} with no scales, which may be off; the engine may also refuse it"
    )
