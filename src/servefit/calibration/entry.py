"""One calibration entry: a real engine start's measured memory terms, with what they depend on.

Stored as JSON (docs/calibration.md). Parsed by hand, not with pydantic: plan reads the store on
every start, and pydantic's import alone costs a plan's whole budget (issue 23).
"""

from __future__ import annotations

import json
import math
from dataclasses import field
from typing import Any

from servefit.errors import ServefitError
from servefit.frozen import frozen
from servefit.model.spec import ModelSpec
from servefit.records import Record

SCHEMA_VERSION = 1


class UnreadableEntry(ServefitError, ValueError):
    """A calibration file that is not an entry of this schema."""


@frozen(slots=True, kw_only=True)
class Measurements(Record):
    """What the engine printed, per rank, GiB (min over ranks where the engine min-reduces)."""

    free_before_weights_gib: float | None = None  # SGLang "Load weight begin. avail mem"
    weights_gib: float | None = (
        None  # SGLang "Load weight end ... mem usage" / vLLM "Model loading took"
    )
    kv_available_gib: float | None = None  # vLLM "Available KV cache memory"
    kv_tokens: int | None = None  # the KV pool the engine then allocated, to check a replay
    cudagraph_estimate_gib: float | None = None  # vLLM "Estimated CUDA graph memory"

    @property
    def terms(self) -> list[str]:
        return [k for k in _MEASURED if getattr(self, k) is not None]


_MEASURED = (
    "free_before_weights_gib",
    "weights_gib",
    "kv_available_gib",
    "kv_tokens",
    "cudagraph_estimate_gib",
)


@frozen(slots=True, kw_only=True)
class Entry(Record):
    """A recorded start. `args` are the engine's own dest names, secrets left out."""

    id: str
    recorded: str  # ISO 8601 UTC
    source: str  # absolute path of the log, or the run directory
    source_kind: str  # "doctor" | "launch"
    launch_index: int = 1  # the launch within the log
    engine: str  # "sglang" | "vllm"
    profile: str  # the mirrored release servefit replayed it with
    engine_version: str | None = None  # as printed, when printed
    gpu: str  # servefit's GPU name
    gpu_memory_mib: int
    num_gpus: int
    model: str
    model_fingerprint: str
    tp: int
    pp: int
    dp: int
    ep: int
    args: dict[str, Any] = field(default_factory=dict)
    # where `args` came from: "server_args dump" (SGLang prints every resolved value), "non-default
    # args" (vLLM prints the ones the user set), "launch command in log", "--command"
    args_source: str = "non-default args"
    measured: Measurements
    outcome: str = "ready"  # the start's outcome: "ready" | "failed" | ...

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **self.model_dump(mode="json")}


def fingerprint(model: ModelSpec) -> str:
    """What makes two configs the same model to the engines' memory: the architecture, the
    shapes, the dtype, the quantization and the parameter count (not the path or the name)."""
    import hashlib  # here: plan imports this module on every start, and rarely fingerprints

    key = [
        model.architecture,
        model.model_type,
        model.dtype,
        model.hidden_size,
        model.vocab_size,
        model.num_layers,
        [sorted(m.kind for m in layer.mixers) for layer in model.layers],
        model.quant.method,
        model.quant.weight_bits,
        model.params.total,
        model.mtp_layers,
    ]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


def entry_id(fields: dict[str, Any]) -> str:
    """The measurement's id: what was measured, on what, with which flags. The same start
    recorded twice (the log read again, a copy of it, its rotated .gz) gives the same id, so
    it is stored once; where it was read from is not part of it."""
    import hashlib

    keyed = {k: fields[k] for k in sorted(fields) if k not in _NOT_IN_ID}
    blob = json.dumps(keyed, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


_NOT_IN_ID = ("id", "recorded", "source", "source_kind", "launch_index")

_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "recorded": (str,),
    "source": (str,),
    "source_kind": (str,),
    "launch_index": (int,),
    "engine": (str,),
    "profile": (str,),
    "gpu": (str,),
    "gpu_memory_mib": (int,),
    "num_gpus": (int,),
    "model": (str,),
    "model_fingerprint": (str,),
    "tp": (int,),
    "pp": (int,),
    "dp": (int,),
    "ep": (int,),
    "args": (dict,),
    "args_source": (str,),
    "outcome": (str,),
}
_OPTIONAL = {"engine_version", "launch_index", "outcome", "args", "args_source"}


def from_dict(data: Any, where: str) -> Entry:
    """The entry of a parsed JSON file; UnreadableEntry naming the field that is wrong."""
    if not isinstance(data, dict):
        raise UnreadableEntry(f"{where}: not a calibration entry (a JSON object is expected)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UnreadableEntry(
            f"{where}: calibration schema {version!r}, this servefit reads {SCHEMA_VERSION}"
        )
    kw: dict[str, Any] = {}
    for name, types in _TYPES.items():
        if name not in data:
            if name in _OPTIONAL:
                continue
            raise UnreadableEntry(f"{where}: missing {name!r}")
        kw[name] = _typed(data[name], types, f"{where}: {name}")
    if data.get("engine_version") is not None:
        kw["engine_version"] = _typed(data["engine_version"], (str,), f"{where}: engine_version")
    m = data.get("measured")
    if not isinstance(m, dict):
        raise UnreadableEntry(f"{where}: 'measured' must be an object")
    unknown = set(m) - set(_MEASURED)
    if unknown:
        raise UnreadableEntry(f"{where}: unknown measured term(s) {sorted(unknown)}")
    values: dict[str, Any] = {}
    for k, v in m.items():
        if v is None:
            continue
        if k == "kv_tokens":
            values[k] = _typed(v, (int,), f"{where}: measured.{k}")
        else:
            values[k] = _gib(v, f"{where}: measured.{k}")
    kw["measured"] = Measurements(**values)
    return Entry(**kw)


def _typed(v: Any, types: tuple[type, ...], what: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, types):
        raise UnreadableEntry(f"{what}: expected {types[0].__name__}, got {v!r}")
    return v


def _gib(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise UnreadableEntry(f"{what}: expected a non-negative number of GiB, got {v!r}")
    return float(v)
