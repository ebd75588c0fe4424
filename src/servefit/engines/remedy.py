"""The flag change an engine's own error message names: "lower max_num_seqs to at most 175",
"the derived max_model_len (max_position_embeddings=8192 ...)", "the estimated maximum model
length is 5120". Each engine declares its rules (engines/<engine>/remedies.py) as the message's
pattern and the engine attributes it sets; the fix search tries these first, so a failure the
engine explains is fixed by what the engine says, before any grid is searched.

Reading the message, not the profile's internals, means the same rule fixes a planned failure
and one doctor reads from a real log.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from servefit.frozen import frozen


@frozen
class Remedy:
    """One failure class the engine names, and the change that removes it."""

    name: str  # the failure class, for tests and notes
    pattern: re.Pattern[str]  # the engine's message (its numbers captured)
    args: Callable[[re.Match[str]], dict[str, Any] | None]  # the change; None: no flag fixes it
    cite: str  # where the engine raises the message


def remedy_for(rules: tuple[Remedy, ...], error: str | None) -> tuple[str, dict[str, Any]] | None:
    """(failure class, engine args) of the first rule matching `error`, None when none does."""
    if not error:
        return None
    for rule in rules:
        m = rule.pattern.search(error)
        if m is None:
            continue
        args = rule.args(m)
        if args:
            return rule.name, args
    return None


def floor2(x: float) -> float:
    """Round down to 0.01: a fraction the flag can be set to without exceeding `x`."""
    return math.floor(x * 100 + 1e-9) / 100
