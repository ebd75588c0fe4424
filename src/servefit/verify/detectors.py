"""Degenerate-output detection on streamed text: repeating tails and n-gram novelty.

Two signals, each cheap enough to run while tokens arrive:

* **repeating tail**: the longest suffix of the text that is periodic (the smallest period of
  every suffix comes from one prefix-function pass over the reversed tail, KMP). A loop such as
  `thinking\\n\\nthinking\\n\\n...` or `wife's wife's ...` is an exactly periodic tail; it is
  certain once the unit has repeated `MIN_REPEATS` times over at least `MIN_COVER_CHARS`.
* **n-gram novelty**: distinct word 4-grams / all 4-grams over the last `NOVELTY_WINDOW`
  words. Loops that are not exactly periodic (a counter inside the unit, small variations)
  still reuse the same 4-grams; healthy prose, code, lists and tables stay far above the floor.

Thresholds are set so that the healthy texts in tests/verify/corpus (docs, code, numbered
steps, tables, counting) never trigger at any point of their stream, while the real degenerate
texts there trigger within a few hundred characters.
"""

from __future__ import annotations

import re

from servefit.frozen import frozen

MIN_COVER_CHARS = 160  # a repeating tail shorter than this is never called a loop
MIN_REPEATS = 3.0  # ... nor one whose unit repeats fewer times
MAX_PERIOD_CHARS = 512  # longest loop unit searched for
WINDOW_CHARS = 2048  # tail of the text the detectors look at
NOVELTY_N = 4
NOVELTY_WINDOW = 200  # words
NOVELTY_FLOOR = 0.2  # distinct/total 4-grams below this over a full window is a loop
# Below this (but above the floor) a text is suspicious, not certainly looping: a loop with a
# counter in its unit ("Step 7: check again. Step 8: ...") sits near 0.35, healthy texts in the
# corpus never go below 0.44 (test code full of similar asserts).
SUSPICIOUS_NOVELTY = 0.4
CHECK_EVERY_CHARS = 32  # streamed text between two checks
_PREFILTER = 16  # a periodic tail repeats its last 16 chars exactly one period earlier

_WORD_RE = re.compile(r"\w+|[^\w\s]+")


def tokenize_words(text: str) -> list[str]:
    """Words and punctuation runs, whitespace dropped: the unit of n-grams and comparisons."""
    return _WORD_RE.findall(text)


@frozen
class TailRepeat:
    """The longest periodic tail: `unit` repeated `repeats` times over `covered` chars."""

    unit: str
    period: int
    covered: int

    @property
    def repeats(self) -> float:
        return self.covered / self.period


@frozen
class Finding:
    """What the detectors concluded about a text."""

    degenerate: bool
    reason: str  # one line: the loop found, or the strongest signal seen
    tail: TailRepeat | None = None
    novelty: float | None = None  # None until the window holds NOVELTY_WINDOW words
    at_char: int | None = None  # where the loop became certain (streaming)

    @property
    def suspicious(self) -> bool:
        """Not a certain loop, but repetitive enough to mention."""
        return (
            not self.degenerate and self.novelty is not None and self.novelty < SUSPICIOUS_NOVELTY
        )


def _prefix_function(s: str) -> list[int]:
    pi = [0] * len(s)
    k = 0
    for i in range(1, len(s)):
        while k and s[i] != s[k]:
            k = pi[k - 1]
        if s[i] == s[k]:
            k += 1
        pi[i] = k
    return pi


def tail_repeat(
    text: str, *, max_period: int = MAX_PERIOD_CHARS, min_repeats: float = 2.0
) -> TailRepeat | None:
    """The longest periodic tail whose unit repeats at least `min_repeats` times, or None.

    For the reversed tail r, r[:l] has smallest period l - pi[l-1]; reversal keeps periods, so
    that is also the smallest period of the text's last l characters.
    """
    tail = text[-WINDOW_CHARS:]
    if len(tail) < 2:
        return None
    pi = _prefix_function(tail[::-1])
    best: TailRepeat | None = None
    for length in range(2, len(tail) + 1):
        period = length - pi[length - 1]
        if period <= max_period and length >= min_repeats * period:
            best = TailRepeat(unit=tail[-length:][:period], period=period, covered=length)
    return best


