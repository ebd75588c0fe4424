#!/usr/bin/env python3
"""Extract vLLM's `vllm serve` CLI flags from an unzipped wheel, statically.

    python tools/extract_vllm_flags.py /work/wheels/vllm-0.33.0  [-o out.json]
    python tools/extract_vllm_flags.py --all /work/wheels           # every vllm-<version>/ there

Nothing from the wheel is imported (it needs torch): the sources are walked with `ast`.
`vllm serve` and `python -m vllm.entrypoints.openai.api_server` build their parser with
`make_arg_parser` (vllm/entrypoints/openai/cli_args.py up to 0.2x, vllm/entrypoints/common/
cli_args.py in 0.33): a few hand-written arguments, then `FrontendArgs.add_cli_args` and
`AsyncEngineArgs.add_cli_args` -> `EngineArgs.add_cli_args` (vllm/engine/arg_utils.py). Most
arguments there are `group.add_argument("--flag", **get_kwargs(SomeConfig)["field"])`, where
`get_kwargs` -> `_compute_kwargs` derives argparse kwargs from the config dataclass field's type
annotation and default. That derivation is mirrored here (`field_kwargs`), with the
annotation's type aliases, `Literal`s and nested config dataclasses resolved through the
wheel's own imports, and the in-place edits `add_cli_args` makes to those kwargs
(`x_kwargs["f"]["type"] = ...`, `{**x_kwargs["f"], "default": None}`, `del ...["nargs"]`)
applied in order.

Output: a JSON list, one object per argparse action, in registration order (a
BooleanOptionalAction gives two: `--flag` kind "bool" and `--no-flag` kind "bool_false"):

    names          option strings, the primary first ("model_tag" for the positional)
    dest           the attribute argparse stores into (EngineArgs / FrontendArgs field)
    kind           "str" | "int" | "float" | "bool" | "bool_false" | "json" | "list"
    choices        argparse choices, or null (a Literal next to `str` gives none, as in vLLM)
    default        the argparse default when it is a literal, else its source text
    help           first paragraph of the field docstring / help text
    item_kind      element kind of a "list"
    value_parser   the engine's type= callable when not plain: "human_readable_int",
                   "human_readable_int_or_auto", "union_dict_and_str", "dataclass_json",
                   "lower_underscore" (lambda s: s.lower().replace("-", "_")), "device_ids"
    optional       the engine wraps the type in `optional_type` ("" / "None" -> None)
    nargs, const, action (argparse action when not store / store_true / store_false)
    positional     true for `model_tag`
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).resolve().parents[1] / "src" / "servefit" / "engines" / "vllm"

# `_compute_kwargs` special-cases these int fields by name.
_HUMAN_INT_OR_AUTO = {"max_model_len"}
_HUMAN_INT = {"max_num_batched_tokens", "kv_cache_memory_bytes", "safetensors_prefetch_block_size"}
_BUILTINS = {"bool", "int", "float", "str", "dict", "list", "tuple", "set", "bytes"}
_CLI_ARGS_MODULES = (
    "vllm.entrypoints.launchers.cli_args",  # 0.29.0 - 0.32.0
    "vllm.entrypoints.common.cli_args",
    "vllm.entrypoints.openai.cli_args",
)


class Unresolvable(Exception):
    pass


class _Bind(ast.NodeTransformer):
    def __init__(self, names: dict[str, ast.expr]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self.names.get(node.id, node)


def _unroll(stmt: ast.For) -> list[list[ast.stmt]] | None:
    """The loop's body once per element of a literal list/tuple iterable, its target names bound
    to the element's values; None when the loop is not over a literal."""
    import copy

    if not isinstance(stmt.iter, (ast.List, ast.Tuple)):
        return None
    targets = stmt.target.elts if isinstance(stmt.target, ast.Tuple) else [stmt.target]
    if not all(isinstance(t, ast.Name) for t in targets):
        return None
    out = []
    for element in stmt.iter.elts:
        values = element.elts if isinstance(element, ast.Tuple) else [element]
        if len(values) != len(targets):
            return None
        names = {t.id: v for t, v in zip(targets, values, strict=True)}
        out.append([_Bind(names).visit(copy.deepcopy(b)) for b in stmt.body])
    return out


