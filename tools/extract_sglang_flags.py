#!/usr/bin/env python3
"""Extract SGLang's server CLI flags from an unzipped wheel, statically.

    python tools/extract_sglang_flags.py /work/wheels/sglang-0.5.9  [-o out.json]
    python tools/extract_sglang_flags.py --all /work/wheels          # writes every known version

Nothing from the wheel is imported (no torch, no msgspec): the source is walked with `ast` and
the few expressions the CLI builder relies on (literals, module constants, dataclass defaults,
`list(X.keys())`, f-strings) are evaluated by a tiny static evaluator. Whatever it cannot
evaluate is kept as source text (defaults, help) or recorded as dynamic (choices).

Two layouts are understood:

* 0.5.9-style: `ServerArgs.add_cli_args` in sglang/srt/server_args.py is a long list of
  `parser.add_argument(...)` calls whose defaults read the `ServerArgs` dataclass;
  `ServerArgs.from_cli_args` then renames a few argparse dests (`tensor_parallel_size` ->
  `tp_size`), which is applied here so `dest` is always the ServerArgs attribute.
* 0.5.23-style: input fields live on msgspec Structs in sglang/srt/arg_groups/fields/ as
  `A[T, "help"]` / `A[T, Arg(...)]` annotations; `add_cli_args_from_dataclass` turns each into
  an argparse argument (mirrored here by `_field_to_entries`), then `add_cli_args` registers a
  handful of dynamic-choice and deprecated flags by hand.

Output: a JSON list, one object per argparse action (a BooleanOptionalAction gives two, the
`--no-` spelling as kind "bool_false"), in registration order:

    names          every option string, the primary first
    dest           the ServerArgs attribute the value lands in
    kind           "str" | "int" | "float" | "bool" (store_true) | "bool_false" | "json" | "list"
    choices        the parser's choices, or null (see choices_note when they are dynamic)
    default        the argparse default: a literal, or its source text when not one
    help           the help text, f-strings resolved where static
    item_kind      element kind of a "list"
    value_parser   the engine's own type= callable when not int/float/str (human_readable_int...)
    nargs, const, required
    action         the argparse action class when not a plain store / store_true / store_false
    deprecated     the replacement the engine names for a deprecated flag ("" if none)
    choices_note   why choices is null although the parser has some
    fallback       0.5.23 `Arg(fallback=...)`: the value used when neither input nor resolution
                   sets one (`--mamba-full-memory-ratio` defaults to None, falls back to 0.9)
    argparse_dest  argparse's own dest where `from_cli_args` renames it

When written, the output for 0.5.9 and 0.5.23 matched the parser the wheel itself builds (imported
once with its heavy dependencies stubbed) in option strings, order, dest, type, nargs, choices,
defaults, required and help.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).resolve().parents[1] / "src" / "servefit" / "engines" / "sglang"

# Zero-argument helpers SGLang calls to build choices lazily (to avoid importing heavy
# registries). Each maps to the static, dependency-free list the helper reads.
_DYNAMIC_CHOICE_HELPERS = {
    "_reasoning_parser_choices": (
        "sglang.srt.parser.reasoning_parser_names",
        "REASONING_PARSER_NAMES",
    ),
    "_tool_call_parser_choices": (
        "sglang.srt.function_call.parser_names",
        "TOOL_CALL_PARSER_NAMES",
    ),
}

_BUILTIN_TYPES = {"int", "float", "str", "bool"}
_BUILTIN_CONTAINERS = {
    "list": list,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "sorted": sorted,
}
_KIND_OF_PARSER = {
    "int": "int",
    "float": "float",
    "str": "str",
    "human_readable_int": "int",
    "nullable_str": "str",
    "json.loads": "json",
    "json_list_type": "json",
}


class Unresolvable(Exception):
    """An expression the static evaluator cannot reduce to a literal."""


# ---------------------------------------------------------------------------------------------
# Source index and static evaluator
# ---------------------------------------------------------------------------------------------


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    bindings: dict[str, ast.AST] = field(default_factory=dict)


@dataclass(frozen=True)
class ModuleRef:
    name: str


@dataclass(frozen=True)
class ClassRef:
    module: str
    node: ast.ClassDef


@dataclass(frozen=True)
class ExternalRef:
    """A name that resolves outside the wheel (stdlib, third party) or to a function."""

    qualname: str
    node: ast.AST | None = field(default=None, compare=False)  # a FunctionDef in the wheel


@dataclass
class Scope:
    module: Module
    local: dict[str, tuple[ast.AST, Scope]] = field(default_factory=dict)


def _top_level_statements(body: list[ast.stmt]):
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _top_level_statements(stmt.body)
            yield from _top_level_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _top_level_statements(stmt.body)
            for handler in stmt.handlers:
                yield from _top_level_statements(handler.body)
            yield from _top_level_statements(stmt.orelse)


class Wheel:
    def __init__(self, root: Path):
        self.root = root
        self._modules: dict[str, Module | None] = {}

    def version(self) -> str:
        for info in self.root.glob("sglang-*.dist-info"):
            return info.name[len("sglang-") : -len(".dist-info")]
        for name in ("sglang.version", "sglang._version"):
            mod = self.module(name)
            if mod and isinstance(mod.bindings.get("__version__"), ast.Constant):
                return mod.bindings["__version__"].value
        raise SystemExit(f"{self.root}: cannot tell the sglang version")

    def module(self, name: str) -> Module | None:
        if name in self._modules:
            return self._modules[name]
        parts = name.split(".")
        candidates = [
            self.root.joinpath(*parts).with_suffix(".py"),
            self.root.joinpath(*parts, "__init__.py"),
        ]
        mod = None
        for path in candidates:
            if path.is_file():
                tree = ast.parse(path.read_text(), filename=str(path))
                mod = Module(name, path, tree)
                for stmt in _top_level_statements(tree.body):
                    if isinstance(stmt, ast.Assign):
                        for target in stmt.targets:
                            if isinstance(target, ast.Name):
                                mod.bindings[target.id] = stmt.value
                    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        if stmt.value is not None:
                            mod.bindings[stmt.target.id] = stmt.value
                    elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        mod.bindings[stmt.name] = stmt
                    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                        for alias in stmt.names:
                            mod.bindings[(alias.asname or alias.name).split(".")[0]] = stmt
                break
        self._modules[name] = mod
        return mod

    def is_package(self, mod: Module) -> bool:
        return mod.path.name == "__init__.py"


class Evaluator:
    def __init__(self, wheel: Wheel):
        self.wheel = wheel
        self.call_hooks: dict[str, Any] = {}

    # -- name resolution -----------------------------------------------------------------

    def _import_target(self, stmt: ast.Import | ast.ImportFrom, name: str, mod: Module) -> Any:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if (alias.asname or alias.name).split(".")[0] == name:
                    target = alias.name if alias.asname else alias.name.split(".")[0]
                    return ModuleRef(target) if self.wheel.module(target) else ExternalRef(target)
            raise Unresolvable(name)
        base = stmt.module or ""
        if stmt.level:
            pkg_parts = mod.name.split(".")
            if not self.wheel.is_package(mod):
                pkg_parts = pkg_parts[:-1]
            pkg_parts = pkg_parts[: len(pkg_parts) - (stmt.level - 1)]
            base = ".".join(pkg_parts + ([base] if base else []))
        for alias in stmt.names:
            if (alias.asname or alias.name) == name:
                source = self.wheel.module(base)
                if source is None:
                    return ExternalRef(f"{base}.{alias.name}")
                if alias.name in source.bindings:
                    return self.resolve_name(alias.name, Scope(source))
                if self.wheel.module(f"{base}.{alias.name}"):
                    return ModuleRef(f"{base}.{alias.name}")
                return ExternalRef(f"{base}.{alias.name}")
        raise Unresolvable(name)

    def resolve_name(self, name: str, scope: Scope) -> Any:
        """Return (node, scope) for a value binding, or a Ref for classes/modules/externals."""
        if name in scope.local:
            return scope.local[name]
        mod = scope.module
        node = mod.bindings.get(name)
        if node is None:
            if name in _BUILTIN_TYPES or name in _BUILTIN_CONTAINERS:
                return ExternalRef(name)
            raise Unresolvable(name)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return self._import_target(node, name, mod)
        if isinstance(node, ast.ClassDef):
            return ClassRef(mod.name, node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return ExternalRef(name, node)
        return (node, Scope(mod))

    def class_attr(self, ref: ClassRef, attr: str) -> Any:
        mod = self.wheel.module(ref.module)
        assert mod is not None
        # Class-body statements see earlier class-body names (`ALL = (FULL, DISABLED)`).
        body_scope = Scope(mod)
        for stmt in ref.node.body:
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        body_scope.local[t.id] = (stmt.value, body_scope)
        for stmt in ref.node.body:
            if isinstance(stmt, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
                    return (stmt.value, body_scope)
            elif (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == attr
            ):
                if stmt.value is None:
                    raise Unresolvable(f"{ref.node.name}.{attr} has no default")
                return (stmt.value, body_scope)
            elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef)) and stmt.name == attr:
                return ExternalRef(f"{ref.node.name}.{attr}")
        raise Unresolvable(f"{ref.node.name}.{attr}")

    def deref(self, node: ast.AST, scope: Scope) -> Any:
        """Follow Name / Attribute chains to a binding without evaluating it."""
        if isinstance(node, ast.Name):
            return self.resolve_name(node.id, scope)
        if isinstance(node, ast.Attribute):
            base = self.deref(node.value, scope)
            if node.attr == "__doc__":  # f"{human_readable_int.__doc__}" in help texts
                definition = base.node if isinstance(base, (ClassRef, ExternalRef)) else None
                if definition is None:
                    raise Unresolvable(ast.unparse(node))
                return (ast.Constant(ast.get_docstring(definition, clean=False)), scope)
            if isinstance(base, ClassRef):
                return self.class_attr(base, node.attr)
            if isinstance(base, ModuleRef):
                mod = self.wheel.module(base.name)
                assert mod is not None
                return self.resolve_name(node.attr, Scope(mod))
            if isinstance(base, ExternalRef):
                return ExternalRef(f"{base.qualname}.{node.attr}")
            raise Unresolvable(ast.unparse(node))
        return (node, scope)

    # -- evaluation ----------------------------------------------------------------------

    def eval(self, node: ast.AST, scope: Scope) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[Any] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    out.extend(self.eval(elt.value, scope))
                else:
                    out.append(self.eval(elt, scope))
            if isinstance(node, ast.Set):
                return set(out)
            return tuple(out) if isinstance(node, ast.Tuple) else out
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise Unresolvable("dict unpacking")
            return {
                self.eval(k, scope): self.eval(v, scope)
                for k, v in zip(node.keys, node.values, strict=True)
            }
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(value.value)
                else:
                    assert isinstance(value, ast.FormattedValue)
                    v = self.eval(value.value, scope)
                    if value.conversion == ord("r"):
                        v = repr(v)
                    elif value.conversion == ord("a"):
                        v = ascii(v)
                    spec = self.eval(value.format_spec, scope) if value.format_spec else ""
                    parts.append(format(v, spec))
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.eval(node.left, scope) + self.eval(node.right, scope)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            left, right = self.eval(node.left, scope), self.eval(node.right, scope)
            if isinstance(left, set) and isinstance(right, set):
                return left | right
            raise Unresolvable(ast.unparse(node))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return self.eval(node.left, scope) * self.eval(node.right, scope)
        if isinstance(node, ast.Subscript):
            index = self.eval(node.slice, scope)
            if isinstance(index, (int, str)):
                try:
                    return self.eval(node.value, scope)[index]
                except (KeyError, IndexError, TypeError) as exc:
                    raise Unresolvable(ast.unparse(node)) from exc
            raise Unresolvable(ast.unparse(node))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.eval(node.operand, scope)
        if isinstance(node, (ast.Name, ast.Attribute)):
            target = self.deref(node, scope)
            if isinstance(target, tuple):
                return self.eval(*target)
            if isinstance(target, ExternalRef) and target.qualname == "argparse.SUPPRESS":
                return argparse.SUPPRESS
            return target  # a Ref: meaningful only as a callable / class
        if isinstance(node, ast.Call):
            return self._eval_call(node, scope)
        raise Unresolvable(ast.unparse(node))

    def _dict_keys(self, node: ast.AST, scope: Scope) -> list[Any]:
        target = self.deref(node, scope)
        if isinstance(target, tuple):
            inner, inner_scope = target
            if isinstance(inner, ast.Dict):
                return [self.eval(k, inner_scope) for k in inner.keys if k is not None]
            return list(self.eval(inner, inner_scope).keys())
        raise Unresolvable(ast.unparse(node))

    def _eval_call(self, node: ast.Call, scope: Scope) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "keys" and not node.args:
            return self._dict_keys(func.value, scope)
        target = self.deref(func, scope) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if not isinstance(target, ExternalRef):
            raise Unresolvable(ast.unparse(node))
        qual = target.qualname
        short = qual.rsplit(".", 1)[-1]
        if short in self.call_hooks:
            return self.call_hooks[short](node, scope)
        if qual in _BUILTIN_CONTAINERS and len(node.args) <= 1 and not node.keywords:
            arg = self.eval(node.args[0], scope) if node.args else []
            if isinstance(arg, dict):
                arg = list(arg)
            return _BUILTIN_CONTAINERS[qual](arg)
        if short == "field" and not node.args:  # dataclasses.field / msgspec.field
            kw = {k.arg: k.value for k in node.keywords}
            if "default" in kw:
                return self.eval(kw["default"], scope)
            if "default_factory" in kw:
                factory = kw["default_factory"]
                if isinstance(factory, ast.Lambda):
                    return self.eval(factory.body, scope)
                ref = self.deref(factory, scope)
                if isinstance(ref, ExternalRef) and ref.qualname in (
                    "list",
                    "dict",
                    "set",
                    "tuple",
                ):
                    return {"list": [], "dict": {}, "set": set(), "tuple": ()}[ref.qualname]
            raise Unresolvable(ast.unparse(node))
        raise Unresolvable(ast.unparse(node))

    def callable_name(self, node: ast.AST, scope: Scope) -> str:
        try:
            target = self.deref(node, scope)
        except Unresolvable:
            return ast.unparse(node)
        if isinstance(target, ExternalRef):
            qual = target.qualname
            return qual if qual.startswith(("json.", "argparse.")) else qual.rsplit(".", 1)[-1]
        if isinstance(target, ClassRef):
            return target.node.name
        return ast.unparse(node)


# ---------------------------------------------------------------------------------------------
# Output normalisation
# ---------------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise Unresolvable(repr(value))


def _literal_or_source(ev: Evaluator, node: ast.AST | None, scope: Scope) -> Any:
    if node is None:
        return None
    try:
        return _jsonable(ev.eval(node, scope))
    except Unresolvable:
        return ast.unparse(node)


def _text(ev: Evaluator, node: ast.AST | None, scope: Scope) -> str:
    """Help text; unresolvable f-string parts stay as `{source}`."""
    if node is None:
        return ""
    try:
        value = ev.eval(node, scope)
        if isinstance(value, str):
            return value
    except Unresolvable:
        pass
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(part.value)
            else:
                try:
                    out.append(str(ev.eval(part, scope)))
                except Unresolvable:
                    out.append("{" + ast.unparse(part.value) + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(ev, node.left, scope) + _text(ev, node.right, scope)
    return ast.unparse(node)


def _choices(ev: Evaluator, node: ast.AST | None, scope: Scope) -> tuple[list | None, str | None]:
    if node is None:
        return None, None
    try:
        value = ev.eval(node, scope)
        if isinstance(value, dict):
            value = list(value)
        return _jsonable(value), None
    except Unresolvable:
        return None, f"dynamic: {ast.unparse(node)}"


def _entry(**kw: Any) -> dict[str, Any]:
    entry = {
        "names": kw["names"],
        "dest": kw["dest"],
        "kind": kw.get("kind", "str"),
        "choices": kw.get("choices"),
        "default": kw.get("default"),
        "help": kw.get("help", ""),
        "item_kind": kw.get("item_kind"),
        "value_parser": kw.get("value_parser"),
        "nargs": kw.get("nargs"),
        "const": kw.get("const"),
        "required": bool(kw.get("required", False)),
        "action": kw.get("action"),
        "deprecated": kw.get("deprecated"),
        "choices_note": kw.get("choices_note"),
        "fallback": kw.get("fallback"),
        "argparse_dest": kw.get("argparse_dest"),
    }
    return entry


def _default_dest(names: list[str]) -> str:
    long = [n for n in names if n.startswith("--")]
    first = (long or names)[0]
    return first.lstrip("-").replace("-", "_")


def _bool_optional(names: list[str], dest: str, help_: str, default: Any) -> list[dict]:
    negatives = ["--no-" + n[2:] for n in names if n.startswith("--")]
    return [
        _entry(
            names=names,
            dest=dest,
            kind="bool",
            default=default,
            help=help_,
            action="BooleanOptionalAction",
        ),
        _entry(
            names=negatives,
            dest=dest,
            kind="bool_false",
            default=default,
            help=help_,
            action="BooleanOptionalAction",
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Layout 1: explicit parser.add_argument(...) calls
# ---------------------------------------------------------------------------------------------


def _add_argument_entries(ev: Evaluator, call: ast.Call, scope: Scope) -> list[dict]:
    names = [ev.eval(a, scope) for a in call.args]
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    dest = ev.eval(kw["dest"], scope) if "dest" in kw else _default_dest(names)
    help_ = _text(ev, kw.get("help"), scope)
    default = _literal_or_source(ev, kw.get("default"), scope)
    choices, note = _choices(ev, kw.get("choices"), scope)
    nargs = _literal_or_source(ev, kw.get("nargs"), scope)
    const = _literal_or_source(ev, kw.get("const"), scope)
    required = bool(ev.eval(kw["required"], scope)) if "required" in kw else False
    parser_name = ev.callable_name(kw["type"], scope) if "type" in kw else None
    action_node = kw.get("action")
    action = None
    if action_node is not None:
        action = (
            ev.eval(action_node, scope)
            if isinstance(action_node, ast.Constant)
            else ev.callable_name(action_node, scope)
        )
    common = dict(
        names=names,
        dest=dest,
        help=help_,
        default=default,
        choices=choices,
        choices_note=note,
        required=required,
    )

    if action in ("store_true", "store_false"):
        if "default" not in kw:
            common["default"] = action == "store_false"
        kind = "bool" if action == "store_true" else "bool_false"
        return [_entry(kind=kind, **common)]
    if action in ("argparse.BooleanOptionalAction", "BooleanOptionalAction"):
        return _bool_optional(names, dest, help_, default)
    if action == "DeprecatedAction":  # nargs=0: warns (or errors) and stores nothing
        hint = _text(ev, kw.get("error_message"), scope) if "error_message" in kw else ""
        return [_entry(kind="bool", action=action, deprecated=hint, nargs=0, **common)]
    if action == "DeprecatedStoreTrueAction":
        hint = _text(ev, kw.get("new_flag"), scope) if "new_flag" in kw else ""
        if "default" not in kw:
            common["default"] = False
        return [_entry(kind="bool", action=action, deprecated=hint, **common)]
    if action == "DeprecatedStoreConstAction":
        hint = _text(ev, kw.get("new_flag"), scope) if "new_flag" in kw else ""
        const_value = _literal_or_source(ev, kw.get("const_value"), scope)
        takes_value = "nargs" in kw and nargs is None  # nargs=None: a valued flag
        kind = "str" if takes_value else "bool"
        return [
            _entry(
                kind=kind,
                action=action,
                deprecated=hint,
                const=const_value,
                nargs=None if takes_value else 0,
                **common,
            )
        ]
    if action == "DeprecatedAliasStoreAction":
        common["deprecated"] = _text(ev, kw.get("new_flag"), scope) if "new_flag" in kw else ""
    elif action not in (None, "store", "LoRAPathAction"):
        raise SystemExit(f"unhandled argparse action {action!r} for {names}")

    base_kind = _KIND_OF_PARSER.get(parser_name or "str", "str")
    value_parser = parser_name if parser_name not in (None, *_BUILTIN_TYPES) else None
    if nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1):
        return [
            _entry(
                kind="list",
                item_kind=base_kind,
                value_parser=value_parser,
                nargs=nargs,
                const=const,
                action=action,
                **common,
            )
        ]
    return [
        _entry(
            kind=base_kind,
            value_parser=value_parser,
            nargs=nargs,
            const=const,
            action=action,
            **common,
        )
    ]


def _walk_cli_function(ev: Evaluator, fn: ast.FunctionDef, scope: Scope, on_call) -> list[dict]:
    """Run over a CLI-building function body in order: local assignments, add_argument calls."""
    entries: list[dict] = []
    local = Scope(scope.module, dict(scope.local))

    def visit(body: list[ast.stmt], nested: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assign) and not nested:
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        local.local[target.id] = (
                            stmt.value,
                            Scope(local.module, dict(local.local)),
                        )
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                func = call.func
                if isinstance(func, ast.Attribute) and func.attr == "add_argument":
                    if nested:
                        print(
                            f"note: conditional add_argument at line {stmt.lineno}", file=sys.stderr
                        )
                    entries.extend(_add_argument_entries(ev, call, local))
                    continue
                entries.extend(on_call(call, local))
                continue
            for child in ("body", "orelse", "finalbody"):
                if isinstance(getattr(stmt, child, None), list):
                    visit(getattr(stmt, child), True)

    visit(fn.body, False)
    return entries


def _class_def(mod: Module, name: str) -> ast.ClassDef:
    """The `class NAME` statement itself (0.5.2x rebinds ServerArgs to a defstruct later)."""
    for stmt in _top_level_statements(mod.tree.body):
        if isinstance(stmt, ast.ClassDef) and stmt.name == name:
            return stmt
    raise SystemExit(f"class {name} not found in {mod.path}")


def _from_cli_args_renames(cls: ast.ClassDef) -> dict[str, str]:
    """`args.tp_size = args.tensor_parallel_size` lines in `ServerArgs.from_cli_args`: the
    argparse dest on the right becomes the ServerArgs attribute on the left."""
    renames: dict[str, str] = {}
    try:
        fn = _find_method(cls, "from_cli_args")
    except SystemExit:
        return renames
    for stmt in fn.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Attribute)
            and isinstance(stmt.value, ast.Attribute)
            and isinstance(stmt.targets[0].value, ast.Name)
            and isinstance(stmt.value.value, ast.Name)
            and stmt.targets[0].value.id == stmt.value.value.id == "args"
        ):
            renames[stmt.value.attr] = stmt.targets[0].attr
    return renames


def _find_method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return stmt
    raise SystemExit(f"{cls.name}.{name} not found")


# ---------------------------------------------------------------------------------------------
# Layout 2: annotated msgspec fields (sglang/srt/arg_groups)
# ---------------------------------------------------------------------------------------------


@dataclass
class FieldDecl:
    name: str
    annotation: ast.AST
    default: ast.AST | None
    scope: Scope


def _subscript_parts(node: ast.Subscript) -> list[ast.AST]:
    sl = node.slice
    return list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]


def _type_head(ev: Evaluator, node: ast.AST, scope: Scope) -> str:
    """Short name of a type expression's head: 'Optional', 'List', 'int', 'Annotated'..."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        try:
            target = ev.deref(node, scope)
        except Unresolvable:
            return ast.unparse(node).rsplit(".", 1)[-1]
        if isinstance(target, ExternalRef):
            return target.qualname.rsplit(".", 1)[-1]
        if isinstance(target, ClassRef):
            return target.node.name
        if isinstance(target, tuple) and isinstance(target[0], (ast.Name, ast.Attribute)):
            return _type_head(ev, target[0], target[1])  # `A = Annotated`
        return ast.unparse(node).rsplit(".", 1)[-1]
    return type(node).__name__


