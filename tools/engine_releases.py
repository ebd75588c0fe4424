#!/usr/bin/env python3
"""Which engine releases size alike: the evidence, read from the released wheels.

    python tools/engine_releases.py                      # both engines, markdown on stdout
    python tools/engine_releases.py --engine vllm --json # the same, as JSON
    python tools/engine_releases.py --write              # regenerate docs/engines/releases.md
    python tools/engine_releases.py --cache /work/cache/wheels --offline
    python tools/engine_releases.py --diff sglang 0.5.14 _handle_mamba_radix_cache
    python tools/engine_releases.py --where sglang handle_max_mamba_cache

For every release of the audited range (RELEASES) the wheel's Python sources are read from a
cache, <cache>/<engine>/<version>/<engine>/... (the layout `pip download` + unzip gives; the
cache defaults to ~/.cache/servefit/wheels, or $SERVEFIT_WHEEL_CACHE, or --cache). A release
missing from the cache is downloaded with `pip download --no-deps` unless --offline; for vLLM
only `vllm/*.py` is extracted from the ~340 MB wheel.

The *mirrored functions* are the engine functions servefit mirrors: every `sglang/...py:Qual` /
`vllm/...py:Qual` citation in src/servefit (short forms such as `memory_pool.py:MambaPool.__init__`
are resolved against the release trees), plus LINEAGE below, which names the functions the
release reference pages point at and ties together the places one function has lived in
(`ModelRunnerKVCacheMixin.handle_max_mamba_cache` -> `KVCacheConfigurator._handle_max_mamba_cache`).
A function is identified by its qualified name: when its file moved it is found by searching
the release tree, and a move is reported as a move, not as a change.

Each function is parsed with `ast` and normalised before hashing: docstrings and bare string
statements dropped, argument/return annotations dropped, the function's own name and its first
parameter (self / server_args) canonicalised. Comments and formatting never reach the AST. A
class citation hashes the class header and its non-method statements (fields, defaults); a
module citation hashes the module-level constants.

Grouping: a release whose mirrored *plan* functions (those cited from the planning side of
servefit, or named by the reference pages) show no change since the previous release joins the
previous release's group; so does a release declared EQUIVALENT to its predecessor with a reason
(a refactor that sizes alike). Changes in *runtime* functions (cited only by doctor / launch /
verify / cli: log lines, startup) are listed but do not split groups.
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "servefit"
DOC = REPO / "docs" / "engines" / "releases.md"
CACHE_ENV = "SERVEFIT_WHEEL_CACHE"
DEFAULT_CACHE = Path("~/.cache/servefit/wheels").expanduser()
ENGINES = ("sglang", "vllm")

# The audited ranges: every PyPI release, in release order.
RELEASES: dict[str, tuple[str, ...]] = {
    "sglang": (
        "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1", "0.5.13",
        "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18",
        "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23",
    ),
    "vllm": (
        "0.10.0", "0.10.1", "0.10.1.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0",
        "0.13.0", "0.14.0", "0.14.1", "0.15.0", "0.15.1", "0.16.0", "0.17.0", "0.17.1",
        "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0",
        "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
        "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0",
    ),
}  # fmt: skip

PLAN, RUNTIME = "plan", "runtime"
# servefit directories whose citations mirror what `plan` computes; the rest (doctor, launch,
# verify, cli) read logs and follow starts.
PLAN_DIRS = ("engines", "model", "hardware", "explain", "fit", "plan", "catalog")


# ---------------------------------------------------------------------------------------------
# Where a function lives, and what it is once normalised


@dataclass(frozen=True, order=True)
class Site:
    """A place in a release tree: path from the release root, and a qualified name there.

    An empty qualname stands for the module's constants (a citation of the file alone)."""

    path: str
    qualname: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.qualname}" if self.qualname else self.path

    @classmethod
    def parse(cls, text: str) -> Site:
        path, _, qualname = text.partition(":")
        return cls(path, qualname)


@dataclass(frozen=True)
class Definition:
    """A mirrored function as one release has it."""

    site: Site
    digest: str
    source: str  # the normalised code, for --diff


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


class _Normaliser(ast.NodeTransformer):
    """Drops what does not run: docstrings and bare strings, annotations, type comments."""

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        kept = [stmt for stmt in body if not _is_docstring(stmt)]
        return kept or [ast.Pass()]

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                setattr(node, name, self._body(body))
        if hasattr(node, "type_comment"):
            node.type_comment = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.returns = None
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 (ast visitor naming)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.annotation = None
        node.type_comment = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:
        # Inside a function an annotation does nothing at run time.
        if node.value is None:
            return None
        return ast.Assign(targets=[node.target], value=self.visit(node.value))


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.old:
            node.id = self.new
        return node


def _normalise_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
    node = _Normaliser().visit(copy.deepcopy(node))
    node.name = "_"
    params = node.args.posonlyargs + node.args.args
    # A method moved into a function of its receiver (`self` -> `server_args`) is a move.
    if params and params[0].arg != "self":
        node = _Rename(params[0].arg, "self").visit(node)
        params[0].arg = "self"
    return node


def _normalise_class(node: ast.ClassDef) -> ast.AST:
    """The class header and its fields; methods are mirrored (and cited) one by one."""
    fields = [
        copy.deepcopy(stmt)
        for stmt in node.body
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not _is_docstring(stmt)
    ]
    shell = ast.ClassDef(
        name="_",
        bases=copy.deepcopy(node.bases),
        keywords=copy.deepcopy(node.keywords),
        body=fields or [ast.Pass()],
        decorator_list=copy.deepcopy(node.decorator_list),
        type_params=[],
    )
    for stmt in ast.walk(shell):
        if hasattr(stmt, "type_comment"):
            stmt.type_comment = None
    return shell


def _normalise(node: ast.AST) -> ast.AST:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _normalise_function(node)
    if isinstance(node, ast.ClassDef):
        return _normalise_class(node)
    return _Normaliser().visit(copy.deepcopy(node))


def definition(site: Site, nodes: list[ast.AST]) -> Definition:
    norm = [_normalise(node) for node in nodes]
    dump = "\n".join(ast.dump(n, include_attributes=False) for n in norm)
    digest = hashlib.sha256(dump.encode()).hexdigest()[:12]
    source = "\n".join(ast.unparse(ast.fix_missing_locations(n)) for n in norm)
    return Definition(site=site, digest=digest, source=source)


def _dict_values(node: ast.AST, key: str) -> list[ast.AST]:
    """The value of entry `key` of a dict constant, or the element `key` of a list / set / tuple
    constant (frozenset({...}) included): what a release says about one architecture."""
    value = getattr(node, "value", None)
    if isinstance(value, ast.Call) and len(value.args) == 1:
        value = value.args[0]
    if isinstance(value, ast.Dict):
        return [
            v for k, v in zip(value.keys, value.values, strict=True)
            if isinstance(k, ast.Constant) and k.value == key
        ]  # fmt: skip
    if isinstance(value, (ast.List, ast.Set, ast.Tuple)):
        return [e for e in value.elts if isinstance(e, ast.Constant) and e.value == key]
    return []


