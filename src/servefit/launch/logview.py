"""`servefit logs`: a run's engine log (or diagnosis) as printed, redacted line by line.

engine.log stays exactly as the engine wrote it (0600, in a 0700 directory); what servefit
prints of it goes through the run's redactor: the engine's secret flags and argument names
(SGLang logs `server_args=ServerArgs(... api_key='...')`, vLLM `non-default args: {...
'api_key': [...]}`), secret environment names, URL credentials, and, while the engine runs, the
secret values of its own command line and environment. Only whole lines are redacted and
printed, so a secret is never split between two reads of a growing file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from servefit.launch.diagnose import tail
from servefit.launch.liveness import settle
from servefit.launch.rundir import RunDir
from servefit.redact import Redactor

FOLLOW_POLL_S = 0.25


def show(
    run: RunDir,
    path: Path,
    redactor: Redactor,
    echo: Callable[[str], None],
    lines: int | None = None,
    follow: bool = False,
) -> None:
    """Print `path` (the last `lines` lines when given), then, with `follow`, what the engine
    adds until the run ends (also when its supervisor died: the run is settled then). `echo`
    prints one line."""
    if lines is not None:
        for line in tail(path, lines):
            echo(redactor.text(line))
        pos = path.stat().st_size
        rest = b""
    else:
        pos, rest = _emit(path, 0, b"", redactor, echo)
    while follow:
        time.sleep(FOLLOW_POLL_S)
        before = pos
        pos, rest = _emit(path, pos, rest, redactor, echo)
        if pos == before and _ended(run):
            break
    if rest:
        echo(redactor.text(rest.decode("utf-8", "replace")))


def _ended(run: RunDir) -> bool:
    """The run has ended: its record says so, or it is settled now because its supervisor and
    engine are both gone (liveness.settle); a record that cannot be read ends the following."""
    try:
        rec = run.read()
    except (OSError, ValueError):
        return True
    return settle(run, rec).terminal


def _emit(
    path: Path, pos: int, rest: bytes, redactor: Redactor, echo: Callable[[str], None]
) -> tuple[int, bytes]:
    """Print the whole lines after `pos`; returns the new position and the unfinished line."""
    with open(path, "rb") as fh:
        fh.seek(pos)
        data = fh.read()
    pos += len(data)
    data = rest + data
    end = data.rfind(b"\n")
    if end < 0:
        return pos, data
    for line in data[:end].decode("utf-8", "replace").split("\n"):
        echo(redactor.text(line))
    return pos, data[end + 1 :]
