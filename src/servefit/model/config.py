"""Find and read a model's config.json: local file, checkpoint dir, bundled catalog, or the Hub."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from servefit.didyoumean import hint
from servefit.errors import ConfigError
from servefit.validate import (
    MAX_JSON_BYTES,
    expand_path,
    load_json,
    os_error,
    readable_dir,
    readable_file,
)

# A Hub repo id: "org/name" (or a bare "name"), letters, digits, '-', '_', '.'.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def read_json(path: Path) -> dict[str, Any]:
    """Parse a config file within servefit's limits (size, UTF-8; a FIFO or a directory is
    refused before it is opened), once, in one pass of the C parser (validate.load_json)."""
    path = readable_file(path, "config", error=ConfigError)
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise os_error(exc, path, "config", ConfigError) from None
    data = load_json(raw, f"config {_short(path)}", error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 160 else text[:80] + "..." + text[-60:]


def load_config(ref: str) -> tuple[dict[str, Any], str]:
    """Return (config dict, source) for a path, checkpoint dir, catalog id or Hub id.

    The source is the absolute path for local files and directories, "catalog:<id>" for a
    bundled config and "hub:<id>" for a download.
    """
    path, source = find_config(ref)
    return read_json(path), source


def find_config(ref: str) -> tuple[Path, str]:
    """(the config.json file, source) for a path, checkpoint dir, catalog id or Hub id, found
    without reading it; the file may still be one read_json refuses (a FIFO, a directory)."""
    from servefit import catalog

    if not isinstance(ref, str) or not ref.strip():
        raise ConfigError("no model given: pass a config.json path, a checkpoint dir or a model id")
    ref = ref.strip()
    path = expand_path(ref, "model", error=ConfigError)
    kind = _kind(path)
    if kind == "dir":
        readable_dir(path, "model", error=ConfigError)
        cfg = path / "config.json"
        if _kind(cfg) is None:
            raise ConfigError(f"{path} has no config.json")
        return cfg, str(path.resolve())
    if kind is not None:
        return path, str(path.resolve())

    entry = catalog.find_entry(ref)
    if entry is not None:
        return entry.path, f"catalog:{entry.id}"

    looks_local = ref.endswith(".json") or ref.startswith((".", "/", "~")) or "\\" in ref
    near = _near_bundled(ref, [e.id for e in catalog.entries()])
    if looks_local or not _HUB_ID.match(ref):
        raise ConfigError(
            f"{ref}: no such file or directory, and not a bundled model{near} "
            "(see `servefit models`)"
        )
    try:
        return _from_hub(ref), f"hub:{ref}"
    except ConfigError as exc:
        if near:  # a bundled id spelled differently (meta-llama/Llama-3.1-8B)
            raise ConfigError(f"{exc}{near}") from None
        raise


def _near_bundled(ref: str, ids: list[str]) -> str:
    """ "; did you mean ID?" for a bundled id the reference names with a different spelling:
    one name contains the other (meta-llama/Llama-3.1-8B, Qwen/Qwen3.5-27B-Instruct), else the
    closest spelling."""
    name = ref.rsplit("/", 1)[-1].lower()
    for i in ids:
        other = i.rsplit("/", 1)[-1].lower()
        if len(min(name, other, key=len)) >= 6 and (name in other or other in name):
            return f"; did you mean {i}?"
    return hint(ref, ids, cutoff=0.75)


def _kind(path: Path) -> str | None:
    """ "dir", "other" (a file, FIFO, device: read_json says what is wrong with it) or None when
    nothing is there; a path that cannot be looked at (permission, loop) is a clear error."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise os_error(exc, path, "model", ConfigError) from None
    return "dir" if stat.S_ISDIR(st.st_mode) else "other"


def hub_reachable(host: str, timeout: float = 3.0) -> bool:
    """A quick TCP probe of the Hub's host (no request is sent)."""
    try:
        import socket  # here: only a download checks the network

        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def _from_hub(repo_id: str) -> Path:
    hint = (
        f"cannot fetch {repo_id}/config.json from the Hugging Face Hub ({{why}}); "
        "use a bundled model (`servefit models`) or pass a local config.json / checkpoint dir"
    )
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ConfigError(hint.format(why="huggingface_hub is not installed")) from None
    try:  # a copy already in the local Hub cache needs no network
        return Path(hf_hub_download(repo_id, "config.json", local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached: go online below
        pass
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise ConfigError(hint.format(why="HF_HUB_OFFLINE is set and it is not in the local cache"))
    # huggingface_hub retries a dead network for ~30 s; a 3 s probe tells "offline" at once.
    host = (
        urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
        or "huggingface.co"
    )
    if not hub_reachable(host):
        raise ConfigError(hint.format(why=f"offline: {host} is unreachable"))
    try:
        local = hf_hub_download(repo_id, "config.json")
    except Exception as exc:  # noqa: BLE001 - network, auth, missing repo: all one clear line
        why = type(exc).__name__
        raise ConfigError(hint.format(why=why)) from None
    return Path(local)
