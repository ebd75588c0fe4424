"""Engine profiles by name and version; another version maps to the nearest mirrored one."""

from __future__ import annotations

import importlib
import re
from types import ModuleType

from servefit.errors import EngineVersionError
from servefit.plan.schema import EngineRef

# Each entry is a module mirroring one released version (see docs/engines/).
PROFILES: dict[str, dict[str, str]] = {
    "sglang": {
        "0.5.9": "servefit.engines.sglang.v0_5_9",
        "0.5.23": "servefit.engines.sglang.v0_5_23",
    },
    "vllm": {
        "0.24.0": "servefit.engines.vllm.v0_24_0",
        "0.33.0": "servefit.engines.vllm.v0_33_0",
    },
}
DEFAULT_VERSION = {"sglang": "0.5.23", "vllm": "0.33.0"}


def _vtuple(version: str) -> tuple[int, ...]:
    m = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", version.strip())
    if not m:
        raise EngineVersionError(f"cannot read engine version {version!r} (expected e.g. 0.5.9)")
    return tuple(int(x) if x is not None else 0 for x in m.groups())


def _distance(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return abs((a[0] * 1000 + a[1]) * 1000 + a[2] - ((b[0] * 1000 + b[1]) * 1000 + b[2]))


def parse_engine(spec: str) -> tuple[str, str | None]:
    """'sglang==0.5.9' / 'sglang' / 'sglang@0.5.9' -> (name, version or None)."""
    m = re.match(r"^\s*([A-Za-z_-]+)\s*(?:(?:==|@|=)\s*(\S+))?\s*$", spec or "")
    if not m:
        raise EngineVersionError(
            f"cannot read --engine {spec!r}; use NAME==VERSION, e.g. sglang==0.5.9"
        )
    name = m.group(1).lower()
    if name not in PROFILES:
        known = ", ".join(sorted(PROFILES))
        raise EngineVersionError(f"unknown engine {name!r}; servefit has profiles for: {known}")
    return name, m.group(2)


def select(spec: str) -> tuple[ModuleType, EngineRef]:
    """Import the profile for `spec`, the nearest mirrored version when there is no exact one."""
    name, version = parse_engine(spec)
    versions = PROFILES[name]
    if version is None:
        version = DEFAULT_VERSION[name]
    wanted = _vtuple(version)
    exact = next((v for v in versions if _vtuple(v) == wanted), None)
    chosen = exact or min(versions, key=lambda v: (_distance(_vtuple(v), wanted), -_vtuple(v)[2]))
    note = None
    if exact is None:
        note = f"{name}=={version} has no profile of its own; using the nearest mirrored release, {chosen}"
    module = importlib.import_module(versions[chosen])
    return module, EngineRef(name=name, version=version, profile=chosen, note=note)


def available() -> dict[str, list[str]]:
    return {name: sorted(v, key=_vtuple) for name, v in PROFILES.items()}
