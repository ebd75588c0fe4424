"""The GPU catalog (hardware/gpus.json) and name lookup.

Memory is nvidia-smi's memory.total in MiB (rocm-smi VRAM total for AMD); bandwidth and dense
BF16 TFLOP/s come from vendor datasheets. docs/gpus.md lists every figure with its source.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from servefit.errors import HardwareError
from servefit.frozen import frozen
from servefit.hardware.spec import GPUSpec
from servefit.packagedata import package_dir

# Words that carry no identity: "NVIDIA GeForce RTX 4090" and "rtx-4090" normalize alike.
_NOISE = {"nvidia", "amd", "instinct", "geforce", "tesla", "graphics"}


@frozen
class CatalogEntry:
    """One catalog row: the spec plus where its figures come from."""

    spec: GPUSpec
    memory_from: str  # "log:<case id>" | "ref:<file §>" | "reported" | "inferred: ..."
    perf_from: str
    context_class: str
    aliases: tuple[str, ...]
    nvml_names: tuple[str, ...]
    note: str = ""


def normalize(name: str) -> str:
    """Lower-case alphanumerics without vendor words: 'NVIDIA H100 80GB HBM3' -> 'h10080gbhbm3'."""
    tokens = re.findall(r"[a-z0-9]+", name.lower())
    return "".join(t for t in tokens if t not in _NOISE)


def _forms(text: str) -> set[str]:
    n = normalize(text)
    forms = {n} if n else set()
    if n.startswith("rtx") and len(n) > 3:
        forms.add(n[3:])  # "RTX A6000" is also "A6000", "RTX 4090" also "4090"
    return forms


@lru_cache(maxsize=1)
def entries() -> tuple[CatalogEntry, ...]:
    """All catalog entries, in file order."""
    from servefit.hardware.preload import COMM_BASE_MIB, CONTEXT_MIB, PER_PEER_MIB

    raw = json.loads((package_dir("servefit.hardware") / "gpus.json").read_text(encoding="utf-8"))
    out = []
    for row in raw["gpus"]:
        vendor = row["vendor"]
        spec = GPUSpec(
            key=row["key"],
            name=row["name"],
            memory_mib=int(row["memory_mib"]),
            bandwidth_gbs=float(row["bandwidth_gbs"]),
            bf16_tflops=float(row["bf16_tflops"]),
            vendor=vendor,
            unified_memory=bool(row["unified_memory"]),
            context_mib=CONTEXT_MIB[row["context_class"]],
            per_peer_mib=PER_PEER_MIB[vendor],
            comm_base_mib=COMM_BASE_MIB[vendor],
            fully_connected=bool(row["fully_connected"]),
        )
        out.append(
            CatalogEntry(
                spec=spec,
                memory_from=row["memory_from"],
                perf_from=row["perf_from"],
                context_class=row["context_class"],
                aliases=tuple(row.get("aliases", ())),
                nvml_names=tuple(row.get("nvml_names", ())),
                note=row.get("note", ""),
            )
        )
    return tuple(out)


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, ...]]:
    """normalized form -> catalog keys. Keys, names and aliases must be unique; an NVML name may
    be shared (the 96 and 141 GB H20 both say "NVIDIA H20"; total memory tells them apart)."""
    owner: dict[str, str] = {}
    index: dict[str, list[str]] = {}
    for e in entries():
        key = e.spec.key
        for text in (key, e.spec.name, *e.aliases):
            for f in _forms(text):
                if owner.setdefault(f, key) != key:
                    raise RuntimeError(f"gpus.json: {text!r} names both {owner[f]} and {key}")
        for text in (key, e.spec.name, *e.aliases, *e.nvml_names):
            for f in _forms(text):
                keys = index.setdefault(f, [])
                if key not in keys:
                    keys.append(key)
    # A unique name beats a shared NVML name: put the owner first.
    return {f: tuple(sorted(ks, key=lambda k: k != owner.get(f))) for f, ks in index.items()}


def _by_key() -> dict[str, CatalogEntry]:
    return {e.spec.key: e for e in entries()}


def list_gpus() -> list[GPUSpec]:
    """Every catalog GPU, in catalog order."""
    return [e.spec for e in entries()]


def entry(key: str) -> CatalogEntry:
    """The catalog row of a key (for `servefit gpus` and docs)."""
    try:
        return _by_key()[key]
    except KeyError:
        raise HardwareError(f"no catalog entry {key!r}") from None


def find_gpu(name: str) -> GPUSpec | None:
    """Lookup without raising: None when the name is unknown."""
    keys = _index().get(normalize(name))
    return _by_key()[keys[0]].spec if keys else None


def get_gpu(name: str) -> GPUSpec:
    """Catalog lookup by key, product name, common spelling or NVML name, case-insensitive."""
    spec = find_gpu(name)
    if spec is not None:
        return spec
    raise HardwareError(_unknown_message(name))


@lru_cache(maxsize=1)
def _families() -> dict[str, tuple[str, ...]]:
    raw = json.loads((package_dir("servefit.hardware") / "gpus.json").read_text(encoding="utf-8"))
    return {
        normalize(k): tuple(v) for k, v in raw.get("families", {}).items() if not k.startswith("_")
    }


def variants_of(name: str) -> tuple[GPUSpec, ...]:
    """The cards a family name stands for ("H100": SXM5, PCIe, NVL), the one it resolves to
    first; () for a name that is one card. A plan sized on the first says which others exist:
    the 94 GB NVL planned as the 80 GB SXM5 is 14 GiB off."""
    keys = _families().get(normalize(name), ())
    by_key = _by_key()
    return tuple(by_key[k].spec for k in keys if k in by_key)


def ambiguity_warning(name: str) -> str | None:
    """The plan's warning for a family name, or None."""
    cards = variants_of(name)
    if len(cards) < 2:
        return None
    others = ", ".join(f"{c.key} ({c.memory_mib:,} MiB)" for c in cards[1:])
    return (
        f"--gpu {name} names {len(cards)} cards; sized as the {cards[0].name} "
        f"({cards[0].memory_mib:,} MiB). If yours is another, pass it: {others}; or --gpu local"
    )


