"""The checks `servefit verify` runs, in order; later checks read what earlier ones found."""

from __future__ import annotations

from servefit.verify.checks import (
    degenerate,
    determinism,
    liveness,
    reasoning,
    reference,
    speculative,
    speed,
    tools,
    warm,
)
from servefit.verify.checks.base import Check

CHECKS: tuple[Check, ...] = (
    Check(liveness.NAME, liveness.TITLE, liveness.run, needs_generation=False),
    Check(determinism.NAME, determinism.TITLE, determinism.run),
    Check(degenerate.NAME, degenerate.TITLE, degenerate.run),
    Check(reasoning.NAME, reasoning.TITLE, reasoning.run),
    Check(tools.NAME, tools.TITLE, tools.run),
    Check(warm.NAME, warm.TITLE, warm.run),
    # After every generating check, so the acceptance covers them and the loops they saw.
    Check(speculative.NAME, speculative.TITLE, speculative.run),
    Check(reference.NAME, reference.TITLE, reference.run),
    Check(speed.NAME, speed.TITLE, speed.run),
)
