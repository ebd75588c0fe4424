""" "did you mean X?": the closest known name to a misspelled one (GPUs, model ids, engine
names, engine flags), by difflib's ratio over a normalised spelling."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def _plain(s: str) -> str:
    return s.lower().replace("_", "-")


def closest(
    word: str,
    choices: Iterable[str],
    *,
    cutoff: float = 0.6,
    key: Callable[[str], str] = _plain,
) -> str | None:
    """The choice closest to `word`, or None when nothing is close enough."""
    by_key: dict[str, str] = {}
    for c in choices:
        by_key.setdefault(key(c), c)
    import difflib  # here: only a misspelling needs it

    hit = difflib.get_close_matches(key(word), list(by_key), n=1, cutoff=cutoff)
    return by_key[hit[0]] if hit else None


def hint(word: str, choices: Iterable[str], **kw) -> str:
    """ "; did you mean X?" or ""."""
    best = closest(word, choices, **kw)
    return f"; did you mean {best}?" if best else ""