class ModuleIndex:
    """Every qualified name a module defines: functions (nested too), classes, methods, and
    module- and class-level assignments."""

    def __init__(self, tree: ast.Module) -> None:
        self.defs: dict[str, list[ast.AST]] = {}
        self.constants: list[ast.AST] = []
        self._collect(tree.body, "", "module")

    def _collect(self, body: list[ast.stmt], prefix: str, scope: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = prefix + node.name
                self.defs.setdefault(qualname, []).append(node)
                inner = "class" if isinstance(node, ast.ClassDef) else "function"
                self._collect(node.body, qualname + ".", inner)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and scope != "function":
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.defs.setdefault(prefix + target.id, []).append(node)
                if scope == "module":
                    self.constants.append(node)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for name in ("body", "orelse", "finalbody"):
                    self._collect(getattr(node, name, []), prefix, scope)
                for handler in getattr(node, "handlers", []):
                    self._collect(handler.body, prefix, scope)

    def matches(self, qualname: str) -> list[str]:
        """Qualified names answering to `qualname`: itself, else those it ends (a citation may
        leave out the class: `model_runner.py:load_model` is `ModelRunner.load_model`)."""
        if qualname in self.defs:
            return [qualname]
        return sorted(q for q in self.defs if q.endswith("." + qualname))

    def define(self, path: str, qualname: str) -> Definition | None:
        if not qualname:
            return definition(Site(path), self.constants) if self.constants else None
        base, bracket, key = qualname.partition("[")
        if bracket:  # one entry of a dict constant: `MODELS_CONFIG_MAP[Qwen3_5ForCausalLM]`
            key = key.rstrip("]")
            values = [v for node in self.defs.get(base, []) for v in _dict_values(node, key)]
            return definition(Site(path, qualname), values) if values else None
        found = self.matches(qualname)
        if not found:
            return None
        nodes = [node for q in found for node in self.defs[q]]
        return definition(Site(path, ",".join(found)), nodes)


_TOP_NAMES = re.compile(
    rb"^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)|^(\w+)[ \t]*(?::[^=\n]*)?=(?!=)"
)


class Memo:
    """What one run has learned about file contents, shared by all releases: most files do not
    change from one release to the next, and parsing is the slow part."""

    def __init__(self) -> None:
        self.qualnames: dict[str, frozenset[str] | None] = {}  # content hash -> names defined
        self.tops: dict[str, frozenset[str]] = {}  # content hash -> names at the file's top
        self.defs: dict[tuple[str, str], tuple[str, str, str] | None] = {}
        # (content hash, cited qualname) -> (qualname(s) found, digest, normalised source)


class ReleaseTree:
    """The Python sources of one release: <root>/<engine>/..."""

    def __init__(self, engine: str, version: str, root: Path, memo: Memo | None = None) -> None:
        self.engine, self.version, self.root = engine, version, root
        self.memo = memo or Memo()
        self._modules: dict[str, ModuleIndex | None] = {}
        self._hashes: dict[str, str] = {}
        self.unparsable: list[str] = []

    @cached_property
    def files(self) -> frozenset[str]:
        base = self.root / self.engine
        paths = (p.relative_to(self.root) for p in base.rglob("*.py") if p.is_file())
        # The engines' own test kits (sglang/test/) mock the functions mirrored here.
        return frozenset(p.as_posix() for p in paths if not {"test", "tests"} & set(p.parts))

    def _hash(self, path: str) -> str:
        if path not in self._hashes:
            data = (self.root / path).read_bytes()
            self._hashes[path] = hashlib.sha1(data).hexdigest()
        return self._hashes[path]

    def module(self, path: str) -> ModuleIndex | None:
        if path not in self._modules:
            index = None
            if path in self.files:
                text = (self.root / path).read_text(encoding="utf-8", errors="replace")
                try:
                    index = ModuleIndex(ast.parse(text))
                except SyntaxError:
                    self.unparsable.append(path)
            self._modules[path] = index
            self.memo.qualnames[self._hash(path)] = frozenset(index.defs) if index else None
        return self._modules[path]

    def _defined(self, path: str) -> frozenset[str]:
        key = self._hash(path)
        if key not in self.memo.qualnames:
            self.module(path)
        return self.memo.qualnames[key] or frozenset()

    def define(self, site: Site) -> Definition | None:
        if site.path not in self.files:
            return None
        key = (self._hash(site.path), site.qualname)
        if key not in self.memo.defs:
            index = self.module(site.path)
            found = index.define(site.path, site.qualname) if index else None
            self.memo.defs[key] = (
                (found.site.qualname, found.digest, found.source) if found else None
            )
        known = self.memo.defs[key]
        return Definition(Site(site.path, known[0]), known[1], known[2]) if known else None

    @cached_property
    def names(self) -> dict[str, list[str]]:
        """Name defined at the top of a file -> the files (a text scan, confirmed on use)."""
        found: dict[str, list[str]] = {}
        for path in sorted(self.files):
            data = (self.root / path).read_bytes()
            key = self._hashes.setdefault(path, hashlib.sha1(data).hexdigest())
            if key not in self.memo.tops:
                tops = set()
                for line in data.splitlines():
                    if line[:1].isalpha() or line.startswith(b"_"):
                        m = _TOP_NAMES.match(line)
                        if m:
                            tops.add((m.group(1) or m.group(2)).decode())
                self.memo.tops[key] = frozenset(tops)
            for name in self.memo.tops[key]:
                found.setdefault(name, []).append(path)
        return found

    def search(self, qualname: str) -> list[Site]:
        """Every file of this release defining `qualname` (or a name it ends)."""
        # The outermost name is a class, function or constant at the top of some file.
        candidates = self.names.get(re.split(r"[.\[]", qualname)[0], ())
        name = qualname.partition("[")[0]
        return [
            Site(path, qualname)
            for path in sorted(set(candidates))
            if any(q == name or q.endswith("." + name) for q in self._defined(path))
        ]

    def release(self) -> None:
        """Forget the parsed modules (one release at a time keeps memory small)."""
        self._modules.clear()


# ---------------------------------------------------------------------------------------------
# The mirrored functions


@dataclass(frozen=True)
class Lineage:
    """One engine function the reference pages name, with every place it has lived in
    (newest first: the first that a release defines is the one used). `ref` names the
    reference-page entry; `claimed` the releases where that page says the function changes."""

    engine: str
    sites: tuple[str, ...]
    ref: str = ""
    claimed: tuple[str, ...] = ()


STABLE = "unchanged in the range"  # a reference claim that a function never changes


@dataclass
class Mirrored:
    engine: str
    sites: list[Site]
    role: str = PLAN
    cites: list[Citation] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    claimed: set[str] = field(default_factory=set)
    key: str = ""  # where it lives in the newest release defining it (set by `observe`)
    optional: bool = False  # an architecture's entry: no release need have it

    @property
    def label(self) -> str:
        return self.key or str(self.sites[0])

    @property
    def cited_by(self) -> set[str]:
        return {c.source for c in self.cites}


_CITATION = re.compile(
    r"(?<![\w/.])((?:[A-Za-z_][\w]*/)*[A-Za-z_]\w*\.py):([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)"
)


@dataclass(frozen=True)
class Citation:
    engine: str | None  # None when the citing file does not say
    text: str  # path:qualname as written
    source: str  # the citing file, relative to the repo
    role: str


def _about(parts: tuple[str, ...], engines: Iterable[str]) -> str | None:
    """The engine a servefit module is about: engines/vllm/..., doctor/sglang.py, levers_vllm.py."""
    stem = Path(parts[-1]).stem
    return next(
        (e for e in engines if e in parts[:-1] or stem == e or stem.endswith("_" + e)), None
    )


def citations(src: Path = SRC, engines: Iterable[str] = ENGINES) -> list[Citation]:
    """`path.py:Qual` citations in servefit's sources, with the engine the citing file is about."""
    engines = tuple(engines)
    found = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src.parent.parent).as_posix()
        parts = path.relative_to(src).parts
        role = PLAN if parts[0].lstrip("_") in PLAN_DIRS else RUNTIME  # servefit._plan too
        hint = _about(parts, engines)
        for m in _CITATION.finditer(path.read_text(encoding="utf-8")):
            cited, qualname = m.group(1), m.group(2).rstrip(".")
            engine = next((e for e in engines if cited.startswith(e + "/")), hint)
            own = path.parent / cited
            if cited.startswith(("servefit/", "engines/", "uvicorn/")) or own.exists():
                continue  # servefit's own code, or a library's
            found.append(Citation(engine, f"{cited}:{qualname}", rel, role))
    return found


def _same_function(a: Site, b: Site) -> bool:
    if a.path != b.path:
        return False
    x, y = a.qualname, b.qualname
    return x == y or x.endswith("." + y) or y.endswith("." + x)