def _unwrap_annotated(ev: Evaluator, ann: ast.AST, scope: Scope):
    """(inner type node, Arg call node | help str node | None), as arg_utils._unwrap_annotated."""
    if isinstance(ann, ast.Subscript) and _type_head(ev, ann, scope) == "Annotated":
        parts = _subscript_parts(ann)
        for meta in parts[1:]:
            if isinstance(meta, ast.Call) and _type_head(ev, meta.func, scope) == "Arg":
                return parts[0], meta
            try:
                if isinstance(ev.eval(meta, scope), str):
                    return parts[0], meta
            except Unresolvable:
                continue
        return parts[0], None
    return ann, None


def _unwrap_optional(ev: Evaluator, tp: ast.AST, scope: Scope) -> ast.AST:
    def is_none(n: ast.AST) -> bool:
        return isinstance(n, ast.Constant) and n.value is None

    if isinstance(tp, ast.BinOp) and isinstance(tp.op, ast.BitOr):
        members: list[ast.AST] = []
        stack = [tp]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                stack += [n.right, n.left]
            else:
                members.append(n)
        non_none = [m for m in members if not is_none(m)]
        return non_none[0] if len(non_none) == 1 and len(members) > 1 else tp
    if isinstance(tp, ast.Subscript):
        head = _type_head(ev, tp, scope)
        parts = _subscript_parts(tp)
        if head == "Optional":
            return parts[0]
        if head == "Union":
            non_none = [p for p in parts if not is_none(p)]
            if len(non_none) == 1:
                return non_none[0]
    return tp


