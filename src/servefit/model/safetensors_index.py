"""Read tensor names, dtypes and shapes from safetensors headers (no torch, no data read).

A .safetensors file starts with an 8-byte little-endian header length N, then N bytes of JSON:
{"name": {"dtype": "BF16", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from servefit.errors import ConfigError

_MAX_HEADER = 256 << 20  # real headers are a few MB at most


@dataclass(frozen=True)
class StoredTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


def read_header(path: Path) -> list[StoredTensor]:
    try:
        with path.open("rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise ConfigError(f"{path}: not a safetensors file (too short)")
            (size,) = struct.unpack("<Q", raw)
            if size > _MAX_HEADER:
                raise ConfigError(f"{path}: safetensors header length {size} is implausible")
            body = fh.read(size)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        header = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: bad safetensors header ({exc})") from None
    if not isinstance(header, dict):
        raise ConfigError(f"{path}: bad safetensors header")
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = info["data_offsets"]
            shape = tuple(int(d) for d in info["shape"])
            out.append(StoredTensor(name, str(info["dtype"]), shape, int(end) - int(begin)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: bad safetensors entry {name!r:.80}") from exc
    return out


def checkpoint_files(directory: Path) -> list[Path]:
    """The checkpoint's safetensors shards (per model.safetensors.index.json if present)."""
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        except (OSError, json.JSONDecodeError, AttributeError) as exc:
            raise ConfigError(f"{index}: cannot read ({exc})") from None
        if not isinstance(weight_map, dict):
            raise ConfigError(f"{index}: weight_map must be an object")
        files = sorted({str(v) for v in weight_map.values()})
        paths = [directory / f for f in files]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise ConfigError(f"{index} names missing shard(s): {', '.join(missing[:3])}")
        return paths
    return sorted(directory.glob("*.safetensors"))


def read_checkpoint(directory: Path) -> list[StoredTensor]:
    """All tensors of a checkpoint directory; [] if it has no safetensors files."""
    out: list[StoredTensor] = []
    for path in checkpoint_files(directory):
        out += read_header(path)
    return out