def ngram_novelty(text: str, *, n: int = NOVELTY_N, window: int = NOVELTY_WINDOW) -> float | None:
    """Distinct / total word n-grams over the last `window` words; None if fewer words."""
    words = _WORD_RE.findall(text[-WINDOW_CHARS * 2 :])[-window:]
    if len(words) < window:
        return None
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams)


def _could_repeat(text: str, max_period: int) -> bool:
    # Cheap gate (a C-speed substring search) before the O(window) prefix function: a periodic
    # tail of period p covering >= p + 16 chars has its last 16 chars again p chars earlier.
    if len(text) < MIN_COVER_CHARS:
        return False
    needle = text[-_PREFILTER:]
    start = max(0, len(text) - _PREFILTER - max_period)
    return text.find(needle, start, len(text) - 1) != -1


def _describe(unit: str) -> str:
    shown = unit if len(unit) <= 40 else unit[:37] + "..."
    return repr(shown)


def judge(text: str) -> Finding:
    """Is the text degenerate now, judged on its tail?"""
    tail = (
        tail_repeat(text, min_repeats=MIN_REPEATS)
        if _could_repeat(text, MAX_PERIOD_CHARS)
        else None
    )
    if tail and tail.covered >= MIN_COVER_CHARS:
        return Finding(
            True,
            f"the tail repeats {_describe(tail.unit)} {tail.repeats:.0f} times "
            f"({tail.covered} chars)",
            tail=tail,
        )
    novelty = ngram_novelty(text)
    if novelty is not None and novelty < NOVELTY_FLOOR:
        return Finding(
            True,
            f"only {novelty:.0%} of the last {NOVELTY_WINDOW} words' {NOVELTY_N}-grams are new",
            tail=tail,
            novelty=novelty,
        )
    if novelty is None:
        return Finding(False, "no repeating tail", tail=tail, novelty=None)
    return Finding(
        False,
        f"no repeating tail; {NOVELTY_N}-gram novelty {novelty:.0%}",
        tail=tail,
        novelty=novelty,
    )


class LoopDetector:
    """Feed streamed text; `feed` returns True as soon as a loop is certain."""

    def __init__(self, check_every_chars: int = CHECK_EVERY_CHARS) -> None:
        self._check_every = check_every_chars
        self._text: list[str] = []
        self._length = 0
        self._next_check = check_every_chars
        self.finding: Finding | None = None  # set once a loop is certain
        self.min_novelty: float | None = None  # lowest novelty seen at any check

    @property
    def text(self) -> str:
        return "".join(self._text)

    def feed(self, piece: str) -> bool:
        if self.finding is not None:
            return True
        self._text.append(piece)
        self._length += len(piece)
        if self._length < self._next_check:
            return False
        self._next_check = self._length + self._check_every
        # Only the tail matters; keep the buffer bounded on long streams.
        joined = "".join(self._text)
        if len(joined) > 4 * WINDOW_CHARS:
            self._text = [joined[-2 * WINDOW_CHARS :]]
            joined = self._text[0]
        finding = judge(joined)
        self._note(finding.novelty)
        if finding.degenerate:
            self.finding = Finding(
                True, finding.reason, finding.tail, finding.novelty, at_char=self._length
            )
            return True
        return False

    def _note(self, novelty: float | None) -> None:
        if novelty is not None and (self.min_novelty is None or novelty < self.min_novelty):
            self.min_novelty = novelty

    def finish(self) -> Finding:
        """The verdict at the end of the stream; `novelty` is the lowest seen along the way."""
        if self.finding is not None:
            return self.finding
        final = judge(self.text)
        self._note(final.novelty)
        if final.degenerate:
            self.finding = Finding(True, final.reason, final.tail, final.novelty, self._length)
            return self.finding
        reason = final.reason
        if self.min_novelty is not None and self.min_novelty < SUSPICIOUS_NOVELTY:
            reason = f"no certain loop, but {NOVELTY_N}-gram novelty fell to {self.min_novelty:.0%}"
        return Finding(False, reason, final.tail, self.min_novelty)


def first_loop(text: str, chunk_chars: int = 8) -> Finding:
    """Replay a finished text as a stream of `chunk_chars` pieces; the first certain loop, if any."""
    detector = LoopDetector()
    for i in range(0, len(text), chunk_chars):
        if detector.feed(text[i : i + chunk_chars]):
            return detector.finding  # type: ignore[return-value]
    return detector.finish()
