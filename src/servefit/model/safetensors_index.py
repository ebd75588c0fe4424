"""Read tensor names, dtypes and shapes from safetensors headers (no torch, no data read).

A .safetensors file starts with an 8-byte little-endian header length N, then N bytes of JSON:
{"name": {"dtype": "BF16", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}},
then the data buffer. A header is checked the way the safetensors library checks it before any
size is taken from it (safetensors/src/tensor.rs:Metadata::validate): a known dtype,
non-negative integer dims, offsets with begin <= end whose span is exactly the tensor's size,
tensors that tile the data buffer without gaps or overlaps, and a buffer as long as the file.
A checkpoint is complete before it is sized: every shard its index names, or every
"-of-NNNNN" sibling of a numbered shard, is there.
"""

from __future__ import annotations

import re
import struct
from math import prod
from pathlib import Path
from typing import Any

from servefit.errors import ConfigError
from servefit.frozen import frozen
from servefit.validate import load_json, os_error, read_json_file, readable_file

_MAX_HEADER = 256 << 20  # real headers are a few MB at most
_MAX_INDEX = 64 << 20
# Bits per element of every dtype the safetensors format defines (safetensors/src/tensor.rs:Dtype).
DTYPE_BITS = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}
_NUMBERED = re.compile(r"^(?P<stem>.*)-(?P<i>\d+)-of-(?P<n>\d+)\.safetensors$")


@frozen
class StoredTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


def _bad(path: Path, why: str) -> ConfigError:
    return ConfigError(f"{path}: bad safetensors header ({why})")


def read_header(path: Path) -> list[StoredTensor]:
    """The tensors of one .safetensors file, after validating its header against the file."""
    path = readable_file(path, "safetensors", error=ConfigError)
    try:
        with path.open("rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise ConfigError(f"{path}: not a safetensors file (too short)")
            (size,) = struct.unpack("<Q", raw)
            if size > _MAX_HEADER:
                raise ConfigError(f"{path}: safetensors header length {size} is implausible")
            body = fh.read(size)
            file_size = fh.seek(0, 2)
    except OSError as exc:
        raise os_error(exc, path, "safetensors file", ConfigError) from None
    if len(body) != size:
        raise _bad(path, f"the file ends inside its {size:,}-byte header")
    try:
        header = load_json(body, "header", max_bytes=_MAX_HEADER, error=ConfigError)
    except ConfigError as exc:
        raise _bad(path, str(exc).removeprefix("header: ")) from None
    if not isinstance(header, dict):
        raise _bad(path, "not a JSON object")
    tensors = [_entry(path, name, info) for name, info in header.items() if name != "__metadata__"]
    _check_tiling(path, tensors, file_size - 8 - size)
    return [t for t, _ in tensors]


def _entry(path: Path, name: str, info: Any) -> tuple[StoredTensor, tuple[int, int]]:
    what = f"tensor {name!r:.80}"
    if not isinstance(info, dict):
        raise _bad(path, f"{what} is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise _bad(path, f"{what} has unknown dtype {dtype!r:.40}")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise _bad(path, f"{what} has shape {shape!r:.60}: dims must be non-negative integers")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_count(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise _bad(
            path, f"{what} has data_offsets {offsets!r:.60}: need [begin, end], 0 <= begin <= end"
        )
    bits = prod(shape) * DTYPE_BITS[dtype]
    span = offsets[1] - offsets[0]
    if bits % 8 or bits // 8 != span:
        raise _bad(
            path,
            f"{what}: {dtype} {shape} is {bits / 8:,.0f} bytes but its offsets span {span:,}",
        )
    return StoredTensor(name, dtype, tuple(shape), span), (offsets[0], offsets[1])


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_tiling(
    path: Path, tensors: list[tuple[StoredTensor, tuple[int, int]]], buffer: int
) -> None:
    """The tensors cover the data buffer end to end, with no gap or overlap (Metadata::validate)."""
    end = 0
    for t, (begin, stop) in sorted(tensors, key=lambda e: e[1]):
        if begin != end:
            how = "overlaps the previous one" if begin < end else f"leaves a gap at byte {end:,}"
            raise _bad(path, f"tensor {t.name!r:.80} {how}")
        end = stop
    if end != buffer:
        raise _bad(
            path,
            f"the tensors span {end:,} bytes but the file holds {max(buffer, 0):,} after the header",
        )


def checkpoint_files(directory: Path) -> list[Path]:
    """The checkpoint's safetensors shards (per model.safetensors.index.json if present); every
    shard must be there: a partial download sized as a complete model is a wrong answer."""
    index = directory / "model.safetensors.index.json"
    if index.exists():
        data = read_json_file(index, "checkpoint index", max_bytes=_MAX_INDEX, error=ConfigError)
        weight_map = data.get("weight_map", {}) if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()
        ):
            raise ConfigError(f"{index}: weight_map must be an object of tensor name -> file name")
        files = sorted(set(weight_map.values()))
        if any("/" in f or f in ("", ".", "..") for f in files):
            raise ConfigError(f"{index}: weight_map names a file outside the checkpoint directory")
        paths = [directory / f for f in files]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise ConfigError(f"{index} names missing shard(s): {', '.join(missing[:3])}")
        return paths
    paths = sorted(directory.glob("*.safetensors"))
    _check_numbered(directory, paths)
    return paths


def _check_numbered(directory: Path, paths: list[Path]) -> None:
    """Shards named model-0000i-of-0000N.safetensors: all N must be present."""
    groups: dict[tuple[str, int, int], set[int]] = {}
    for p in paths:
        m = _NUMBERED.match(p.name)
        if m:
            n = int(m["n"])
            groups.setdefault((m["stem"], n, len(m["i"])), set()).add(int(m["i"]))
    for (stem, n, width), have in groups.items():
        absent = [i for i in range(1, n + 1) if i not in have][:3] if n <= 100_000 else [n]
        if absent:
            names = ", ".join(f"{stem}-{i:0{width}d}-of-{n:0{width}d}.safetensors" for i in absent)
            raise ConfigError(
                f"{directory}: checkpoint incomplete: {len(have)} of {n} shards, missing {names}"
            )


def read_checkpoint(directory: Path) -> list[StoredTensor]:
    """All tensors of a checkpoint directory; [] if it has no safetensors files."""
    out: list[StoredTensor] = []
    for path in checkpoint_files(directory):
        out += read_header(path)
    return out