def catalogue(
    engine: str,
    universe: frozenset[str],
    cited: Iterable[Citation],
    lineage: Iterable[Lineage],
    narrowed: Iterable[str] = (),
    architectures: Iterable[str] = (),
) -> tuple[list[Mirrored], list[Citation]]:
    """The mirrored functions of one engine, and the citations naming no file of any release.

    `universe` is every source file of any release of the engine; a citation of one of the
    `narrowed` tables of architectures stands for its entries for `architectures`."""
    narrowed, architectures = set(narrowed), tuple(architectures)
    items = [
        Mirrored(engine, [Site.parse(s) for s in entry.sites], PLAN, [],
                 [entry.ref] if entry.ref else [], set(entry.claimed))
        for entry in lineage
        if entry.engine == engine
    ]  # fmt: skip
    for table in sorted(narrowed):
        path, _, qualname = table.partition(":")
        if path.startswith(engine + "/"):
            items += [
                Mirrored(engine, [Site(path, f"{qualname}[{arch}]")], PLAN, optional=True)
                for arch in architectures
            ]
    unresolved = []
    for cite in cited:
        if cite.engine not in (engine, None):
            continue
        path, _, qualname = cite.text.partition(":")
        if path.startswith(engine + "/"):
            paths = [path] if path in universe else []
        else:
            paths = sorted((f for f in universe if f.endswith("/" + path)), key=len)
        if not paths:
            # A citation whose engine the citing file does not say is checked against both.
            if cite.engine == engine:
                unresolved.append(cite)
            continue
        sites = [Site(p, qualname) for p in paths]
        if any(str(site) in narrowed for site in sites):
            # A table of architectures: followed entry by entry, for the audited ones.
            for arch in architectures:
                _attach(items, engine, [Site(p, f"{qualname}[{arch}]") for p in paths], cite,
                        optional=True)  # fmt: skip
            continue
        _attach(items, engine, sites, cite)
    return items, unresolved


def _attach(
    items: list[Mirrored], engine: str, sites: list[Site], cite: Citation, optional: bool = False
) -> None:
    """Add the citation to the mirrored function it names, new or known."""
    item = next(
        (it for it in items if any(_same_function(a, b) for a in it.sites for b in sites)),
        None,
    )
    if item is None:
        item = Mirrored(engine, sites, cite.role, optional=optional)
        items.append(item)
    item.cites.append(cite)
    if cite.role == PLAN:
        item.role = PLAN


# ---------------------------------------------------------------------------------------------
# Reading the releases: where each mirrored function is, release by release


def _rank(candidate: Site, sites: list[Site], previous: Definition | None) -> tuple[int, ...]:
    """Which of several files defining a moved function is it: the file it was in before,
    then a file of the same name, then the closest path."""
    parts = candidate.path.removesuffix(".py").split("/")
    common = 0
    for site in sites:
        other = site.path.removesuffix(".py").split("/")
        n = 0
        while n < min(len(parts), len(other)) and parts[n] == other[n]:
            n += 1
        common = max(common, n)
    same_file = int(previous is not None and previous.site.path == candidate.path)
    same_name = int(any(Path(s.path).name == Path(candidate.path).name for s in sites))
    return (same_file, same_name, common)


def _near(candidate: Site, sites: list[Site]) -> bool:
    _, same_name, common = _rank(candidate, sites, None)
    return bool(same_name) or common >= 3


def locate(
    item: Mirrored, tree: ReleaseTree, previous: Definition | None
) -> tuple[Definition | None, str | None]:
    """The item as `tree` has it: at one of its known sites, else wherever the release defines
    its qualified name (a move). Returns (definition or None, a note on ambiguity)."""
    for site in item.sites:
        found = tree.define(site)
        if found:
            return found, None
    for qualname in dict.fromkeys(s.qualname for s in item.sites if s.qualname):
        candidates = tree.search(qualname)
        if not candidates:
            continue
        if "." not in qualname:
            # A bare name (`Backend`, `load_model`) is common: only a file of the same name or
            # in the same package is the function moved.
            candidates = [c for c in candidates if _near(c, item.sites)]
            if not candidates:
                continue
        ranked = sorted(candidates, key=lambda c: _rank(c, item.sites, previous), reverse=True)
        best = ranked[0]
        if len(ranked) > 1 and _rank(ranked[1], item.sites, previous) == _rank(
            best, item.sites, previous
        ):
            if "." not in qualname:
                return None, None  # a common name, not a moved function
            where = ", ".join(c.path for c in ranked[:4])
            return None, f"{tree.version}: {qualname} is defined in several files ({where})"
        return tree.define(best), None
    return None, None


@dataclass
class Observed:
    """Every mirrored function of one engine, as each release has it."""

    engine: str
    versions: tuple[str, ...]
    items: list[Mirrored]
    found: list[list[Definition | None]]  # [item][release]
    notes: list[str]
    unresolved: list[Citation]


def observe(
    engine: str,
    versions: tuple[str, ...],
    trees: Iterable[ReleaseTree],
    items: list[Mirrored],
    unresolved: list[Citation],
    not_sizing: Iterable[str] = (),
) -> Observed:
    not_sizing = set(not_sizing)
    found: list[list[Definition | None]] = [[] for _ in items]
    notes: list[str] = []
    for tree in trees:
        for row, item in zip(found, items, strict=True):
            definition_, note = locate(item, tree, row[-1] if row else None)
            row.append(definition_)
            if note:
                notes.append(note)
        notes += [f"{tree.version}: cannot parse {p}" for p in tree.unparsable]
        tree.release()
    # Two citations of one function (short and long form) are one mirrored function.
    merged: dict[tuple, int] = {}
    keep_items, keep_found = [], []
    for item, row in zip(items, found, strict=True):
        if not any(row):
            if item.optional:
                continue
            if item.refs:
                notes.append(f"{item.label} ({', '.join(item.refs)}) is in no release")
            else:
                unresolved += [c for c in item.cites if c.engine == engine]
            continue
        item.key = str(next(d.site for d in reversed(row) if d))
        signature = tuple(d.site if d else None for d in row)
        if signature in merged:
            other = keep_items[merged[signature]]
            other.cites += item.cites
            other.refs += [r for r in item.refs if r not in other.refs]
            other.claimed |= item.claimed
            other.role = PLAN if PLAN in (other.role, item.role) else RUNTIME
            continue
        merged[signature] = len(keep_items)
        keep_items.append(item)
        keep_found.append(row)
    for item in keep_items:
        if item.key in not_sizing:
            item.role = RUNTIME
    return Observed(engine, versions, keep_items, keep_found, notes, unresolved)


# ---------------------------------------------------------------------------------------------
# What changed, and which releases size alike

CHANGED, MOVED, MOVED_CHANGED, ADDED, REMOVED = (
    "changed", "moved", "moved+changed", "added", "removed",
)  # fmt: skip


@dataclass(frozen=True)
class Change:
    function: str  # the mirrored function (where the newest release defining it has it)
    kind: str
    role: str
    before: str | None  # path:qualname in the previous release
    after: str | None

    @property
    def splits(self) -> bool:
        """A code change in a function `plan` mirrors (a pure move is not one)."""
        return self.role == PLAN and self.kind != MOVED

    def describe(self) -> str:
        if self.kind == ADDED:
            return f"`{self.after}` added"
        if self.kind == REMOVED:
            return f"`{self.before}` removed"
        if self.kind == CHANGED:
            return f"`{self.after}` changed"
        verb = "moved" if self.kind == MOVED else "moved and changed"
        return f"`{self.after}` {verb} (was `{self.before}`)"


def change(item: Mirrored, before: Definition | None, after: Definition | None) -> Change | None:
    if before is None and after is None:
        return None
    if before is None:
        kind = ADDED
    elif after is None:
        kind = REMOVED
    else:
        moved = before.site != after.site
        edited = before.digest != after.digest
        if not (moved or edited):
            return None
        kind = MOVED_CHANGED if moved and edited else (MOVED if moved else CHANGED)
    return Change(
        item.key,
        kind,
        item.role,
        str(before.site) if before else None,
        str(after.site) if after else None,
    )


