"""One launch per port in a runs directory.

The preflight port check sees only a socket that is already listening; an engine binds its port
minutes after it starts (after the weights), so two launches on one port both pass it and the
second one's engine fails to bind while the first one answers. A launch therefore claims its
port in the runs directory before its engine starts: `<runs>/.ports/<port>` holds the run id.
A second launch on that port is refused with one line naming the run that holds it, until that
run has ended; a claim whose run has ended (its supervisor gone and no process of it left, in
its engine's group or carrying its SERVEFIT_RUN_ID outside it, or its record gone or
unreadable) is stale and taken over. A run whose engine exited while a process it started
lives on (a daemon that left the group still listening there) keeps its claim: taking it over
would start a second engine against that process. The check and the claim happen under one
flock, so two launches racing for a port cannot both win, and the loser is refused before
anything of it is started (supervisor.prepare_run claims before the supervisor is spawned).

The port alone is the key: on Linux 127.0.0.1:P and 0.0.0.0:P cannot both be bound.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from servefit.errors import ServefitError
from servefit.launch.liveness import run_is_live
from servefit.launch.rundir import RunDir, make_private_dir, open_private, write_atomic
from servefit.launch.schema import RunRecord

LOCK_DIR = ".ports"


class PortTaken(ServefitError):
    """Another live run of this runs directory holds the port (refused, like a preflight)."""

    exit_code = 1


def _holder(root: Path, run_id: str) -> RunRecord | None:
    """The record of the run holding a claim, None when that run is gone or unreadable."""
    try:
        rec = RunDir(root / run_id).read()
    except (OSError, ValueError):
        return None
    return rec if run_is_live(rec) else None


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[Path]:
    import fcntl

    where = root / LOCK_DIR
    with contextlib.suppress(FileExistsError):
        make_private_dir(where)
    with os.fdopen(open_private(where / ".lock", os.O_RDWR | os.O_CREAT), "r+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield where
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def claim(root: str | os.PathLike[str], port: int, run_id: str) -> None:
    """Claim `port` for `run_id`, or raise PortTaken naming the live run that holds it."""
    root = Path(root)
    with _locked(root) as where:
        path = where / str(port)
        other = _read(path)
        if other and other != run_id:
            rec = _holder(root, other)
            if rec is not None:
                raise PortTaken(
                    f"port {port} is taken by run {other} ({rec.state.replace('_', ' ')}); "
                    f"stop it first (servefit stop {other}) or choose another --port"
                )
        write_atomic(path, run_id + "\n")


def release(root: str | os.PathLike[str], port: int, run_id: str) -> None:
    """Give `port` up if `run_id` holds it (a newer run's claim is left alone)."""
    root = Path(root)
    with contextlib.suppress(OSError), _locked(root) as where:
        path = where / str(port)
        if _read(path) == run_id:
            path.unlink()


def holder(root: str | os.PathLike[str], port: int) -> str | None:
    """The run id that claims `port` (stale or not), None without a claim."""
    return _read(Path(root) / LOCK_DIR / str(port))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except (OSError, ValueError):
        return None
