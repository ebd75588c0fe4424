#!/usr/bin/env python3
"""Extract the model architectures an engine release registers, statically, from its wheel.

    python tools/extract_architectures.py sglang 0.5.23 /path/to/unzipped/wheel  [-o out.txt]
    python tools/extract_architectures.py --all /work/cache/wheels   # every registered profile

Nothing from the wheel is imported; the source is walked with `ast`:

* SGLang: sglang/srt/models/registry.py:import_model_classes registers, for every top-level
  module of sglang/srt/models/ (not sub-packages), the `__name__` of each class in its
  `EntryClass` (one class or a list). A class bound to another name (`Foo = Bar`) is followed
  to its definition.
* vLLM: vllm/model_executor/models/registry.py:_VLLM_MODELS, the keys of the dicts it merges
  (`{**_TEXT_GENERATION_MODELS, **_EMBEDDING_MODELS, ...}`).

Output: one architecture per line, sorted, written to
src/servefit/engines/<engine>/archs_<version with underscores>.txt.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _names(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [n for e in node.elts for n in _names(e)]
    return []


def _class_name(tree: ast.Module, name: str) -> str:
    """The __name__ of the class bound to `name` at module level (follows `A = B`)."""
    for _ in range(8):
        alias = None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return name
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
                and isinstance(node.value, ast.Name)
            ):
                alias = node.value.id
        if alias is None:
            return name  # imported from another module: registered under its own name
        name = alias
    return name


def sglang_architectures(wheel: Path) -> list[str]:
    models = wheel / "sglang" / "srt" / "models"
    found: set[str] = set()
    for path in sorted(models.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8-sig"))
        for node in tree.body:
            targets = []
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            if any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in targets):
                found.update(_class_name(tree, n) for n in _names(value))
    return sorted(found)


def vllm_architectures(wheel: Path) -> list[str]:
    path = wheel / "vllm" / "model_executor" / "models" / "registry.py"
    tree = ast.parse(path.read_text(encoding="utf-8-sig"))
    dicts: dict[str, ast.Dict] = {}
    for node in tree.body:
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            dicts[target.id] = value

    def keys(name: str) -> set[str]:
        out: set[str] = set()
        for k, v in zip(dicts[name].keys, dicts[name].values, strict=True):
            if k is None:  # **OTHER
                if isinstance(v, ast.Name):
                    out |= keys(v.id)
                elif isinstance(v, ast.Dict):
                    out |= {e.value for e in v.keys if isinstance(e, ast.Constant)}
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                out.add(k.value)
        return out

    return sorted(keys("_VLLM_MODELS"))


EXTRACT = {"sglang": sglang_architectures, "vllm": vllm_architectures}


def out_path(engine: str, version: str) -> Path:
    return ROOT / "src" / "servefit" / "engines" / engine / f"archs_{version.replace('.', '_')}.txt"


def write(engine: str, version: str, wheel: Path, out: Path | None = None) -> Path:
    archs = EXTRACT[engine](wheel)
    if not archs:
        raise SystemExit(f"no architectures found under {wheel}")
    target = out or out_path(engine, version)
    target.write_text("".join(a + "\n" for a in archs), encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", nargs="?", choices=sorted(EXTRACT))
    ap.add_argument("version", nargs="?")
    ap.add_argument(
        "wheel", nargs="?", type=Path, help="the unzipped wheel (holds sglang/ or vllm/)"
    )
    ap.add_argument("-o", "--out", type=Path)
    ap.add_argument("--all", type=Path, metavar="CACHE", help="<CACHE>/<engine>/<version>/")
    args = ap.parse_args(argv)
    if args.all:
        sys.path.insert(0, str(ROOT / "src"))
        from servefit.engines.registry import engines, profile_ids

        for engine in engines():
            for version in profile_ids(engine):
                print(write(engine, version, args.all / engine / version))
        return 0
    if not (args.engine and args.version and args.wheel):
        ap.error("ENGINE VERSION WHEEL, or --all CACHE")
    print(write(args.engine, args.version, args.wheel, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
