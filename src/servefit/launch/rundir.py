"""One directory per launch: runs/<UTC time>-<short id>/.

    engine.log      everything the engine wrote (stdout and stderr), created fresh for this
                    launch and never reused or appended to by another one
    argv.json       the exact argv executed, its working directory and the command as typed
    env.json        only the environment variables servefit set or changed for the engine
    plan.json       the plan of this launch (servefit plan --format json), when it was planned
    run.json        the run record (schema.RunRecord), rewritten atomically on every change
    diagnosis.txt   the doctor's diagnosis of engine.log after a failure
    supervisor.log  the supervisor process's own output (empty unless servefit itself failed)

Writes go to a temporary file in the same directory, are flushed to disk and then renamed over
the target (os.replace is atomic on POSIX), so a reader sees the old or the new file, never a
torn one. Read-modify-write of run.json holds an flock on run.lock, because the supervisor and
`servefit stop` both update it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from servefit.errors import ArgumentError
from servefit.launch.schema import RunRecord

RUNS_ENV = "SERVEFIT_RUNS_DIR"


def default_root() -> Path:
    """$SERVEFIT_RUNS_DIR, else $XDG_STATE_HOME/servefit/runs (~/.local/state/servefit/runs)."""
    env = os.environ.get(RUNS_ENV)
    if env:
        return Path(env).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "servefit" / "runs"


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class RunDir:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def log_path(self) -> Path:
        return self.path / "engine.log"

    @property
    def record_path(self) -> Path:
        return self.path / "run.json"

    @property
    def plan_path(self) -> Path:
        return self.path / "plan.json"

    @property
    def argv_path(self) -> Path:
        return self.path / "argv.json"

    @property
    def env_path(self) -> Path:
        return self.path / "env.json"

    @property
    def diagnosis_path(self) -> Path:
        return self.path / "diagnosis.txt"

    @property
    def supervisor_log_path(self) -> Path:
        return self.path / "supervisor.log"

    @property
    def _lock_path(self) -> Path:
        return self.path / "run.lock"

    # ---- creating

    @classmethod
    def create(cls, root: str | os.PathLike[str], now: float | None = None) -> RunDir:
        """A new, empty run directory; names sort by start time."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp(now if now is not None else time.time(), tz=timezone.utc)
        for _ in range(20):
            path = root / f"{stamp:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return cls(path)
        raise ArgumentError(f"cannot create a run directory under {root}")

    def write_json(self, path: Path, obj: Any) -> None:
        write_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")

    def open_new_log(self) -> Any:
        """engine.log, created here and now; an existing file is an error, never reused."""
        return open(self.log_path, "xb")  # noqa: SIM115 - handed to the engine process

    # ---- the record

    def read(self) -> RunRecord:
        return RunRecord.model_validate_json(self.record_path.read_text(encoding="utf-8"))

    def save(self, record: RunRecord) -> None:
        with self._locked():
            self._write(record)

    def _write(self, record: RunRecord) -> None:
        write_atomic(self.record_path, record.model_dump_json(indent=2) + "\n")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        import fcntl

        with open(self._lock_path, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def update(self) -> Iterator[RunRecord]:
        """Read, let the caller change, write back; all under the run's lock."""
        with self._locked():
            record = self.read()
            yield record
            self._write(record)

    def read_json(self, path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


def list_runs(root: str | os.PathLike[str]) -> list[RunDir]:
    """Run directories under `root` that have a record, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [RunDir(p) for p in sorted(root.iterdir()) if (p / "run.json").is_file()]


def resolve(root: str | os.PathLike[str], ref: str | None) -> RunDir:
    """A run by full name, short id (the part after the time), unique prefix, a path, or
    None/"latest" for the newest."""
    if ref and os.sep in ref and (Path(ref) / "run.json").is_file():
        return RunDir(ref)
    runs = list_runs(root)
    if not runs:
        raise ArgumentError(f"no runs under {root} (servefit launch creates them)")
    if ref in (None, "", "latest"):
        return runs[-1]
    exact = [r for r in runs if r.id == ref or r.id.split("-")[-1] == ref]
    if len(exact) == 1:
        return exact[0]
    prefix = [r for r in runs if r.id.startswith(ref)]  # type: ignore[arg-type]
    if len(prefix) == 1:
        return prefix[0]
    if not exact and not prefix:
        raise ArgumentError(f"no run {ref!r} under {root} (see `servefit runs`)")
    names = ", ".join(r.id for r in (exact or prefix)[:5])
    raise ArgumentError(f"run {ref!r} is ambiguous: {names}")