def _unknown_message(name: str) -> str:
    import difflib

    index = _index()
    close = difflib.get_close_matches(normalize(name), list(index), n=6, cutoff=0.5)
    keys: list[str] = []
    for f in close:
        for k in index[f]:
            if k not in keys:
                keys.append(k)
    hint = f"did you mean {keys[0]}? " if keys else ""
    if len(keys) > 1:
        hint = f"did you mean {keys[0]}? (also close: {', '.join(keys[1:4])}); "
    return (
        f"unknown GPU {name!r}; {hint}run 'servefit gpus' for the list, "
        "or pass --gpu-mem-mib to size an unlisted card"
    )


def match_nvml_name(name: str, total_mib: int | None = None) -> GPUSpec | None:
    """The catalog spec for an NVML device name; among entries sharing the name, the one whose
    memory is closest to `total_mib`."""
    keys = _index().get(normalize(name))
    if not keys:
        return None
    specs = [_by_key()[k].spec for k in keys]
    if total_mib:
        specs.sort(key=lambda s: abs(s.memory_mib - total_mib))
    return specs[0]


def with_memory_mib(gpu: GPUSpec, mib: int | float) -> GPUSpec:
    """The same GPU with another memory total (--gpu-mem-mib, or what NVML reports)."""
    return gpu.with_memory(check_memory_mib(mib, what=gpu.name))


def check_memory_mib(mib: object, *, what: str = "GPU") -> int:
    """A positive whole number of MiB, or HardwareError."""
    if isinstance(mib, bool) or not isinstance(mib, (int, float)) or mib != mib:
        raise HardwareError(f"{what}: memory must be a number of MiB, got {mib!r}")
    if mib <= 0:
        raise HardwareError(f"{what}: memory must be positive, got {mib} MiB")
    return int(mib)


def generic_gpu(name: str, memory_mib: int, *, vendor: str = "nvidia") -> GPUSpec:
    """A spec for a GPU the catalog lacks: real memory, default pre-load constants, and 0 for
    the unknown bandwidth / TFLOP/s."""
    from servefit.hardware.preload import COMM_BASE_MIB, CONTEXT_MIB, PER_PEER_MIB

    mib = check_memory_mib(memory_mib, what=name)
    v = vendor if vendor in PER_PEER_MIB else "nvidia"
    return GPUSpec(
        key="local-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"),
        name=name,
        memory_mib=mib,
        bandwidth_gbs=0.0,
        bf16_tflops=0.0,
        vendor=v,
        context_mib=CONTEXT_MIB["amd" if v == "amd" else "nvidia-gddr"],
        per_peer_mib=PER_PEER_MIB[v],
        comm_base_mib=COMM_BASE_MIB[v],
    )