def changes(observed: Observed) -> list[list[Change]]:
    """Per release, the changes since the previous release (none for the first)."""
    out: list[list[Change]] = [[]]
    for r in range(1, len(observed.versions)):
        found = []
        for item, row in zip(observed.items, observed.found, strict=True):
            c = change(item, row[r - 1], row[r])
            if c:
                found.append(c)
        out.append(sorted(found, key=lambda c: (c.role != PLAN, c.function)))
    return out


@dataclass(frozen=True)
class Equivalent:
    """A judgement on the changes of release `later` against its predecessor `earlier`: the
    mirrored functions named in `covers` (substrings of path:qualname; "*" for all) changed in a
    way that does not change what servefit computes, for `reason`. When judgements cover every
    plan change of `later`, the pair is declared equivalent and `later` joins the profile of
    `earlier`."""

    engine: str
    earlier: str
    later: str
    reason: str
    covers: tuple[str, ...]

    def covering(self, change: Change) -> bool:
        return "*" in self.covers or any(name in change.function for name in self.covers)


@dataclass
class Group:
    profile: str  # the first release of the group names its profile
    releases: list[str]
    changes: list[Change]  # the unjudged plan changes that open the group


@dataclass
class Verdict:
    version: str
    group: str
    changes: list[Change]
    joined_by: str  # "first" | "no change" | "judged alike" | "new group"
    judged: dict[str, str] = field(default_factory=dict)  # function -> reason


def group(
    versions: tuple[str, ...], found: list[list[Change]], judgements: Iterable[Equivalent]
) -> tuple[list[Group], list[Verdict]]:
    judgements = list(judgements)
    for j in judgements:
        if (
            j.later not in versions
            or versions.index(j.later) == 0
            or (versions[versions.index(j.later) - 1] != j.earlier)
        ):
            raise ValueError(f"judgement {j.earlier} -> {j.later}: not consecutive releases")
    groups: list[Group] = []
    verdicts: list[Verdict] = []
    for r, version in enumerate(versions):
        mine = [j for j in judgements if j.later == version]
        judged = {}
        for c in found[r]:
            reason = next((j.reason for j in mine if c.splits and j.covering(c)), None)
            if reason:
                judged[c.function] = reason
        splitting = [c for c in found[r] if c.splits and c.function not in judged]
        if r == 0:
            how = "first"
        elif splitting:
            how = "new group"
        else:
            how = "judged alike" if judged else "no change"
        if how in ("first", "new group"):
            groups.append(Group(version, [], splitting))
        groups[-1].releases.append(version)
        verdicts.append(Verdict(version, groups[-1].profile, found[r], how, judged))
    return groups, verdicts


# ---------------------------------------------------------------------------------------------
# Where the shared reference pages and the code disagree


def disagreements(
    observed: Observed,
    found: list[list[Change]],
    groups: list[Group],
    verdicts: list[Verdict],
    reference_groups: list[list[str]] | None,
    implied: bool = False,
) -> list[str]:
    versions = observed.versions
    out = []
    for item in observed.items:
        if not item.refs:
            continue
        ref = "; ".join(item.refs)
        changed_at = {
            versions[r] for r in range(1, len(versions))
            for c in found[r] if c.function == item.key and c.kind != MOVED
        }  # fmt: skip
        neutral = {v.version for v in verdicts if item.key in v.judged}
        for version in sorted(item.claimed - changed_at, key=versions.index):
            out.append(
                f"{version}: the reference ({ref}) names a change in `{item.key}`; "
                "its code is the same as in the previous release"
            )
        if any(r.endswith(STABLE) for r in item.refs) and changed_at - neutral:
            when = ", ".join(sorted(changed_at - neutral, key=versions.index))
            out.append(
                f"`{item.key}`: the reference says unchanged in the range; changed in {when}"
            )
    for r, version in enumerate(versions):
        judged = verdicts[r].judged
        if ".post" in version and any(c.splits and c.function not in judged for c in found[r]):
            names = ", ".join(f"`{c.function}`" for c in found[r] if c.splits)
            out.append(
                f"{version}: the reference says a .post release changes no sizing file; "
                f"changed: {names}"
            )
    if reference_groups is not None:
        mine = [g.releases for g in groups]
        for releases in reference_groups:
            if releases not in mine:
                holding = [g.releases for g in groups if set(g.releases) & set(releases)]
                said = "names no change inside" if implied else "groups"
                out.append(
                    f"the reference {said} {{{', '.join(releases)}}}; the evidence gives "
                    + " · ".join("{" + ", ".join(g) + "}" for g in holding)
                )
    return out


def implied_groups(versions: tuple[str, ...], boundaries: set[str]) -> list[list[str]]:
    """Groups a page implies from the releases where it names a change."""
    groups: list[list[str]] = []
    for version in versions:
        if not groups or version in boundaries:
            groups.append([])
        groups[-1].append(version)
    return groups


# ---------------------------------------------------------------------------------------------
# The tables: functions the reference pages name, judgements, the pages' own groups

_SG = "sglang/srt/"
_SG_MIXIN = _SG + "model_executor/model_runner_kv_cache_mixin.py:ModelRunnerKVCacheMixin."
_SG_CONF = _SG + "mem_cache/kv_cache_configurator.py:KVCacheConfigurator."
_SG_ARGS = _SG + "server_args.py:ServerArgs."


def _sg(sites: tuple[str, ...], ref: str, *claimed: str) -> Lineage:
    return Lineage("sglang", sites, "sglang-releases.md " + ref, claimed)


# sglang-releases.md: the break points, newest home first.
SGLANG_LINEAGE = (
    _sg((_SG + "arg_groups/model_hook.py:handle_mamba_radix_cache",
         _SG_ARGS + "_handle_mamba_radix_cache"), "0.5.10, 0.5.14", "0.5.10", "0.5.14"),
    _sg((_SG + "arg_groups/overrides.py:supports_mamba_cache_extra_buffer",
         _SG_ARGS + "_support_mamba_cache_extra_buffer"), "0.5.14", "0.5.14"),
    _sg((_SG + "arg_groups/mamba_hook.py:validate_mamba_no_buffer",
         _SG_ARGS + "_validate_mamba_no_buffer"), "0.5.14"),
    _sg((_SG + "arg_groups/mamba_hook.py:validate_mamba_extra_buffer",
         _SG_ARGS + "_validate_mamba_extra_buffer"), "0.5.14"),
    _sg((_SG + "arg_groups/memory_hook.py:handle_gpu_memory_settings",
         _SG_ARGS + "_handle_gpu_memory_settings"),
        "0.5.10, 0.5.14, 0.5.20, 0.5.22", "0.5.10", "0.5.14", "0.5.20", "0.5.22"),
    _sg((_SG + "arg_groups/memory_hook.py:reserve_for_graph_mb",
         _SG_ARGS + "reserve_for_graph_mb"), "0.5.16", "0.5.16"),
    _sg((_SG_ARGS + "_handle_piecewise_cuda_graph",), "0.5.10", "0.5.10"),
    _sg((_SG_CONF + "_calculate_mamba_ratio", _SG_MIXIN + "_calculate_mamba_ratio"),
        "0.5.10", "0.5.10"),
    _sg((_SG_CONF + "resolve_max_num_reqs", _SG_MIXIN + "_resolve_max_num_reqs"),
        "0.5.10, 0.5.14", "0.5.10", "0.5.14"),
    _sg((_SG + "configs/nemotron_h.py:NemotronHConfig._resolve_layers_block_type",),
        "0.5.10", "0.5.10"),
    _sg((_SG + "models/lfm2_vl.py:EntryClass",), "0.5.10", "0.5.10"),
    _sg((_SG + "configs/lfm2_vl.py:Lfm2VlConfig",), "0.5.10", "0.5.10"),
    _sg((_SG + "mem_cache/memory_pool.py:ReqToTokenPool.__init__",), "0.5.11", "0.5.11"),
    _sg((_SG + "environ.py:Envs.SGLANG_ENABLE_SPEC_V2",), "0.5.11", "0.5.11"),
    _sg((_SG_CONF + "_handle_max_mamba_cache", _SG_MIXIN + "handle_max_mamba_cache"),
        "0.5.13, 0.5.17, 0.5.23", "0.5.13", "0.5.17", "0.5.23"),
    _sg((_SG + "arg_groups/speculative_hook.py:handle_speculative_decoding",
         _SG_ARGS + "_handle_speculative_decoding"), "0.5.13"),
    _sg((_SG + "managers/scheduler.py:Scheduler.init_model_worker",), "0.5.14", "0.5.14"),
    _sg((_SG + "mem_cache/memory_pool.py:MambaPool.__init__",), "0.5.14", "0.5.14"),
    _sg((_SG + "model_executor/cuda_graph_config.py:default_prefill_backend",),
        "0.5.15", "0.5.15"),
    _sg((_SG + "configs/model_config.py:multimodal_breakable_cuda_graph_supported_model_archs",),
        "0.5.16", "0.5.16"),
    _sg((_SG + "configs/hybrid_arch.py:kimi_linear_config",
         _SG + "model_executor/model_runner.py:ModelRunner.kimi_linear_config"),
        "0.5.17", "0.5.17"),
    _sg((_SG + "models/kimi_k3.py:EntryClass",), "0.5.17", "0.5.17"),
    _sg((_SG + "configs/kimi_k3.py:KimiK3Config",), "0.5.17", "0.5.17"),
    _sg((_SG_CONF + "_profile_available_bytes", _SG_MIXIN + "_profile_available_bytes",
         _SG_MIXIN + "profile_max_num_token"), "0.5.18", "0.5.18"),
    _sg((_SG + "configs/mamba_utils.py:mamba2_state_dtype",), STABLE),
    _sg((_SG + "configs/mamba_utils.py:Mamba2StateShape.create",), STABLE),
    _sg((_SG + "configs/mamba_utils.py:BaseLinearStateParams.mamba_cache_per_req",), STABLE),
    _sg((_SG + "configs/qwen3_next.py:Qwen3NextConfig.mamba2_cache_params",), STABLE),
)  # fmt: skip

