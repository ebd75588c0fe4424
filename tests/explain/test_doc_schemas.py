"""docs/explain-fit.md carries the JSON schemas of explain and fit: they must be current
(regenerate with `python tools/gen_explain_fit_doc.py`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from servefit._explain.schema import Explanation
from servefit._fit.schema import FitResult

DOC = Path(__file__).resolve().parents[2] / "docs" / "explain-fit.md"


@pytest.mark.parametrize("model", [Explanation, FitResult], ids=lambda m: m.__name__)
def test_schema_in_doc_is_current(model):
    text = DOC.read_text()
    m = re.search(rf"\(`{model.__name__}`\)\n\n```json\n(.*?)\n```", text, re.S)
    assert m, f"no schema block for {model.__name__} in {DOC.name}"
    assert json.loads(m.group(1)) == model.model_json_schema()