def _scalar_kind(ev: Evaluator, tp: ast.AST, scope: Scope) -> str:
    head = _type_head(ev, tp, scope) if not isinstance(tp, ast.Subscript) else ""
    return head if head in ("int", "float", "str") else "str"


def _field_to_entries(ev: Evaluator, decl: FieldDecl) -> list[dict]:
    """Mirror of `arg_utils.add_cli_args_from_dataclass` for one field."""
    raw_type, meta = _unwrap_annotated(ev, decl.annotation, decl.scope)
    if meta is None:
        return []
    arg: dict[str, ast.AST] = {}
    if isinstance(meta, ast.Call):
        if meta.args:
            arg["help"] = meta.args[0]
        arg.update({k.arg: k.value for k in meta.keywords if k.arg is not None})
    else:
        arg["help"] = meta
    if "no_cli" in arg and ev.eval(arg["no_cli"], decl.scope):
        return []
    entries = _field_cli_entries(ev, decl, raw_type, arg)
    fallback = _literal_or_source(ev, arg.get("fallback"), decl.scope)
    for entry in entries:
        entry["fallback"] = fallback
    return entries


def _field_cli_entries(
    ev: Evaluator, decl: FieldDecl, raw_type: ast.AST, arg: dict[str, ast.AST]
) -> list[dict]:
    scope = decl.scope
    cli_name = ev.eval(arg["cli_name"], scope) if "cli_name" in arg else None
    cli_name = cli_name or "--" + decl.name.replace("_", "-")
    aliases = ev.eval(arg["aliases"], scope) if "aliases" in arg else None
    names = [cli_name, *(aliases or [])]
    dest = decl.name
    help_ = _text(ev, arg.get("help"), scope)
    has_default = decl.default is not None
    default = _literal_or_source(ev, decl.default, scope) if has_default else None
    choices, note = _choices(ev, arg.get("choices"), scope)
    nargs = _literal_or_source(ev, arg.get("nargs"), scope)
    const = _literal_or_source(ev, arg.get("const"), scope)
    parser_name = ev.callable_name(arg["type_parser"], scope) if "type_parser" in arg else None

    if "action" in arg:
        action = ev.callable_name(arg["action"], scope)
        if action in ("argparse.BooleanOptionalAction", "BooleanOptionalAction"):
            return _bool_optional(names, dest, help_, default)
        kwargs = ev.eval(arg["action_kwargs"], scope) if "action_kwargs" in arg else {}
        call = ast.Call(
            func=ast.Name("parser.add_argument"),
            args=[ast.Constant(n) for n in names],
            keywords=[
                ast.keyword("action", arg["action"]),
                ast.keyword("help", arg.get("help") or ast.Constant("")),
                ast.keyword("dest", ast.Constant(dest)),
                *([ast.keyword("default", decl.default)] if has_default else []),
                *[ast.keyword(k, _type_node(v)) for k, v in kwargs.items()],
            ],
        )
        return _add_argument_entries(ev, call, scope)

    inner = _unwrap_optional(ev, raw_type, scope)
    head = _type_head(ev, inner, scope)
    common = dict(names=names, dest=dest, help=help_, default=default, choices_note=note)

    if isinstance(inner, ast.Subscript) and head == "Literal":
        literal_vals = [ev.eval(p, scope) for p in _subscript_parts(inner)]
        if choices is None:
            choices = _jsonable(literal_vals)
        kind = {int: "int", float: "float", str: "str"}.get(type(literal_vals[0]), "str")
        kind = _KIND_OF_PARSER.get(parser_name, kind) if parser_name else kind
        return [_entry(kind=kind, choices=choices, const=const, value_parser=parser_name, **common)]

    if isinstance(inner, ast.Subscript) and head in ("List", "list") and parser_name is None:
        elem = _subscript_parts(inner)[0]
        return [
            _entry(
                kind="list",
                item_kind=_scalar_kind(ev, elem, scope),
                nargs=nargs or "+",
                choices=choices,
                const=const,
                **common,
            )
        ]

    if not isinstance(inner, ast.Subscript) and head == "bool":
        return [_entry(kind="bool", **common)]

    kind = (
        _KIND_OF_PARSER.get(parser_name, "str") if parser_name else _scalar_kind(ev, inner, scope)
    )
    value_parser = parser_name if parser_name not in (None, *_BUILTIN_TYPES) else None
    required = ev.eval(arg["required"], scope) if "required" in arg else None
    required = required is True or (required is None and not has_default)
    if nargs in ("+", "*"):
        return [
            _entry(
                kind="list",
                item_kind=kind,
                value_parser=value_parser,
                nargs=nargs,
                choices=choices,
                const=const,
                required=required,
                **common,
            )
        ]
    return [
        _entry(
            kind=kind,
            value_parser=value_parser,
            nargs=nargs,
            choices=choices,
            const=const,
            required=required,
            **common,
        )
    ]