# ---------------------------------------------------------------------------------------------
# Source index
# ---------------------------------------------------------------------------------------------


@dataclass
class Module:
    name: str
    tree: ast.Module
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local -> (mod, attr)
    bindings: dict[str, ast.AST] = field(default_factory=dict)  # module-level assignments
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)


class Wheel:
    def __init__(self, root: Path):
        self.root = root
        self._cache: dict[str, Module | None] = {}

    def version(self) -> str:
        path = self.root / "vllm" / "_version.py"
        for node in ast.walk(ast.parse(path.read_text())):  # `__version__ = version = '0.24.0'`
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
                and isinstance(node.value, ast.Constant)
            ):
                return str(node.value.value)
        raise SystemExit(f"{path}: no __version__")

    def module(self, name: str) -> Module | None:
        if name in self._cache:
            return self._cache[name]
        base = self.root.joinpath(*name.split("."))
        path = (
            base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        )
        mod = None
        if path.is_file():
            mod = Module(name, ast.parse(path.read_text(encoding="utf-8")))
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            _index_body(mod, mod.tree.body, package)
        self._cache[name] = mod
        return mod

    def lookup(self, mod: Module, name: str, depth: int = 0) -> tuple[Module, Any]:
        """Resolve a module-level name: (module, ClassDef | bound expression | ("module", m))."""
        if depth > 20:
            raise Unresolvable(name)
        if name in mod.classes:
            return mod, mod.classes[name]
        if name in mod.bindings:
            return mod, mod.bindings[name]
        if name in mod.imports:
            src, attr = mod.imports[name]
            if attr is None:
                return mod, ("module", src)
            target = self.module(src)
            if target is None:
                sub = self.module(f"{src}.{attr}")
                if sub is not None:
                    return mod, ("module", sub.name)
                raise Unresolvable(f"{src}.{attr}")
            try:
                return self.lookup(target, attr, depth + 1)
            except Unresolvable:
                sub = self.module(f"{src}.{attr}")
                if sub is not None:
                    return mod, ("module", sub.name)
                raise
        raise Unresolvable(f"{mod.name}.{name}")

    def deref(self, mod: Module, node: ast.AST) -> tuple[Module, Any]:
        """Resolve a Name / Attribute expression to what it names."""
        if isinstance(node, ast.Name):
            return self.lookup(mod, node.id)
        if isinstance(node, ast.Attribute):
            owner_mod, owner = self.deref(mod, node.value)
            if isinstance(owner, tuple) and owner[0] == "module":
                target = self.module(owner[1])
                if target is None:
                    raise Unresolvable(ast.unparse(node))
                return self.lookup(target, node.attr)
            raise Unresolvable(ast.unparse(node))
        raise Unresolvable(ast.unparse(node))