_VL = "vllm/"
_VL_ARGS = _VL + "engine/arg_utils.py:EngineArgs."
_VL_MODELS = _VL + "model_executor/models/"
_VL_MAMBA = _VL + "model_executor/layers/mamba/mamba_utils.py:"
_VL_KV = _VL + "v1/core/kv_cache_planning.py:", _VL + "v1/core/kv_cache_utils.py:"


def _vl(sites: tuple[str, ...], ref: str, *claimed: str) -> Lineage:
    return Lineage("vllm", sites, "vllm-releases.md " + ref, claimed)


def _kv(name: str) -> tuple[str, ...]:
    """kv_cache_utils.py functions, also in kv_cache_planning.py from 0.33.0."""
    return tuple(prefix + name for prefix in _VL_KV)


# vllm-releases.md: the D-table (id, the releases where its state changes), newest home first.
VLLM_LINEAGE = (
    _vl((_VL_ARGS + "_is_v1_supported_oracle",), "D1", "0.10.2"),
    _vl((_VL_MODELS + "registry.py:_MULTIMODAL_MODELS[Qwen3_5ForConditionalGeneration]",),
        "D2", "0.17.0"),
    _vl((_VL_MODELS + "registry.py:_TEXT_GENERATION_MODELS[Qwen3_5ForCausalLM]",), "D2"),
    _vl((_VL_MAMBA + "MambaStateDtypeCalculator.gated_delta_net_state_dtype",),
        "D3", "0.10.2", "0.17.0"),
    _vl((_VL_MODELS + "config.py:MODELS_CONFIG_MAP[Qwen3_5ForConditionalGeneration]",),
        "D3", "0.17.0"),
    _vl((_VL_MODELS + "config.py:MODELS_CONFIG_MAP[Qwen3_5ForCausalLM]",), "D3", "0.27.0"),
    _vl((_VL_MODELS + "config.py:Qwen3_5ForConditionalGenerationConfig.verify_and_update_config",),
        "D3"),
    _vl((_VL_ARGS + "_set_default_chunked_prefill_and_prefix_caching_args",
         _VL_ARGS + "_set_default_args", _VL_ARGS + "_set_default_args_v1"),
        "D4", "0.10.2", "0.28.0"),
    _vl((_VL + "config/model.py:ModelConfig.is_prefix_caching_supported",), "D4"),
    _vl((_VL_MODELS + "config.py:MambaModelConfig.verify_and_update_config",),
        "D5", "0.11.1", "0.15.0", "0.20.0", "0.22.0", "0.28.0", "0.32.0"),
    _vl((_VL + "config/cache.py:MambaCacheMode",), "D5", "0.15.0", "0.32.0"),
    _vl((_VL + "v1/kv_cache_interface.py:MambaSpec.max_memory_usage_bytes",),
        "D6", "0.11.1", "0.15.0", "0.22.0", "0.29.0", "0.32.0"),
    _vl((_VL_MODELS + "config.py:HybridAttentionMambaModelConfig.verify_and_update_config",),
        "D7", "0.11.1", "0.18.0"),
    _vl((_VL + "platforms/interface.py:Platform.update_block_size_for_backend",),
        "D7", "0.18.0", "0.20.0"),
    _vl((_VL + "platforms/interface.py:Platform._align_hybrid_block_size",),
        "D7", "0.20.0", "0.27.0", "0.32.0", "0.33.0"),
    _vl((_VL_MODELS.replace("models/", "") + "layers/mamba/gdn/qwen_gdn_linear_attn.py:"
         "_resolve_gdn_prefill_backend",), "D8", "0.33.0"),
    _vl(_kv("_get_kv_cache_groups_uniform_page_size"), "D9", "0.12.0", "0.18.0", "0.27.0"),
    _vl(_kv("check_enough_kv_cache_memory"), "D10", "0.29.0"),
    _vl(_kv("_report_kv_cache_config"), "D11", "0.20.1"),
    _vl(_kv("get_kv_cache_capacity"), "D11"),
    _vl(_kv("update_kv_cache_capacity"), "D12", "0.28.0"),
    _vl((_VL + "config/compilation.py:CompilationConfig.adjust_cudagraph_sizes_for_mamba_cache",),
        "D13", "0.18.0", "0.20.0"),
    _vl((_VL_ARGS + "get_batch_defaults",), "D14", "0.28.0", "0.33.0"),
    _vl((_VL + "config/cache.py:CacheConfig.gpu_memory_utilization",), "D15", "0.20.0"),
    _vl((_VL + "v1/worker/gpu_worker.py:Worker.determine_available_memory",),
        "D15, D16", "0.18.0", "0.20.0", "0.27.0"),
    _vl((_VL_MAMBA + "MambaStateShapeCalculator.mamba2_state_shape",), "D17"),
    _vl((_VL_MAMBA + "MambaStateShapeCalculator.kda_state_shape",), "D18", "0.11.1", "0.27.0"),
    _vl((_VL_MAMBA + "MambaStateDtypeCalculator.kda_state_dtype",), "D18", "0.11.1", "0.30.0"),
    _vl((_VL + "config/vllm.py:VllmConfig.use_v2_model_runner",), "D19", "0.29.0"),
    _vl((_VL + "config/vllm.py:VllmConfig._is_default_v2_model_runner_model",), "D19"),
)  # fmt: skip

LINEAGE: tuple[Lineage, ...] = SGLANG_LINEAGE + VLLM_LINEAGE

