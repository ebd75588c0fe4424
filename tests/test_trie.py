"""servefit/trie.py: the trie-factored regex finds what the plain alternation of the same words,
longest first, finds (Python's re semantics are the reference)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from servefit.trie import trie_regex

WORDS = st.lists(st.text(alphabet="ab .-[", min_size=1, max_size=5), min_size=1, max_size=8)


@given(WORDS, st.text(alphabet="ab .-[x", max_size=40))
def test_finds_what_the_longest_first_alternation_finds(words: list[str], text: str) -> None:
    plain = re.compile("|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True)))
    trie = re.compile(trie_regex(words))
    assert [m.span() for m in trie.finditer(text)] == [m.span() for m in plain.finditer(text)]


def test_shared_prefixes_are_matched_once() -> None:
    pattern = trie_regex(["Load weight begin", "Load weight end", "Load"])
    assert pattern == r"Load(?:\ weight\ (?:begin|end))?"
