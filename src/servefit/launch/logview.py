"""`servefit logs`: a run's engine log (or diagnosis) as printed, redacted line by line.

engine.log stays exactly as the engine wrote it (0600, in a 0700 directory); what servefit
prints of it goes through the run's redactor: the engine's secret flags and argument names
(SGLang logs `server_args=ServerArgs(... api_key='...')`, vLLM `non-default args: {...
'api_key': [...]}`), secret environment names, URL credentials, and, while the engine runs, the
secret values of its own command line and environment. Only whole lines are redacted and
printed, so a secret is never split between two reads of a growing file.

The log is read the way the doctor reads it (doctor/logfile.py): a compressed or UTF-16 file
prints as its text, a bare-CR one as lines, and memory stays bounded (a block, plus at most
MAX_LINE bytes of an unfinished line; a longer line is printed cut, at a space, and says so).
`--follow` goes on from where that read stopped, in the file's own bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from servefit.doctor.logfile import LineCutter, last_lines, lines_of, open_log
from servefit.errors import ServefitError
from servefit.launch.liveness import settle
from servefit.launch.rundir import RunDir
from servefit.redact import Redactor

FOLLOW_POLL_S = 0.25
READ_BYTES = 1 << 20  # read at a time: memory stays bounded on a log of any size


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
    cutter = LineCutter()
    try:
        with open_log(path) as text:
            if lines is None:
                for line in lines_of(text, cutter):
                    echo(redactor.text(line))
            else:
                kept = last_lines(text, lines, cutter)
                if not follow:  # the unfinished last line counts as one, as for tail -n
                    kept = [*kept, *cutter.flush()][-lines:] if lines else []
                for line in kept:
                    echo(redactor.text(line))
            pos = text.raw_pos
    except OSError as exc:
        raise ServefitError(f"cannot read {path}: {exc.strerror or exc}") from None
    rest = cutter.rest
    # a file that is not its own text (compressed, UTF-16) is not a log the engine is writing
    while follow and pos is not None:
        time.sleep(FOLLOW_POLL_S)
        before = pos
        pos, rest = _emit(path, pos, rest, redactor, echo)
        if pos == before and _ended(run):
            break
    for line in LineCutter(rest).flush():
        echo(redactor.text(line))


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
    """Print the whole lines after `pos`; returns the new position and the unfinished line
    (at most MAX_LINE bytes of it: logfile.LineCutter)."""
    cutter = LineCutter(rest)
    with open(path, "rb") as fh:
        fh.seek(pos)
        while data := fh.read(READ_BYTES):
            pos += len(data)
            for line in cutter.feed(data):
                echo(redactor.text(line))
    return pos, cutter.rest