# Functions servefit cites from its planning side that do not size anything: their changes are
# listed with the runtime ones and split no profile. Keyed by path:qualname (newest home).
_FLAGS = "the release's flags and their defaults: its own flag table (flags_<v>.json) holds them"
NOT_SIZING: dict[str, str] = {
    "sglang/srt/server_args.py:ServerArgs": _FLAGS,
    "vllm/engine/arg_utils.py:EngineArgs": _FLAGS,
    "vllm/entrypoints/common/cli_args.py:FrontendArgs": _FLAGS,
    "vllm/utils/argparse_utils.py:FlexibleArgumentParser.parse_args": _FLAGS,
    "sglang/srt/server_args.py:ServerArgs.__repr__": "how the resolved arguments are printed",
    "sglang/srt/utils/auth.py:decide_request_auth": "HTTP authentication",
    "vllm/entrypoints/serve/utils/server_utils.py:AuthenticationMiddleware": "HTTP authentication",
    "vllm/entrypoints/openai/api_server.py:build_app": "the HTTP app",
    "vllm/config/model.py:ModelConfig.hf_token": "the Hugging Face token",
    "vllm/entrypoints/cli/serve.py:run_headless": "multi-node start",
}

# Tables of architectures (cited by servefit, or deciding something it mirrors): only the entries
# of the architectures servefit's catalog holds are followed (a release adding some other model
# changes nothing here).
NARROWED = (
    "vllm/model_executor/models/config.py:MODELS_CONFIG_MAP",
    "vllm/model_executor/models/registry.py:_PREVIOUSLY_SUPPORTED_MODELS",
    "sglang/srt/configs/model_config.py:multimodal_model_archs",
    "sglang/srt/arg_groups/overrides.py:_MAMBA_RADIX_CACHE_ARCHS",
    "sglang/srt/arg_groups/overrides.py:_MAMBA_EXTRA_BUFFER_ARCHS",
    # Which architectures run vLLM's V2 model runner by default (0.22.0 ... 0.28.0).
    "vllm/config/vllm.py:DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES",
)


def catalog_architectures(data: Path = SRC / "catalog" / "data") -> list[str]:
    """The `architectures` of every model config in servefit's catalog."""
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            archs = node.get("architectures")
            if isinstance(archs, list):
                found.update(a for a in archs if isinstance(a, str))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(data.glob("*.json")):
        walk(json.loads(path.read_text(encoding="utf-8")))
    return sorted(found)


# Release pairs that size alike although mirrored functions changed: the reason, and the
# functions the judgement reviewed ("*": every change of the release).
EQUIVALENT: tuple[Equivalent, ...] = (
    Equivalent(
        "sglang", "0.5.11", "0.5.12",
        "only DeepSeek-V4 / MiMo-V2 / Laguna / MiniCPM-V-4.6 / InternS2 paths, NPU / XPU / MUSA "
        "paths, a FROZEN_KV_MTP algorithm and registered custom speculative algorithms, the DFLASH "
        "window flag (renamed), MoE and FP4-expert kernel "
        "choices, PP layer bookkeeping moved into adjust_hybrid_swa_layers_for_pp, the NemotronH "
        "adjustments moved verbatim to arg_groups/nemotron_h_hook.py, ReqToTokenPool keeps its "
        "size + 1 rows (as _alloc_size), and a log line of the no-op KV pool",
        ("handle_mamba_radix_cache", "handle_speculative_decoding", "ModelConfig.__init__",
         "get_hybrid_layer_ids", "is_hybrid_swa_model", "Fp8Config.get_quant_method",
         "Scheduler.init_model_worker", "_finalize_allocation_log", "ReqToTokenPool.__init__",
         "swa_memory_pool.py:SWAKVPool", "ModelRunner.initialize", "ModelRunner.load_model",
         "create_memory_pool_configurator", "_handle_environment_variables",
         "_handle_model_specific_adjustments", "spec_info.py:SpeculativeAlgorithm"),
    ),
    # Size-neutral changes inside releases that differ for other reasons.
    Equivalent(
        "sglang", "0.5.14", "0.5.15",
        "Mamba2StateShape carries num_k_heads_per_tp as metadata: the shapes are unchanged",
        ("Mamba2StateShape.create",),
    ),
    Equivalent(
        "sglang", "0.5.15.post1", "0.5.16",
        "Mamba2StateShape carries conv_shard_groups as metadata and the TP size is read through "
        "get_parallel(): the shapes are unchanged",
        ("Mamba2StateShape.create", "Qwen3NextConfig.mamba2_cache_params",
         "NemotronHConfig.mamba2_cache_params", "Lfm2Config.mamba2_cache_params"),
    ),
    Equivalent(
        "sglang", "0.5.21", "0.5.22",
        "the state is sharded over linear_attn_tp_size(), the attention-TP size unless "
        "--enable-cp-tp-group-sharing (new in 0.5.22) is on",
        ("Qwen3NextConfig.mamba2_cache_params",),
    ),
    Equivalent(
        "vllm", "0.15.1", "0.16.0",
        "GDN temporal state shape transposed (num_v_heads/tp, head_v_dim, head_k_dim): same "
        "bytes; log wording for POWER / S390X / RISC-V CPUs; the free-memory assertion allows "
        "equality; encoder profiling skipped only for embedding-only multimodal input; LoRA, "
        "kernel-config and speculative parallel-drafting options; the wording of GPTQ's 4-bit "
        "kernel warning",
        ("gated_delta_net_state_shape", "_set_default_chunked_prefill_and_prefix_caching_args",
         "Worker.determine_available_memory", "GPUModelRunner.profile_run",
         "GPUModelRunner.load_model", "EngineArgs.create_engine_config", "SpeculativeConfig",
         "GPTQConfig.__init__"),
    ),
    Equivalent(
        "vllm", "0.20.2", "0.21.0",
        "TurboQuant KV cache for hybrids (servefit does not model TurboQuant); the CUDA-graph "
        "estimate is subtracted on CUDA as before (is_cuda() instead of not is_rocm()); an error "
        "for external-LB data parallel with dense models; speculative sampling options",
        ("Platform._align_hybrid_block_size", "Worker.determine_available_memory",
         "EngineArgs.create_engine_config", "SpeculativeConfig"),
    ),
)  # fmt: skip

# What a release's changes amount to, where they do split a profile (reviewed by hand from
# `--diff`): shown beside the changed functions in docs/engines/releases.md.
SUMMARY: dict[tuple[str, str], str] = {
    ("sglang", "0.5.19"): (
        "the arg_groups refactor: ServerArgs methods become hook functions "
        "(arg_groups/*_hook.py) and declarative overrides (arg_groups/overrides.py); "
        "sglang-releases.md says the formulas are those of 0.5.18, not verified here function "
        "by function"
    ),
    ("sglang", "0.5.21"): (
        "mostly refactors: the SWA request cap moved verbatim into "
        "pool_configurator.py:compute_swa_request_cap, parallel sizes read through "
        "get_parallel(), linear-attention specs looked up by hf_config (no in-tree spec enables "
        "extra_buffer beyond _MAMBA_EXTRA_BUFFER_ARCHS); not shown alike: hybrid-SWA MTP draft "
        "layer ids (layer_info), the explicit --swa-full-tokens-ratio tracking, MiniMax sparse "
        "indexer dtype and FP4 KV recipes in _compute_cell_size, ReplaySSM with KDA"
    ),
    ("sglang", "0.5.23"): (
        "differs from 0.5.22 only where max_running_requests < attn_dp_size (a max(1, ...) floor "
        "in resolve_max_num_reqs, _handle_max_mamba_cache and compute_swa_request_cap), in the "
        "MLA prefill-graph max_bs (min(8192, chunked_prefill_size)), in unified-memory fused "
        "draft pools, and in new validation errors (decode-side radix cache with speculative "
        "decoding under disaggregation, out-of-tree speculative algorithms, deterministic "
        "rejection sampling)"
    ),
    ("vllm", "0.13.0"): (
        "the KV-memory errors of check_enough_kv_cache_memory gain a documentation link (exact "
        "texts change); NemotronH gets a MODELS_CONFIG_MAP entry (an empty hook); the "
        "prefill-context-parallel defaults move out of the prefix-caching defaults"
    ),
    ("vllm", "0.19.0"): (
        "the peak-activation figure of the `--kv-cache-memory` suggestion line no longer adds "
        "the CUDA-graph estimate (matters with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1); "
        "hybrids turn calculate_kv_scales off"
    ),
    ("vllm", "0.22.0"): (
        "Qwen3ForCausalLM (dense, unquantized, not MoE) runs the V2 model runner by default "
        "(VllmConfig._is_default_v2_model_runner_model)"
    ),
    ("vllm", "0.23.0"): (
        "LlamaForCausalLM and MistralForCausalLM join the V2-runner defaults; KDA conv states "
        "fused into one (same bytes); the encoder CUDA-graph estimate (opt-in "
        "cudagraph_mm_encoder)"
    ),
    ("vllm", "0.24.0"): (
        "MiniMax-M1 is no longer served (_PREVIOUSLY_SUPPORTED_MODELS); the KV capacity lines "
        "come from get_kv_cache_capacity (same figures)"
    ),
    ("vllm", "0.25.0"): (
        "Qwen3 / Llama / Mistral leave the V2-runner defaults (V1 again); the KV budget loses "
        "the frontend multimodal GPU decoding reserve (0 by default: mm_ipc_gpu_memory_gb)"
    ),
    ("vllm", "0.26.0"): (
        "ModelConfig.is_prefix_caching_supported is true for hybrids (the default stays off); "
        "FlashInfer GDN on Blackwell no longer gated by the cu13 install check; opt-in startup "
        "plan (VLLM_ENABLE_STARTUP_PLAN)"
    ),
    ("vllm", "0.31.0"): (
        "decode CUDA-graph capture sizes gain max_num_seqs when it is at most the largest "
        "capture size (VllmConfig._set_cudagraph_sizes): graph estimate and capture lines "
        "change; the profiling run uses max_split_size_mb=20"
    ),
}

