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

Private: the directory is 0700 and every file in it 0600 (engine.log included, which SGLang
fills with its server arguments), whatever the umask. Every file servefit writes here goes
through the run's redactor (servefit.redact): secrets appear as `***` + fingerprint; only
engine.log, the engine's own output, is kept verbatim. A run directory of another user is
refused, never read.
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

from servefit.errors import ArgumentError, ServefitError
from servefit.launch.schema import LaunchSpec, RunRecord
from servefit.redact import Redactor

RUNS_ENV = "SERVEFIT_RUNS_DIR"


class RunWriteError(ServefitError):
    """A new run's files cannot be written (a full disk, a quota): nothing was started."""

    exit_code = 1


class UnreadableRecord(ServefitError, ValueError):
    """A run.json that is not a run record (torn by hand, written by something else). A
    ValueError too, so callers that skip an unreadable record keep doing so."""


def default_root() -> Path:
    """$SERVEFIT_RUNS_DIR, else $XDG_STATE_HOME/servefit/runs (~/.local/state/servefit/runs)."""
    from servefit.statedir import state_dir

    return state_dir(RUNS_ENV, "runs")


DIR_MODE = 0o700
FILE_MODE = 0o600


def open_private(path: Path, flags: int) -> int:
    """os.open with mode 0600 whatever the umask (the umask only removes bits; fchmod sets
    exactly these); for a file that already exists the mode is set again."""
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def make_private_dir(path: Path) -> None:
    """mkdir (not existing yet) and chmod 0700, whatever the umask."""
    path.mkdir(mode=DIR_MODE)
    os.chmod(path, DIR_MODE)


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 minus the umask; exactly 0600 here
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
    """A run's directory. `spec` (what to execute, secrets included) exists only in the
    process that prepared the run and in its supervisor; `redactor` cleans every write."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        spec: LaunchSpec | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.path = Path(path)
        self.spec = spec
        self._redactor = redactor

    @property
    def redactor(self) -> Redactor:
        """The launch's own (its secret values known) or, for a run read later, every
        engine's secret flags and names."""
        if self._redactor is None:
            from servefit.engines.secretflags import redactor

            self._redactor = redactor()
        return self._redactor

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

    @property
    def stop_marker_path(self) -> Path:
        return self.path / "stop.requested"

    def mark_stop_requested(self, by: str) -> bool:
        """`servefit stop`'s request as a file of its own, for when run.json cannot be
        rewritten (a full disk): creating a file needs no free data block, its content
        (who asked) is best effort. False when even that fails."""
        try:
            fd = open_private(self.stop_marker_path, os.O_WRONLY | os.O_CREAT)
        except OSError:
            return False
        with contextlib.suppress(OSError):  # redacted, then cut: like every file written here
            os.write(fd, self.redactor.text(by).encode()[:200])
        os.close(fd)
        return True

    def stop_marker(self) -> str | None:
        """Who asked to stop the run through stop.requested, or None without one."""
        try:
            return (
                self.stop_marker_path.read_text(encoding="utf-8", errors="replace").strip()
                or "servefit stop"
            )
        except OSError:
            return None

    # ---- creating

    @classmethod
    def create(
        cls,
        root: str | os.PathLike[str],
        now: float | None = None,
        *,
        spec: LaunchSpec | None = None,
        redactor: Redactor | None = None,
    ) -> RunDir:
        """A new, empty, private run directory; names sort by start time."""
        root = Path(root)
        if not root.is_dir():
            root.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):  # another launch made it meanwhile
                make_private_dir(root)
        stamp = datetime.fromtimestamp(now if now is not None else time.time(), tz=timezone.utc)
        for _ in range(20):
            path = root / f"{stamp:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
            try:
                make_private_dir(path)
            except FileExistsError:
                continue
            return cls(path, spec=spec, redactor=redactor)
        raise ArgumentError(f"cannot create a run directory under {root}")

    def write_json(self, path: Path, obj: Any) -> None:
        """JSON, redacted: values under secret names, and every string as text."""
        # allow_nan=False: NaN/Infinity are not JSON; refused here rather than written unreadable
        text = json.dumps(self.redactor.data(obj), indent=2, sort_keys=False, allow_nan=False)
        write_atomic(path, text + "\n")

    def write_text(self, path: Path, text: str) -> None:
        write_atomic(path, self.redactor.text(text))

    def open_new_log(self) -> Any:
        """engine.log, created here and now (0600); an existing file is an error, never
        reused. The engine writes it verbatim."""
        fd = open_private(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        return os.fdopen(fd, "wb")

    def open_supervisor_log(self) -> Any:
        fd = open_private(self.supervisor_log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return os.fdopen(fd, "ab")

    # ---- ownership

    def owner_uid(self) -> int:
        return self.path.stat().st_uid

    def check_owner(self) -> None:
        """A run of another user is refused: its files are private, and its processes are
        not ours to signal."""
        uid = self.owner_uid()
        if uid != os.geteuid():
            raise ArgumentError(
                f"run {self.id} belongs to {_user_name(uid)}, not to you: servefit reads and "
                f"stops only your own runs ({self.path})"
            )

    # ---- the record

    def read(self) -> RunRecord:
        """The run record; UnreadableRecord (one line) when run.json is not one."""
        try:
            return RunRecord.model_validate_json(self.record_path.read_text(encoding="utf-8"))
        except ValueError as exc:  # JSON, UTF-8 or validation
            raise UnreadableRecord(f"run {self.id}: run.json is unreadable ({_why(exc)})") from None

    def save(self, record: RunRecord) -> None:
        with self._locked():
            self._write(record)

    def _write(self, record: RunRecord) -> None:
        self.write_json(self.record_path, record.model_dump(mode="json"))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        import fcntl

        with os.fdopen(open_private(self._lock_path, os.O_RDWR | os.O_CREAT), "r+b") as fh:
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


def _why(exc: ValueError) -> str:
    """The first problem, in one short line."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _user_name(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _has_record(path: Path) -> bool:
    try:
        return (path / "run.json").is_file()
    except PermissionError:  # another user's private run: listed by its owner, never read
        return path.is_dir()


def _all_runs(root: Path) -> list[RunDir]:
    if not root.is_dir():
        return []
    return [RunDir(p) for p in sorted(root.iterdir()) if _has_record(p)]


def list_runs(root: str | os.PathLike[str]) -> list[RunDir]:
    """Your run directories under `root` that have a record, oldest first."""
    uid = os.geteuid()
    return [r for r in _all_runs(Path(root)) if r.owner_uid() == uid]


def foreign_runs(root: str | os.PathLike[str]) -> list[RunDir]:
    """Run directories under `root` of other users (listed by name only, never read)."""
    uid = os.geteuid()
    return [r for r in _all_runs(Path(root)) if r.owner_uid() != uid]


def resolve(root: str | os.PathLike[str], ref: str | None) -> RunDir:
    """One of your runs by full name, short id (the part after the time), unique prefix, a
    path, or None/"latest" for the newest. A match of another user is refused."""
    run = _resolve(root, ref)
    run.check_owner()
    return run


def _resolve(root: str | os.PathLike[str], ref: str | None) -> RunDir:
    if ref and os.sep in ref and _has_record(Path(ref)):
        return RunDir(ref)
    latest = ref in (None, "", "latest")
    # A named run of another user is found, then refused by name (resolve); "latest" is yours.
    runs = list_runs(root) if latest else _all_runs(Path(root))
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
