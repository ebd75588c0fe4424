"""Small wordings every renderer shares."""

from __future__ import annotations

from servefit._plan.schema import EngineRef
from servefit.report.table import engine_words
from servefit.report.verdict import counted


def test_one_request_is_singular_and_fractions_plural():
    assert counted(1, "full-context request") == "1 full-context request"
    assert counted(1.0, "request") == "1 request"
    assert counted(0.32, "full-context request") == "0.32 full-context requests"
    assert counted(1.004, "request") == "1 request"  # shown as 1: read as 1
    assert counted(16, "request") == "16 requests"


def test_a_release_sized_by_its_groups_profile_says_both():
    # engines/registry.py:RELEASES maps vllm 0.16.0 to the profile 0.15.0 (same sizing code)
    ref = EngineRef(name="vllm", version="0.16.0", profile="0.15.0")
    assert engine_words(ref) == "vllm 0.16.0 (sized as 0.15.0)"
    assert engine_words(EngineRef(name="vllm", version="0.33.0", profile="0.33.0")) == "vllm 0.33.0"