# The groups sglang-releases.md gives ("Groups that size alike"); vllm-releases.md gives none,
# its groups are implied by the releases its D-table names.
REFERENCE_GROUPS: dict[str, list[list[str]]] = {
    "sglang": [
        ["0.5.9"], ["0.5.10", "0.5.10.post1"], ["0.5.11", "0.5.12", "0.5.12.post1"],
        ["0.5.13", "0.5.13.post1"], ["0.5.14"], ["0.5.15", "0.5.15.post1"], ["0.5.16"],
        ["0.5.17"], ["0.5.18", "0.5.19"], ["0.5.20", "0.5.21"], ["0.5.22", "0.5.23"],
    ],
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The wheel cache


class CacheMiss(Exception):
    pass


def cache_dir(flag: str | None) -> Path:
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else DEFAULT_CACHE


def fetch(engine: str, version: str, cache: Path, offline: bool) -> Path:
    """<cache>/<engine>/<version>, holding <engine>/**.py; downloaded when missing."""
    root = cache / engine / version
    if (root / engine).is_dir():
        return root
    if offline:
        raise CacheMiss(f"{engine} {version} is not in {cache} (run without --offline to fetch it)")
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "-q", "-d", tmp, f"{engine}=={version}"]  # fmt: skip
        if subprocess.run(cmd, check=False).returncode != 0:
            raise CacheMiss(f"pip could not download {engine}=={version}")
        wheel = next(Path(tmp).glob("*.whl"))
        stage = Path(tmp) / "tree"
        with zipfile.ZipFile(wheel) as zf:
            # Only the Python sources: a vLLM wheel is ~340 MB, its .py files ~20 MB.
            zf.extractall(stage, [n for n in zf.namelist()
                                  if n.startswith(engine + "/") and n.endswith(".py")])  # fmt: skip
        stage.rename(root)
    return root


def release_trees(engine: str, versions: Iterable[str], cache: Path, offline: bool
                  ) -> Iterator[ReleaseTree]:  # fmt: skip
    memo = Memo()
    for version in versions:
        yield ReleaseTree(engine, version, fetch(engine, version, cache, offline), memo)


# ---------------------------------------------------------------------------------------------
# The report


@dataclass
class EngineReport:
    observed: Observed
    found: list[list[Change]]
    groups: list[Group]
    verdicts: list[Verdict]
    disagreements: list[str]

    @property
    def engine(self) -> str:
        return self.observed.engine


def analyse(
    engine: str,
    trees: list[ReleaseTree],
    cited: list[Citation],
    lineage: Iterable[Lineage],
    judgements: Iterable[Equivalent],
    reference_groups: list[list[str]] | None,
) -> EngineReport:
    versions = tuple(t.version for t in trees)
    files = frozenset().union(*(t.files for t in trees))
    items, unresolved = catalogue(engine, files, cited, lineage, NARROWED, catalog_architectures())
    observed = observe(engine, versions, trees, items, unresolved, NOT_SIZING)
    found = changes(observed)
    judgements = [j for j in judgements if j.engine == engine]
    groups, verdicts = group(versions, found, judgements)
    implied = reference_groups is None
    if implied:
        claimed = set().union(*(item.claimed for item in observed.items))
        reference_groups = implied_groups(versions, claimed)
    return EngineReport(
        observed, found, groups, verdicts,
        disagreements(observed, found, groups, verdicts, reference_groups, implied),
    )  # fmt: skip


def _fmt_groups(groups: list[Group]) -> str:
    return " · ".join("{" + ", ".join(g.releases) + "}" for g in groups)


def render_engine(report: EngineReport) -> list[str]:
    obs = report.observed
    name = {"sglang": "SGLang", "vllm": "vLLM"}.get(obs.engine, obs.engine)
    plan_n = sum(item.role == PLAN for item in obs.items)
    lines = [
        f"## {name} {obs.versions[0]} … {obs.versions[-1]}",
        "",
        f"{len(obs.items)} mirrored functions ({plan_n} plan, {len(obs.items) - plan_n} runtime), "
        f"{len(obs.versions)} releases.",
        "",
        f"Groups: {_fmt_groups(report.groups)}",
        "",
        "| release | profile | since the previous release |",
        "|---|---|---|",
    ]
    for v in report.verdicts:
        n_plan = sum(c.splits for c in v.changes)
        n_other = len(v.changes) - n_plan
        if v.joined_by == "first":
            why = "first release of the range"
        elif v.joined_by == "no change":
            why = "no plan function changed" + (f" ({n_other} moves / runtime)" if n_other else "")
        elif v.joined_by == "new group":
            why = f"**new profile**: {n_plan - len(v.judged)} plan functions changed"
        else:
            why = f"judged alike ({n_plan} plan functions changed, see below)"
        lines.append(f"| {v.version} | {v.group} | {why} |")
    lines += ["", f"### {name}: changes by release", ""]
    for v in report.verdicts:
        if not v.changes:
            continue
        head = {"new group": f"new profile {v.group}", "first": ""}.get(
            v.joined_by, f"joins {v.group}"
        )
        lines.append(f"**{v.version}** ({head})")
        if (obs.engine, v.version) in SUMMARY:
            lines.append(f"- in short: {SUMMARY[obs.engine, v.version]}")
        for c in v.changes:
            if c.splits and c.function not in v.judged:
                lines.append(f"- {c.describe()}")
        for reason in dict.fromkeys(v.judged.values()):
            names = [c.describe() for c in v.changes if v.judged.get(c.function) == reason]
            lines.append(f"- judged size-neutral: {reason} ({'; '.join(names)})")
        others = [c for c in v.changes if not c.splits]
        if others:
            lines.append(
                "- moves and runtime functions: "
                + "; ".join(
                    c.describe() + ("" if c.kind == MOVED else " (runtime)") for c in others
                )
            )
        lines.append("")
    demoted = [item.key for item in obs.items if item.key in NOT_SIZING]
    if demoted:
        lines += [f"### {name}: cited, but not sizing (listed as runtime)", ""]
        lines += [f"- `{key}`: {NOT_SIZING[key]}" for key in demoted] + [""]
    if report.disagreements:
        lines += [f"### {name}: where the reference page disagrees with the code", ""]
        lines += [f"- {d}" for d in report.disagreements] + [""]
    if obs.notes:
        lines += [f"### {name}: notes", ""] + [f"- {n}" for n in obs.notes] + [""]
    if obs.unresolved:
        lines += [f"### {name}: servefit citations that name nothing in any release", ""]
        lines += [
            f"- `{c.text}` ({c.source})"
            for c in sorted(set(obs.unresolved), key=lambda c: (c.text, c.source))
        ]
        lines.append("")
    return lines


