"""No function over 80 lines in engines/, _plan/ and doctor/, unless it is a declarative table.

A long function there is a sizing or diagnosis pass that wants its steps named (see
engines/vllm/planning.py: size -> _kv_memory -> _capacity -> _sizing). A function that only
returns a table (a dict or list literal of rules, cited row by row) may be longer: it goes in
DECLARATIVE_TABLES with the reason, and the test checks that it still is long, so that the
allow-list never outlives what it excuses.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "servefit"
CHECKED = ("engines", "_plan", "doctor")
MAX_LINES = 80

# "path/relative/to/servefit.py:function" -> why its length is a table's, not logic's.
DECLARATIVE_TABLES: dict[str, str] = {}


def long_functions(source: str, where: str) -> dict[str, int]:
    """`where:name` -> lines of every function (methods and nested ones too) over MAX_LINES."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_LINES:
                out[f"{where}:{node.name}"] = lines
    return out


def offenders() -> dict[str, int]:
    out: dict[str, int] = {}
    for package in CHECKED:
        for path in sorted((SRC / package).rglob("*.py")):
            where = path.relative_to(SRC).as_posix()
            out.update(long_functions(path.read_text(encoding="utf-8"), where))
    return out


def test_no_long_function_outside_the_declarative_tables():
    found = offenders()
    unexcused = {k: n for k, n in found.items() if k not in DECLARATIVE_TABLES}
    assert unexcused == {}, f"split these (lines > {MAX_LINES}): {unexcused}"
    stale = sorted(set(DECLARATIVE_TABLES) - set(found))
    assert stale == [], f"no longer over {MAX_LINES} lines, drop from DECLARATIVE_TABLES: {stale}"


def test_the_count_sees_methods_and_nested_functions():
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_LINES))
    source = f"class C:\n    def m(self):\n{body}\n\n\ndef short():\n    return 1\n"
    assert long_functions(source, "m.py") == {"m.py:m": MAX_LINES + 1}
    nested = f"def outer():\n    def inner():\n{body}\n    return inner\n"
    assert long_functions(nested, "n.py") == {"n.py:outer": MAX_LINES + 3, "n.py:inner": 81}