def _index_body(mod: Module, body: list[ast.stmt], package: str) -> None:
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom):
            src = stmt.module or ""
            if stmt.level:
                parts = package.split(".")
                parts = parts[: len(parts) - stmt.level + 1]
                src = ".".join(parts + ([stmt.module] if stmt.module else []))
            for alias in stmt.names:
                mod.imports[alias.asname or alias.name] = (src, alias.name)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    mod.imports[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    mod.imports.setdefault(top, (top, None))
        elif isinstance(stmt, ast.ClassDef):
            mod.classes[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    mod.bindings[target.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            mod.bindings[stmt.target.id] = stmt.value
        elif type(stmt).__name__ == "TypeAlias":  # `type X = ...` (3.12)
            mod.bindings[stmt.name.id] = stmt.value  # type: ignore[attr-defined]
        elif isinstance(stmt, ast.If):  # `if TYPE_CHECKING:` imports and guarded aliases
            _index_body(mod, stmt.body, package)
            _index_body(mod, stmt.orelse, package)
        elif isinstance(stmt, ast.Try):
            _index_body(mod, stmt.body, package)


# ---------------------------------------------------------------------------------------------
# Type hints (mirror of arg_utils.get_type_hints on the static annotation)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hint:
    kind: str  # builtin | literal | none | dataclass | other | collection | dict
    name: str = ""
    values: tuple = ()
    elem: tuple[Hint, ...] = ()  # collection element hints (a union flattened)
    ellipsis: bool = False
    arity: int = 0


def _subscript_args(node: ast.Subscript) -> list[ast.AST]:
    sl = node.slice
    return list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]


def _head(wheel: Wheel, mod: Module, node: ast.AST) -> tuple[str, Module, Any]:
    """(short name, defining module, target) of a type expression's head."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Constant) and node.value is None:
        return "None", mod, None
    if isinstance(node, (ast.Name, ast.Attribute)):
        short = node.id if isinstance(node, ast.Name) else node.attr
        if short in _BUILTINS or short in {"None", "Any"}:
            return short, mod, None
        try:
            owner, target = wheel.deref(mod, node)
        except Unresolvable:
            return short, mod, None
        return short, owner, target
    return type(node).__name__, mod, None


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for dec in cls.decorator_list:
        name = ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)
        if name.split(".")[-1] in ("config", "dataclass"):
            return True
    return False


def type_hints(wheel: Wheel, mod: Module, node: ast.AST | None) -> set[Hint]:
    if node is None:
        return {Hint("other", "Any")}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return type_hints(wheel, mod, ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Constant) and node.value is None:
        return {Hint("none")}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return type_hints(wheel, mod, node.left) | type_hints(wheel, mod, node.right)
    short, owner, target = _head(wheel, mod, node)
    if isinstance(node, ast.Subscript):
        args = _subscript_args(node)
        if short == "Annotated":
            return type_hints(wheel, mod, args[0])
        if short in ("Union",):
            out: set[Hint] = set()
            for a in args:
                out |= type_hints(wheel, mod, a)
            return out
        if short == "Optional":
            return type_hints(wheel, mod, args[0]) | {Hint("none")}
        if short == "Literal":
            return {Hint("literal", values=tuple(_literal_values(wheel, mod, args)))}
        if short in ("list", "List", "tuple", "Tuple", "set", "Set", "Sequence"):
            coll = {"List": "list", "Tuple": "tuple", "Set": "set", "Sequence": "list"}.get(
                short, short
            )
            ellipsis = any(isinstance(a, ast.Constant) and a.value is Ellipsis for a in args)
            elems = [a for a in args if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
            elem: set[Hint] = set()
            for a in elems[:1]:
                elem |= type_hints(wheel, mod, a)
            return {
                Hint(
                    "collection",
                    coll,
                    elem=tuple(sorted(elem, key=repr)),
                    ellipsis=ellipsis,
                    arity=len(elems),
                )
            }
        if short in ("dict", "Dict", "Mapping"):
            return {Hint("dict")}
        # A subscripted alias or generic class: judge by its head.
        return type_hints(wheel, mod, node.value)
    if short in _BUILTINS:
        if short == "dict":
            return {Hint("dict")}
        if short in ("list", "tuple", "set"):
            return {Hint("collection", short)}
        return {Hint("builtin", short)}
    if short == "None":
        return {Hint("none")}
    if isinstance(target, ast.ClassDef):
        return {Hint("dataclass" if _is_dataclass(target) else "other", target.name)}
    if target is not None and not isinstance(target, tuple) and isinstance(target, ast.AST):
        # A type alias bound at module level: resolve it where it was defined.
        return type_hints(wheel, owner, target)
    return {Hint("other", short)}


def _literal_values(wheel: Wheel, mod: Module, args: list[ast.AST]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if isinstance(a, ast.Constant):
            out.append(a.value)
            continue
        if isinstance(a, ast.Subscript) and _head(wheel, mod, a)[0] == "Literal":
            out.extend(_literal_values(wheel, mod, _subscript_args(a)))
            continue
        owner, target = wheel.deref(mod, a)
        if isinstance(target, ast.Subscript):  # Literal alias used inside Literal[...]
            out.extend(_literal_values(wheel, owner, _subscript_args(target)))
        elif isinstance(target, ast.Constant):
            out.append(target.value)
        else:
            raise Unresolvable(ast.unparse(a))
    return out


# ---------------------------------------------------------------------------------------------
# Config dataclass fields -> argparse kwargs (mirror of arg_utils._compute_kwargs)
# ---------------------------------------------------------------------------------------------


def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return {"source": ast.unparse(node)}


def _field_default(value: ast.AST | None) -> Any:
    """The default of `x: T = value`, unwrapping pydantic Field(...) / dataclasses.field(...)."""
    if value is None:
        return None
    if isinstance(value, ast.Call):
        fname = ast.unparse(value.func).split(".")[-1]
        if fname in ("Field", "field"):
            for kw in value.keywords:
                if kw.arg == "default":
                    return _literal(kw.value)
                if kw.arg == "default_factory":
                    fac = kw.value
                    if isinstance(fac, ast.Name) and fac.id in ("list", "dict", "set"):
                        return {"list": [], "dict": {}, "set": []}[fac.id]
                    if isinstance(fac, ast.Lambda):
                        return _literal(fac.body)
                    return {"source": ast.unparse(fac) + "()"}
            if value.args:
                return _literal(value.args[0])
            return None
    return _literal(value)


def _docstrings(cls: ast.ClassDef) -> dict[str, str]:
    docs: dict[str, str] = {}
    body = cls.body
    for i, stmt in enumerate(body[:-1]):
        nxt = body[i + 1]
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[stmt.target.id] = " ".join(nxt.value.value.strip().split("\n\n")[0].split())
    return docs


def class_fields(
    wheel: Wheel, mod: Module, cls: ast.ClassDef
) -> list[tuple[str, ast.AST, ast.AST | None, Module, str]]:
    """Dataclass fields in `dataclasses.fields` order: inherited first, then own."""
    fields: dict[str, tuple[str, ast.AST, ast.AST | None, Module, str]] = {}
    for base in cls.bases:
        try:
            owner, target = wheel.deref(mod, base)
        except Unresolvable:
            continue
        if isinstance(target, ast.ClassDef):
            for f in class_fields(wheel, owner, target):
                fields[f[0]] = f
    docs = _docstrings(cls)
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if _head(wheel, mod, stmt.annotation)[0] in ("ClassVar", "InitVar"):
                continue
            name = stmt.target.id
            fields[name] = (name, stmt.annotation, stmt.value, mod, docs.get(name, ""))
    return list(fields.values())


def field_kwargs(
    wheel: Wheel, mod: Module, name: str, ann: ast.AST, value: ast.AST | None, doc: str
) -> dict[str, Any]:
    hints = type_hints(wheel, mod, ann)
    kinds = {h.kind for h in hints}
    builtin = {h.name for h in hints if h.kind == "builtin"}
    kw: dict[str, Any] = {"default": _field_default(value), "help": doc}
    has_str = "str" in builtin
    non_builtin = bool(kinds & {"other", "dataclass", "literal"})
    if "dataclass" in kinds:
        kw.update(kind="json", value_parser="dataclass_json")
    elif hints == {Hint("builtin", "bool"), Hint("builtin", "str"), Hint("none")}:
        kw.update(kind="str", nargs="?", const=True)
    elif "bool" in builtin:
        kw.update(kind="bool", action="BooleanOptionalAction")
    elif "literal" in kinds:
        lit = next(h for h in hints if h.kind == "literal")
        ktype = {int: "int", float: "float", str: "str", bool: "str"}[type(lit.values[0])]
        kw["kind"] = ktype
        if not has_str:
            kw["choices"] = sorted(lit.values)
    elif "collection" in kinds:
        coll = next(
            h
            for h in sorted(
                hints,
                key=lambda h: (
                    ("tuple", "list", "set").index(h.name)
                    if h.name in ("tuple", "list", "set")
                    else 9
                ),
            )
            if h.kind == "collection"
        )
        elem_builtin = {h.name for h in coll.elem if h.kind == "builtin"}
        elem_kinds = {h.kind for h in coll.elem}
        if len(coll.elem) > 1:
            item = "str"  # `list[int | str]`: vLLM asserts str is a member and uses str
        elif "int" in elem_builtin:
            item = "int"
        elif "float" in elem_builtin:
            item = "float"
        elif "literal" in elem_kinds:
            lit = next(h for h in coll.elem if h.kind == "literal")
            item = {int: "int", float: "float"}.get(type(lit.values[0]), "str")
        else:
            item = "str"
        nargs: Any = "+" if coll.name != "tuple" or coll.ellipsis else coll.arity
        kw.update(kind="list", item_kind=item, nargs=nargs)
    elif "int" in builtin:
        kw["kind"] = "int"
        if name in _HUMAN_INT_OR_AUTO:
            kw["value_parser"] = "human_readable_int_or_auto"
        elif name in _HUMAN_INT:
            kw["value_parser"] = "human_readable_int"
    elif "float" in builtin:
        kw["kind"] = "float"
    elif "dict" in kinds and (has_str or non_builtin):
        kw.update(kind="json", value_parser="union_dict_and_str")
    elif "dict" in kinds:
        kw["kind"] = "json"
    elif has_str or non_builtin:
        kw["kind"] = "str"
    else:
        raise SystemExit(f"{mod.name}: unsupported type {ast.unparse(ann)} for {name}")
    if "none" in kinds and "bool" not in builtin:
        kw["optional"] = True
        if kw.get("choices"):
            kw["choices"] = [*kw["choices"], "None"]
    return kw


# ---------------------------------------------------------------------------------------------
# add_cli_args walkers
# ---------------------------------------------------------------------------------------------


def _callable_parser(node: ast.AST) -> dict[str, Any]:
    """kwargs for an explicit `type=` / value override."""
    text = ast.unparse(node)
    if text in ("int", "float", "str"):
        return {"kind": text, "value_parser": None}
    if text in ("json.loads", "parse_type(json.loads)"):
        return {"kind": "json", "value_parser": None}
    if text == "optional_type(json.loads)":
        return {"kind": "json", "value_parser": None, "optional": True}
    if text == "optional_type(str)":
        return {"kind": "str", "value_parser": None, "optional": True}
    if "lower().replace('-', '_')" in text:
        return {"value_parser": "lower_underscore"}
    if "device_id" in text:
        return {"kind": "list", "item_kind": "str", "value_parser": "device_ids"}
    return {"kind": "str", "value_parser": None}


def _action_name(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text.split(".")[-1].strip("'\"")


class CliWalker:
    """Replays one add_cli_args body: kwargs tables, in-place edits, add_argument calls."""

    def __init__(self, wheel: Wheel, mod: Module):
        self.wheel, self.mod = wheel, mod
        self.tables: dict[str, dict[str, dict[str, Any]]] = {}  # var -> field -> kwargs
        self.aliases: dict[str, tuple[str, str]] = {}  # var -> (table, field)
        self.entries: list[dict[str, Any]] = []

    def table_for(self, cls_name: str, cls_mod: Module | None = None) -> dict[str, dict[str, Any]]:
        owner, cls = self.wheel.lookup(cls_mod or self.mod, cls_name)
        if not isinstance(cls, ast.ClassDef):
            raise SystemExit(f"{cls_name} is not a class")
        return {
            name: field_kwargs(self.wheel, fmod, name, ann, value, doc)
            for name, ann, value, fmod, doc in class_fields(self.wheel, owner, cls)
        }

    def _kwargs_ref(self, node: ast.AST) -> dict[str, Any] | None:
        """`x_kwargs["f"]` or an alias name -> that kwargs dict."""
        if isinstance(node, ast.Name) and node.id in self.aliases:
            t, f = self.aliases[node.id]
            return self.tables[t][f]
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in self.tables
        ):
            key = ast.literal_eval(node.slice)
            return self.tables[node.value.id][key]
        return None

    def walk(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.For) and (unrolled := _unroll(stmt)) is not None:
            # `for arg, type in [("--flag", str), ...]: group.add_argument(arg, type=type, ...)`
            # (0.11.x's deprecated --guided-decoding-* flags): one pass per literal element
            for body in unrolled:
                self.walk(body)
            return
        if isinstance(stmt, (ast.If, ast.For, ast.With, ast.Try)):
            # Every branch registers flags the serve parser can see (`if not (serve and
            # --help)` guards only --model); walk all of them.
            for block in ("body", "orelse", "finalbody"):
                self.walk(getattr(stmt, block, []) or [])
            for handler in getattr(stmt, "handlers", []) or []:
                self.walk(handler.body)
            return
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "get_kwargs":
                arg = value.args[0]
                if isinstance(target, ast.Name) and isinstance(arg, ast.Name):
                    self.tables[target.id] = self.table_for(arg.id)
                    return
            if (  # x = get_kwargs(Cls)["field"]
                isinstance(target, ast.Name)
                and isinstance(value, ast.Subscript)
                and isinstance(value.value, ast.Call)
                and ast.unparse(value.value.func) == "get_kwargs"
            ):
                table = f"_{target.id}_table"
                self.tables[table] = self.table_for(value.value.args[0].id)  # type: ignore[attr-defined]
                self.aliases[target.id] = (table, ast.literal_eval(value.slice))
                return
            if isinstance(target, ast.Name):
                ref = self._kwargs_ref(value) if isinstance(value, ast.Subscript) else None
                if ref is not None:
                    t = value.value.id  # type: ignore[attr-defined]
                    self.aliases[target.id] = (t, ast.literal_eval(value.slice))  # type: ignore[attr-defined]
                return
            if isinstance(target, ast.Subscript):  # x_kwargs["f"]["key"] = value
                ref = self._kwargs_ref(target.value)
                if ref is not None:
                    self.edit(ref, ast.literal_eval(target.slice), value)
            return
        if isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript):
                    ref = self._kwargs_ref(target.value)
                    if ref is not None:
                        ref.pop(ast.literal_eval(target.slice), None)
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
                self.add_argument(call)
            return
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
                self.add_argument(call)

    def edit(self, ref: dict[str, Any], key: str, value: ast.AST) -> None:
        if key == "type":
            ref.update(_callable_parser(value))
        elif key in ("default", "choices", "nargs", "const"):
            ref[key] = _literal(value)
        elif key == "action":
            name = _action_name(value)
            ref["action"] = name
            if name == "append":
                ref["kind"] = ref.get("kind", "str")
        elif key == "flags":
            ref["flags"] = _literal(value)
        # metavar / help do not change what parses

    def add_argument(self, call: ast.Call) -> None:
        names = [ast.literal_eval(a) for a in call.args]
        kw: dict[str, Any] = {}
        explicit: dict[str, ast.AST] = {}
        for k in call.keywords:
            if k.arg is None:
                src = k.value
                if isinstance(src, ast.Dict):  # **{**x_kwargs["f"], "default": None}
                    for dk, dv in zip(src.keys, src.values, strict=True):
                        if dk is None:
                            ref = self._kwargs_ref(dv)
                            if ref is None:
                                raise SystemExit(f"cannot read {ast.unparse(dv)}")
                            kw.update(json.loads(json.dumps(ref)))
                        else:
                            explicit[ast.literal_eval(dk)] = dv
                else:
                    ref = self._kwargs_ref(src)
                    if ref is None:
                        raise SystemExit(f"cannot read **{ast.unparse(src)}")
                    kw.update(json.loads(json.dumps(ref)))
            else:
                explicit[k.arg] = k.value
        for key, node in explicit.items():
            if key == "type":
                kw.update(_callable_parser(node))
            elif key == "action":
                kw["action"] = _action_name(node)
            elif (
                key == "choices"
                and isinstance(node, ast.Call)
                and ast.unparse(node.func) == "get_args"
            ):
                owner, alias = self.wheel.deref(self.mod, node.args[0])
                kw[key] = _literal_values(self.wheel, owner, _subscript_args(alias))
            elif key in ("default", "choices", "nargs", "const", "dest", "deprecated"):
                kw[key] = _literal(node)
            elif key == "help":
                kw["help"] = _literal(node) if isinstance(node, ast.Constant) else ast.unparse(node)
        self.entries.extend(make_entries(names, kw))


def _dest(names: list[str], kw: dict[str, Any]) -> str:
    if kw.get("dest"):
        return kw["dest"]
    longs = [n for n in names if n.startswith("--")]
    first = longs[0] if longs else names[0]
    return first.lstrip("-").replace("-", "_")


def make_entries(names: list[str], kw: dict[str, Any]) -> list[dict[str, Any]]:
    names = list(kw.pop("flags", None) or []) + names
    action = kw.get("action")
    dest = _dest(names, kw)
    help_ = kw.get("help") or ""
    if isinstance(help_, dict):
        help_ = help_.get("source", "")
    help_ = " ".join(str(help_).split("\n\n")[0].split())
    base = {
        "names": names,
        "dest": dest,
        "kind": kw.get("kind", "str"),
        "choices": kw.get("choices"),
        "default": kw.get("default"),
        "help": help_,
        "item_kind": kw.get("item_kind"),
        "value_parser": kw.get("value_parser"),
        "optional": bool(kw.get("optional")),
        "nargs": kw.get("nargs"),
        "const": kw.get("const"),
        "action": None,
        "deprecated": bool(kw.get("deprecated")),
        "positional": not names[0].startswith("-"),
    }
    if action == "BooleanOptionalAction":
        yes = dict(base, kind="bool", action="BooleanOptionalAction", choices=None)
        no_names = ["--no-" + n[2:] for n in names if n.startswith("--")]
        no = dict(yes, names=no_names, kind="bool_false")
        return [yes, no]
    if action == "store_true":
        return [dict(base, kind="bool", default=bool(base["default"]))]
    if action == "store_false":
        return [dict(base, kind="bool_false")]
    if action not in (None, "store"):
        base["action"] = action
    return [base]


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return stmt
    raise SystemExit(f"{cls.name}.{name} not found")


def _frontend_entries(wheel: Wheel, mod: Module) -> list[dict[str, Any]]:
    """FrontendArgs.add_cli_args: every field as --field-name, after _customize_cli_kwargs."""
    walker = CliWalker(wheel, mod)
    walker.tables["frontend_kwargs"] = walker.table_for("FrontendArgs")
    chain = []
    name: str | None = "FrontendArgs"
    while name:
        cls = mod.classes[name]
        chain.append(cls)
        name = next(
            (b.id for b in cls.bases if isinstance(b, ast.Name) and b.id in mod.classes), None
        )
    for cls in reversed(chain):  # each override calls super() first
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "_customize_cli_kwargs":
                walker.walk(stmt.body)
    out: list[dict[str, Any]] = []
    for key, kw in walker.tables["frontend_kwargs"].items():
        out.extend(make_entries(["--" + key.replace("_", "-")], dict(kw)))
    return out


def extract(root: Path) -> tuple[str, list[dict[str, Any]]]:
    wheel = Wheel(root)
    cli_mod = next(
        (
            m
            for m in map(wheel.module, _CLI_ARGS_MODULES)
            if m
            and "make_arg_parser" in {f.name for f in m.tree.body if isinstance(f, ast.FunctionDef)}
        ),
        None,
    )
    if cli_mod is None:
        raise SystemExit(f"{root}: make_arg_parser not found in {_CLI_ARGS_MODULES}")
    make = next(
        f
        for f in cli_mod.tree.body
        if isinstance(f, ast.FunctionDef) and f.name == "make_arg_parser"
    )
    entries: list[dict[str, Any]] = []
    head = CliWalker(wheel, cli_mod)
    for stmt in make.body:
        if isinstance(stmt, ast.Assign) and "add_cli_args" in ast.unparse(stmt.value):
            break  # the hand-written arguments come first
        head.statement(stmt)
    entries += head.entries
    entries += _frontend_entries(wheel, cli_mod)

    arg_utils = wheel.module("vllm.engine.arg_utils")
    if arg_utils is None:
        raise SystemExit(f"{root}: vllm/engine/arg_utils.py not found")
    engine = CliWalker(wheel, arg_utils)
    engine.walk(_method(arg_utils.classes["EngineArgs"], "add_cli_args").body)
    entries += engine.entries
    asyncw = CliWalker(wheel, arg_utils)
    asyncw.walk(_method(arg_utils.classes["AsyncEngineArgs"], "add_cli_args").body)
    entries += asyncw.entries

    seen: dict[str, str] = {}
    for e in entries:
        for n in e["names"]:
            if n in seen and seen[n] != e["dest"]:
                raise SystemExit(f"option {n} registered twice ({seen[n]}, {e['dest']})")
            seen[n] = e["dest"]
    return wheel.version(), entries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", type=Path, help="unzipped wheel root (contains vllm/)")
    ap.add_argument("-o", "--out", type=Path, help="output JSON file (default: the package's)")
    ap.add_argument("--all", action="store_true", help="WHEEL holds vllm-<version>/ folders")
    args = ap.parse_args(argv)
    roots = sorted(p for p in args.wheel.glob("vllm-*") if p.is_dir()) if args.all else [args.wheel]
    for root in roots:
        version, entries = extract(root)
        out = args.out or OUT_DIR / f"flags_{version.replace('.', '_')}.json"
        out.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n")
        print(f"{root.name}: {len(entries)} flags -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