def render_markdown(reports: list[EngineReport]) -> str:
    lines = [
        "# Engine releases: which share a profile",
        "",
        "Generated by `python tools/engine_releases.py --write` from the released wheels; "
        "edit the tool, not this page.",
        "",
        "Every engine function servefit mirrors (its `file.py:function` citations in "
        "src/servefit, plus the functions the release reference pages name) is parsed with "
        "`ast` in every release, normalised (docstrings, comments, formatting and annotations "
        "dropped) and hashed. A release joins the previous release's profile when no *plan* "
        "function changed (a function moved to another file is a move, not a change), or when "
        "the tool's table of judgements declares the pair alike, with its reason. Changes in "
        "*runtime* functions (cited only by doctor, launch, verify: log lines, startup) are "
        "listed but do not split profiles.",
        "",
    ]
    for report in reports:
        lines += render_engine(report)
    return "\n".join(lines).rstrip() + "\n"


def to_json(reports: list[EngineReport]) -> dict:
    out = {}
    for report in reports:
        obs = report.observed
        out[report.engine] = {
            "releases": list(obs.versions),
            "groups": [{"profile": g.profile, "releases": g.releases,
                        "changes": [asdict(c) for c in g.changes]} for g in report.groups],
            "releases_detail": [
                {"version": v.version, "profile": v.group, "joined_by": v.joined_by,
                 "changes": [asdict(c) | {"judged": v.judged.get(c.function)}
                             for c in v.changes]}
                for v in report.verdicts
            ],
            "functions": [
                {"function": item.key, "role": item.role, "refs": item.refs,
                 "cited_by": sorted(item.cited_by),
                 "found": {ver: (None if d is None else {"site": str(d.site), "digest": d.digest})
                           for ver, d in zip(obs.versions, row, strict=True)}}
                for item, row in zip(obs.items, obs.found, strict=True)
            ],
            "disagreements": report.disagreements,
            "notes": obs.notes,
            "unresolved": sorted({c.text for c in obs.unresolved}),
        }  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# Command line


def _where(engine: str, name: str, trees: list[ReleaseTree]) -> None:
    first = re.escape(name.split(".")[0])
    pattern = rf"(def|class)[[:space:]]+{first}\b|^[[:space:]]*{first}[[:space:]]*[:=]"
    for tree in trees:
        row = []
        grep = ["grep", "-rlE", "--include=*.py", pattern, str(tree.root / engine)]
        hits = subprocess.run(grep, capture_output=True, text=True, check=False).stdout
        for line in sorted(hits.splitlines()):
            path = Path(line).relative_to(tree.root).as_posix()
            d = tree.define(Site(path, name))
            if d:
                row.append(f"{d.site} [{d.digest}]")
        print(f"{tree.version:>13}  " + ("; ".join(row) or "-"))
        tree.release()


def _diff(report: EngineReport, version: str, name: str) -> None:
    """Every mirrored function matching `name` ("" = all) that changed in `version`."""
    obs = report.observed
    if version == "all":
        for v in obs.versions[1:]:
            print(f"=== {obs.engine} {v}")
            _diff(report, v, name)
        return
    r = obs.versions.index(version)
    for item, row in zip(obs.items, obs.found, strict=True):
        if name not in item.key or r == 0:
            continue
        before, after = row[r - 1], row[r]
        if (before and before.digest) == (after and after.digest):
            continue
        a = before.source.splitlines() if before else []
        b = after.source.splitlines() if after else []
        label_a = f"{obs.versions[r - 1]}:{before.site if before else '-'}"
        label_b = f"{version}:{after.site if after else '-'}"
        print("\n".join(difflib.unified_diff(a, b, label_a, label_b, lineterm="")))


def registry_check(report: EngineReport, registered: dict[str, str]) -> list[str]:
    """Where servefit's registry (release -> profile id) and the evidence disagree: releases of
    the range not registered, one group spread over several profiles, one profile over groups."""
    out = []
    versions = report.observed.versions
    missing = [v for v in versions if v not in registered]
    if missing:
        out.append(f"not registered: {', '.join(missing)}")
    by_profile: dict[str, set[str]] = {}
    for g in report.groups:
        ids = sorted({registered[v] for v in g.releases if v in registered})
        if len(ids) > 1:
            out.append(f"group {{{', '.join(g.releases)}}} is spread over profiles {ids}")
        for pid in ids:
            by_profile.setdefault(pid, set()).add(g.profile)
    for pid, groups in sorted(by_profile.items()):
        if len(groups) > 1:
            out.append(f"profile {pid} serves releases of groups {sorted(groups, key=versions.index)}"
                       " whose code differs")  # fmt: skip
    return out


def _registered() -> dict[str, dict[str, str]]:
    """servefit's registry of releases (engines/registry.py:RELEASES)."""
    sys.path.insert(0, str(SRC.parent))
    registry = importlib.import_module("servefit.engines.registry")
    return registry.RELEASES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=ENGINES, action="append", help="default: both")
    ap.add_argument("--cache", help=f"wheel cache (default ${CACHE_ENV} or {DEFAULT_CACHE})")
    ap.add_argument("--offline", action="store_true", help="never download; fail on a miss")
    ap.add_argument("--json", action="store_true", help="JSON instead of markdown")
    ap.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(REPO)}")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed page is stale")
    ap.add_argument("--registry", action="store_true",
                    help="compare servefit's release registry with the evidence; exit 1 if apart")  # fmt: skip
    ap.add_argument("--where", nargs=2, metavar=("ENGINE", "NAME"),
                    help="list, per release, the files defining NAME")  # fmt: skip
    ap.add_argument("--diff", nargs=3, metavar=("ENGINE", "VERSION", "NAME"),
                    help="normalised diff of the mirrored functions matching NAME "
                         "(VERSION 'all': every release; NAME '': every function)")  # fmt: skip
    args = ap.parse_args(argv)
    cache = cache_dir(args.cache)
    try:
        if args.where:
            engine, name = args.where
            _where(engine, name, list(release_trees(engine, RELEASES[engine], cache,
                                                     args.offline)))  # fmt: skip
            return 0
        engines = [args.diff[0]] if args.diff else (args.engine or list(ENGINES))
        cited = citations()
        reports = [
            analyse(engine, list(release_trees(engine, RELEASES[engine], cache, args.offline)),
                    cited, LINEAGE, EQUIVALENT, REFERENCE_GROUPS.get(engine))
            for engine in engines
        ]  # fmt: skip
    except CacheMiss as exc:
        print(f"engine_releases: error: {exc}", file=sys.stderr)
        return 2
    if args.diff:
        _diff(reports[0], args.diff[1], args.diff[2])
        return 0
    if args.registry:
        registered = _registered()
        problems = [f"{r.engine}: {line}" for r in reports
                    for line in registry_check(r, registered.get(r.engine, {}))]  # fmt: skip
        print("\n".join(problems) or "the registry matches the evidence")
        return int(bool(problems))
    text = json.dumps(to_json(reports), indent=1) if args.json else render_markdown(reports)
    if args.check:
        stale = not DOC.exists() or DOC.read_text(encoding="utf-8") != text
        print(f"{DOC.relative_to(REPO)} is {'stale' if stale else 'current'}")
        return int(stale)
    if args.write:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text, encoding="utf-8")
        print(f"wrote {DOC.relative_to(REPO)}")
        return 0
    sys.stdout.write(text + ("\n" if args.json else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