def _type_node(value: Any) -> ast.AST:
    if isinstance(value, ExternalRef):
        return ast.Name(value.qualname)
    return ast.Constant(value)


def _struct_fields(ev: Evaluator, ref: ClassRef) -> list[FieldDecl]:
    mod = ev.wheel.module(ref.module)
    assert mod is not None
    scope = Scope(mod)
    fields: list[FieldDecl] = []
    for base in ref.node.bases:  # inherited Struct fields come first
        target = ev.deref(base, scope) if isinstance(base, (ast.Name, ast.Attribute)) else None
        if isinstance(target, ClassRef):
            fields.extend(_struct_fields(ev, target))
    for stmt in ref.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if _type_head(ev, stmt.annotation, scope) == "ClassVar":
                continue
            fields = [f for f in fields if f.name != stmt.target.id]
            fields.append(FieldDecl(stmt.target.id, stmt.annotation, stmt.value, scope))
    return fields


def _arg_groups_fields(ev: Evaluator, server_args: Module) -> list[FieldDecl]:
    """ServerArgs' field order: POSITIONAL_FIELD_ORDER first, then declaration order."""
    scope = Scope(server_args)
    decls: dict[str, FieldDecl] = {}
    # 0.5.14-0.5.19: the annotated fields are ServerArgs' own (a dataclass); 0.5.20+ gathers
    # them from the namespace Structs listed in _INPUT_NAMESPACES.
    has_namespaces = "_INPUT_NAMESPACES" in server_args.bindings
    sources = ev.deref(ast.Name("_INPUT_NAMESPACES"), scope) if has_namespaces else ([],)
    assert isinstance(sources, tuple)
    for elt in getattr(sources[0], "elts", []):
        ref = ev.deref(elt, scope)
        assert isinstance(ref, ClassRef), ast.unparse(elt)
        for decl in _struct_fields(ev, ref):
            if decl.name in decls:
                raise SystemExit(f"{decl.name} declared twice")
            decls[decl.name] = decl
    # ServerArgs' own annotations are appended after the namespaces'.
    cls = _class_def(server_args, "ServerArgs")
    for decl in _struct_fields(ev, ClassRef(server_args.name, cls)):
        decls.setdefault(decl.name, decl)
    order_mod = ev.wheel.module("sglang.srt.arg_groups.field_order")
    order = (
        ev.eval(order_mod.bindings["POSITIONAL_FIELD_ORDER"], Scope(order_mod)) if order_mod else []
    )
    known = [n for n in order if n in decls]
    rest = [n for n in decls if n not in set(order)]
    return [decls[n] for n in known + rest]


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def extract(wheel_root: Path) -> tuple[str, list[dict]]:
    wheel = Wheel(wheel_root)
    ev = Evaluator(wheel)
    server_args = wheel.module("sglang.srt.server_args")
    if server_args is None:
        raise SystemExit(f"{wheel_root}: sglang/srt/server_args.py not found")
    cls = _class_def(server_args, "ServerArgs")
    scope = Scope(server_args)

    def static_helper(module: str, name: str):
        def hook(_call: ast.Call, _scope: Scope) -> Any:
            mod = wheel.module(module)
            if mod is None or name not in mod.bindings:
                raise Unresolvable(f"{module}.{name}")
            return ev.eval(mod.bindings[name], Scope(mod))

        return hook

    for helper, (module, name) in _DYNAMIC_CHOICE_HELPERS.items():
        ev.call_hooks[helper] = static_helper(module, name)

    field_cache: list[FieldDecl] = []

    def declared_default(call: ast.Call, call_scope: Scope) -> Any:
        name = ev.eval(call.args[0], call_scope)
        for decl in field_cache:
            if decl.name == name and decl.default is not None:
                return ev.eval(decl.default, decl.scope)
        raise Unresolvable(f"_declared_default({name!r})")

    ev.call_hooks["_declared_default"] = declared_default

    def on_call(call: ast.Call, call_scope: Scope) -> list[dict]:
        func = call.func
        if isinstance(func, ast.Name) and func.id == "add_cli_args_from_dataclass":
            if not field_cache:
                field_cache.extend(_arg_groups_fields(ev, server_args))
            out: list[dict] = []
            for decl in field_cache:
                out.extend(_field_to_entries(ev, decl))
            return out
        return []

    if "add_cli_args_from_dataclass" in server_args.bindings:
        field_cache.extend(_arg_groups_fields(ev, server_args))
    entries = _walk_cli_function(ev, _find_method(cls, "add_cli_args"), scope, on_call)
    renames = _from_cli_args_renames(cls)
    for entry in entries:
        if entry["dest"] in renames:
            entry["argparse_dest"] = entry["dest"]
            entry["dest"] = renames[entry["dest"]]

    seen: dict[str, str] = {}
    for e in entries:
        for n in e["names"]:
            if n in seen:
                raise SystemExit(f"option {n} registered twice ({seen[n]}, {e['dest']})")
            seen[n] = e["dest"]
    return wheel.version(), entries


def _version_slug(version: str) -> str:
    return version.replace(".", "_")


def write(entries: list[dict], path: Path) -> None:
    path.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", type=Path, help="unzipped wheel root (contains sglang/)")
    ap.add_argument("-o", "--out", type=Path, help="output JSON file (default: the package's)")
    ap.add_argument(
        "--all",
        action="store_true",
        help="WHEEL is a folder of unzipped wheels named sglang-<version>; extract every one",
    )
    args = ap.parse_args(argv)
    roots = (
        sorted(p for p in args.wheel.glob("sglang-*") if p.is_dir()) if args.all else [args.wheel]
    )
    for root in roots:
        version, entries = extract(root)
        out = args.out or OUT_DIR / f"flags_{_version_slug(version)}.json"
        if args.out and args.out.is_dir():
            out = args.out / f"flags_{_version_slug(version)}.json"
        write(entries, out)
        print(f"{root.name}: {len(entries)} flags -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
