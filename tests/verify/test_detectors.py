"""Degenerate-output detectors on real degenerate texts and healthy long texts.

The corpus and where each text comes from: tests/verify/corpus/SOURCES.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servefit.verify.detectors import (
    MIN_COVER_CHARS,
    LoopDetector,
    first_loop,
    judge,
    ngram_novelty,
    tail_repeat,
)

CORPUS = Path(__file__).parent / "corpus"
DEGENERATE = sorted((CORPUS / "degenerate").iterdir())
HEALTHY = sorted((CORPUS / "healthy").iterdir())
LEAD_IN = (CORPUS / "healthy" / "readme.md").read_text()[:3000]

# The unit each real loop repeats (SOURCES.md), as the detector should report it.
UNITS = {
    "seed_thinking_loop.txt": "thinking\n\n",
    "wife_loop.txt": "wife's ",
    "exclaim_run.txt": "!",
    "slash_run.txt": "/",
}


def test_corpus_is_complete():
    assert {p.name for p in DEGENERATE} == set(UNITS)
    assert len(HEALTHY) >= 6


@pytest.mark.parametrize("path", DEGENERATE, ids=lambda p: p.name)
def test_real_loops_are_caught_with_their_unit(path: Path):
    finding = first_loop(path.read_text())
    assert finding.degenerate
    assert finding.tail is not None
    # The reported period is the unit's length; the unit is a rotation of the real one.
    unit = UNITS[path.name]
    assert finding.tail.period == len(unit)
    assert finding.tail.unit in unit * 2


@pytest.mark.parametrize("path", DEGENERATE, ids=lambda p: p.name)
def test_loops_after_healthy_text_stop_the_stream_early(path: Path):
    # A loop usually starts mid-answer: 3,000 chars of README, then the loop. The detector
    # must be certain within MIN_COVER_CHARS + one check interval (32) + one piece (8).
    text = LEAD_IN + path.read_text()
    finding = first_loop(text)
    assert finding.degenerate
    assert finding.at_char is not None
    assert len(LEAD_IN) + MIN_COVER_CHARS <= finding.at_char <= len(LEAD_IN) + MIN_COVER_CHARS + 40


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.name)
def test_healthy_texts_never_trigger_at_any_point_of_their_stream(path: Path):
    finding = first_loop(path.read_text(), chunk_chars=8)
    assert not finding.degenerate, finding.reason
    assert not finding.suspicious, finding.reason


def test_tail_repeat_by_hand():
    # "ab" x 5 after "xyz": the tail "ababababab" is 10 chars with period 2.
    found = tail_repeat("xyz" + "ab" * 5)
    assert (found.period, found.covered, found.unit) == (2, 10, "ab")
    assert found.repeats == 5
    assert tail_repeat("abcdefg") is None  # no unit repeats twice


def test_short_runs_are_not_loops():
    # 64 dashes (a banner line) or 100 spaces of indentation are periodic but too short.
    assert not judge("x = 1\n# " + "-" * 64).degenerate
    assert not judge("def f():\n" + " " * 100).degenerate
    assert judge("x" + "-" * MIN_COVER_CHARS).degenerate


def test_novelty_by_hand():
    # 200 words cycling through 4 distinct words: only 4 distinct 4-grams of 197.
    text = " ".join(["alpha", "beta", "gamma", "delta"] * 50)
    assert ngram_novelty(text) == pytest.approx(4 / 197)
    # Fewer words than the window: no verdict yet.
    assert ngram_novelty("one two three") is None


def test_near_loop_without_exact_period_is_caught_by_novelty():
    # Hand-made variation of the wife's loop: every 7th word differs, so no exact short period
    # covers 160 chars... the 4-grams still repeat.
    words = [
        ("husband's" if i % 7 == 0 else "wife's") if i % 49 else "mother's" for i in range(400)
    ]
    finding = judge(" ".join(words))
    assert finding.degenerate


def test_counter_loop_is_suspicious_not_certain():
    # Hand-made: a reasoning loop with a counter in it has no exact period; novelty ~0.35.
    text = " ".join(f"Step {i}: I need to re-check the count again." for i in range(1, 80))
    finding = first_loop(text)
    assert not finding.degenerate
    assert finding.suspicious


def test_detector_stops_feeding_once_certain():
    detector = LoopDetector()
    fed = 0
    for _ in range(1000):
        fed += 1
        if detector.feed("thinking\n\n"):
            break
    # Certain once 160 chars repeat: 16 units, then the next check at a multiple of 32 chars.
    assert fed == 16
    assert detector.feed("anything") is True
    assert detector.finding is not None and detector.finding.at_char == 160


@given(st.text(max_size=MIN_COVER_CHARS - 1))
def test_nothing_shorter_than_the_cover_is_a_loop(text: str):
    # Below MIN_COVER_CHARS no tail is long enough, and there are fewer than the 200 words
    # the novelty window needs (each word takes at least one char).
    assert not judge(text).degenerate


@given(
    prefix=st.text(max_size=200),
    unit=st.text(min_size=1, max_size=100),
    extra=st.integers(min_value=0, max_value=5),
)
def test_any_unit_repeated_over_the_cover_is_caught(prefix: str, unit: str, extra: int):
    # Any unit repeated at least 3 times and over MIN_COVER_CHARS is an exactly periodic tail.
    repeats = max(3, -(-MIN_COVER_CHARS // len(unit))) + extra
    finding = judge(prefix + unit * repeats)
    assert finding.degenerate
    assert finding.tail is not None and finding.tail.repeats >= 3
