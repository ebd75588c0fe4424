"""tests/data/ground-truth: real engine logs and cases.jsonl, whose `observed` log lines hold
the expected values of the ground-truth tests (sources in tests/data/PROVENANCE.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
GT = DATA / "ground-truth"
# case id -> case
CASES: dict[str, dict] = {
    c["id"]: c
    for c in map(json.loads, (GT / "cases.jsonl").read_text(encoding="utf-8").splitlines())
}


def observed(case_id: str, pattern: str) -> re.Match:
    """The first match of `pattern` in the case's observed log lines."""
    for line in CASES[case_id]["observed"]:
        m = re.search(pattern, line)
        if m:
            return m
    raise AssertionError(f"{case_id}: no observed line matches {pattern}")
