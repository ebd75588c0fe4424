"""The accuracy table (tests/groundtruth_accuracy.py): every case, cold and doctor, equals the
committed tests/data/ground-truth/accuracy.json, so a planner change that moves any figure on a
real log fails here by name (regenerate with `python tools/accuracy_table.py --write` and say
why in the commit). And what must hold whatever the table says:

- the doctor's replay, on the log's own measurements, is within 0.5 % of every logged figure;
- every verdict is the log's: a start that allocated its pools plans "ok", a start that the
  engine refused plans "fail", cold and replayed.
"""

from __future__ import annotations

import pytest

from tests.groundtruth import CASES
from tests.groundtruth_accuracy import ACCURACY_CASES, committed, row

COMMITTED = {r["case"]: r for r in committed()}


def test_the_table_lists_every_case_once():
    assert [r["case"] for r in committed()] == [c.id for c in ACCURACY_CASES]
    assert all(c.id in CASES for c in ACCURACY_CASES)


@pytest.mark.parametrize("case", ACCURACY_CASES, ids=lambda c: c.id)
def test_each_case_is_what_the_table_says(case):
    got = row(case)
    assert got == COMMITTED[case.id]
    assert abs(got["doctor_error_pct"]) <= 0.5
    want = "fail" if got["logged_outcome"] == "failed" else "ok"
    assert got["cold_verdict"] == got["doctor_verdict"] == want
