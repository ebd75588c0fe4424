"""Split a log into launches, pick the one to diagnose, and check it against --since / --command.

A new launch starts at
  * a start marker (SGLang `server_args=ServerArgs(`, vLLM's version line or `non-default args`,
    a launch command written into the file) once the current launch got past its arguments;
  * a start-up line (distributed init, weight load) after the current launch reached an
    outcome (ready, failed, exited);
  * a weight load on a rank whose pools already exist, unless it is SGLang's speculative draft
    (a second ModelRunner on the same rank: sglang/srt/speculative/eagle_worker.py);
  * a line of the other engine;
  * a start-up-only error (pool sizing, arguments) after the current launch was ready.
Only facts are kept: the last MAX_KEPT launches, as frozen LaunchFacts.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

from servefit.doctor.accumulate import PHASE_OF, LaunchAcc
from servefit.doctor.argdump import args_from_command
from servefit.doctor.facts import LaunchFacts, LogFacts
from servefit.doctor.logfile import is_stdin
from servefit.doctor.reader import Hit, LineSource, scan
from servefit.doctor.rules import EventKind
from servefit.doctor.serving import SERVING_KEYS, ServingLines
from servefit.errors import ArgumentError, ServefitError
from servefit.validate import readable_file

MAX_KEPT = 50
# what applying a recognised line can raise when its values are not what the rule promised
_UNREADABLE = (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError)
_START = {EventKind.ARGS_DUMP, EventKind.VERSION, EventKind.ARGS_NONDEFAULT, EventKind.COMMAND}
# errors an engine raises only while it starts (memory pool sizing, argument checks)
_STARTUP_ONLY_ERRORS = {"startup_memory", "arg_error"}


class Splitter:
    def __init__(self) -> None:
        self.current = LaunchAcc(1)
        # the last MAX_KEPT launches, frozen only at the end: older ones are never frozen
        self._closed: deque[LaunchAcc] = deque(maxlen=MAX_KEPT)
        self.total = 0

    @property
    def kept(self) -> list[LaunchFacts]:
        return [acc.freeze() for acc in self._closed]

    def feed(self, hit: Hit) -> None:
        if self._starts_new(hit):
            self._close()
            self.current = LaunchAcc(self.total + 1)
        self.current.apply(hit)

    def finish(self) -> None:
        self._close()

    def _close(self) -> None:
        acc = self.current
        if acc.empty or acc.kinds <= {EventKind.COMMAND}:
            return  # a command with no log after it is not a launch
        self.total += 1
        acc.index = self.total
        self._closed.append(acc)

    def _starts_new(self, hit: Hit) -> bool:
        acc, kind = self.current, hit.event["kind"]
        if acc.empty:
            return False
        if kind in _START:
            if acc.max_phase >= 2 or acc.outcome != "incomplete":
                return True
            if kind == EventKind.COMMAND:
                if acc.kinds <= {EventKind.COMMAND}:
                    acc.first_line = None  # a later command replaces a bare earlier one
                return False
            if kind == EventKind.VERSION and acc.kinds <= {EventKind.VERSION, EventKind.COMMAND}:
                return False  # a container banner and the server's own version line
            return kind in acc.kinds  # a second args dump / version line: another launch
        engine = hit.rule.engine if hit.rule is not None else None
        if engine and acc.engine and engine != acc.engine:
            return True
        if (
            kind == EventKind.ERROR
            and acc.outcome == "ready"
            and hit.event.get("error") in _STARTUP_ONLY_ERRORS
        ):
            # pool sizing and argument errors happen before the ready line, never after it: a
            # later launch whose first lines did not reach this file (a log level that hides
            # them, an excerpt) failed here, not the launch that was serving
            return True
        phase = PHASE_OF.get(kind)
        if phase in (2, 3):
            if acc.outcome != "incomplete":
                return True
            r = acc.ranks.get(hit.line.rank)
            if r is not None and r.phase >= 4 and not r.draft:
                return not (acc.engine == "sglang" and acc.spec_evidence)
            if (
                kind == EventKind.WEIGHTS_END
                and r is not None
                and r.phase == 3
                and "weights_gib" in r.values
                and not r.draft
            ):
                return acc.engine == "vllm"  # vLLM loads the drafter inside the same measurement
        return False


def read_log(
    source: str | Path | IO[bytes] | Iterable[str] | Iterable[bytes], *, fast: bool = True
) -> LogFacts:
    """Parse a whole log in one streaming pass. `fast` reads a busy server's serving lines
    straight into the launch (doctor/serving.py); the facts are the same without it. A path,
    "-" / "/dev/stdin" or a binary file object is opened by doctor/logfile.py (compressed,
    UTF-16, bare-CR logs); a bad one is a one-line error."""
    path = str(source) if isinstance(source, (str, Path)) else "<stream>"
    size = modified = None
    if isinstance(source, (str, Path)) and not is_stdin(source):
        # a regular file only: a FIFO would block until a writer appears, a device never ends
        p = readable_file(source, "log")
        st = p.stat()
        size = st.st_size
        modified = datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds")
        source = p
    splitter = Splitter()
    serving = ServingLines(lambda: splitter.current) if fast else None
    lines = LineSource(
        source,
        fast=serving,
        bulk=serving.region if serving is not None else None,
        fast_keys=SERVING_KEYS if serving is not None else frozenset(),
    )
    try:
        for hit in scan(lines):
            try:
                splitter.feed(hit)
            except _UNREADABLE:  # values a rule read but the launch's facts cannot hold
                lines.skip(hit.line.no)
    except OSError as exc:
        raise ServefitError(f"cannot read {path}: {exc.strerror or exc}") from None
    splitter.finish()
    kept = splitter.kept
    return LogFacts(
        path=path,
        size_bytes=size,
        modified=modified,
        lines=lines.lines,
        ends_mid_line=lines.ends_mid_line,
        launches_total=splitter.total,
        launches=kept,
        dropped_launches=max(0, splitter.total - len(kept)),
        skipped_lines=lines.skipped,
        first_skipped_line=lines.first_skipped,
        read_notes=list(lines.notes),
    )


# ---------------------------------------------------------------------------------------------
# Which launch to diagnose
# ---------------------------------------------------------------------------------------------


def pick(
    log: LogFacts, command_args: dict[str, Any] | None = None
) -> tuple[LaunchFacts | None, list[str]]:
    """The latest complete launch (one with an outcome), or the one matching --command; notes."""
    notes: list[str] = list(log.read_notes)
    if log.skipped_lines:
        notes.append(
            f"{log.skipped_lines:,} line(s) could not be read and were skipped (torn or corrupted "
            f"values), the first at line {log.first_skipped_line}"
        )
    if not log.launches:
        return None, [*notes, "no engine start-up lines found in this file"]
    if log.launches_total > 1:
        notes.append(f"the file holds {log.launches_total} launches")
    chosen = None
    if command_args:
        matching = [x for x in log.launches if x.args and not arg_differences(x.args, command_args)]
        if matching and matching[-1] is not log.launches[-1]:
            chosen = matching[-1]
            notes.append(
                f"diagnosing launch {chosen.index} (lines {chosen.first_line}-{chosen.last_line}): the latest "
                "whose arguments match --command"
            )
    if chosen is None:
        complete = [x for x in log.launches if x.outcome != "incomplete"]
        last = log.launches[-1]
        chosen = complete[-1] if complete else last
        if chosen is not last:
            notes.append(
                f"the last launch (lines {last.first_line}-{last.last_line}) has no outcome: it stops during "
                f"'{last.phase}' (still starting, killed, or the file was cut); diagnosing launch "
                f"{chosen.index} (lines {chosen.first_line}-{chosen.last_line}) instead"
            )
        elif log.launches_total > 1:
            notes.append(
                f"diagnosing the latest, launch {chosen.index} (lines {chosen.first_line}-{chosen.last_line})"
            )
    if log.ends_mid_line:
        notes.append(
            "the file ends in the middle of a line: it was cut, or the engine was still writing"
        )
    return chosen, notes


# ---------------------------------------------------------------------------------------------
# --since
# ---------------------------------------------------------------------------------------------

_REL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*(?:ago)?\s*$")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """'2026-04-20 10:00[:SS]', ISO 'T' form, 'HH:MM[:SS]' (today), or '30m' / '2h' / '1d' ago."""
    now = now or datetime.now()
    m = _REL.match(text)
    if m:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[m.group(2)]
        try:
            return now - timedelta(**{unit: float(m.group(1))})
        except (OverflowError, ValueError):
            raise ArgumentError(
                f"--since {text!r}: that is before any date a log can carry"
            ) from None
    t = text.strip().replace("T", " ")
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(t, fmt)
        except ValueError:
            pass
    for fmt in ("%H:%M:%S", "%H:%M"):
        try:
            clock = datetime.strptime(t, fmt)
            return now.replace(
                hour=clock.hour, minute=clock.minute, second=clock.second, microsecond=0
            )
        except ValueError:
            pass
    raise ArgumentError(
        f"--since {text!r}: expected 'YYYY-MM-DD HH:MM[:SS]', 'HH:MM', or an age like 30m / 2h / 1d"
    )


def log_time(ts: str | None, year: int) -> datetime | None:
    """A log timestamp: SGLang's has the year; vLLM's "%m-%d %H:%M:%S" takes `year`."""
    if not ts:
        return None
    for fmt, text in (("%Y-%m-%d %H:%M:%S", ts), ("%Y-%m-%d %H:%M:%S", f"{year}-{ts}")):
        try:
            return datetime.strptime(text[:19], fmt)
        except ValueError:
            continue
    return None


def staleness(log: LogFacts, launch: LaunchFacts, since: datetime) -> str | None:
    """Why the launch cannot be the one started after `since`, or None."""
    start = log_time(launch.start_time, since.year)
    if start is not None:
        if start < since:
            return (
                f"this launch started at {start:%Y-%m-%d %H:%M:%S}, before --since {since:%Y-%m-%d %H:%M:%S}: "
                "the file holds an older launch; the one you started after that did not write here "
                "(it failed before logging, logs elsewhere, or the file was not truncated)"
            )
        return None
    if log.modified:
        mtime = datetime.fromisoformat(log.modified)
        if mtime < since:
            return (
                f"the file was last written at {mtime:%Y-%m-%d %H:%M:%S}, before --since "
                f"{since:%Y-%m-%d %H:%M:%S}, and its lines carry no timestamps: it is stale"
            )
    return None


# ---------------------------------------------------------------------------------------------
# --command
# ---------------------------------------------------------------------------------------------

# Values the engine rewrites while resolving its args (the log shows the resolved one).
_EQUIVALENT = {("speculative_algorithm", "NEXTN"): "EAGLE"}


def _norm(key: str, value: Any) -> Any:
    if isinstance(value, str):
        value = _EQUIVALENT.get((key, value.upper()), value)
        if key in ("model_path", "model", "model_tag", "tokenizer_path"):
            return os.path.basename(value.rstrip("/")).lower()
        try:
            return float(value)
        except ValueError:
            return value
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value


def arg_differences(
    log_args: dict[str, Any], command_args: dict[str, Any]
) -> list[tuple[str, Any, Any]]:
    """(arg, value in the log, value in --command) for args both name with different values."""
    out = []
    for key, want in command_args.items():
        if key not in log_args:
            continue
        have = log_args[key]
        a, b = _norm(key, have), _norm(key, want)
        if isinstance(a, float) and isinstance(b, float):
            if abs(a - b) <= 1e-9 * max(1.0, abs(b)):
                continue
        elif a == b:
            continue
        out.append((key, have, want))
    return out


def command_args(text: str) -> dict[str, Any]:
    """--command's engine args; a one-line error when it is not an engine launch."""
    from servefit.engines.command import parse_launch_command

    parse_launch_command(text)  # raises ArgumentError with the reason
    return args_from_command(text)


def command_env(text: str) -> dict[str, str]:
    """--command's environment assignments ("VLLM_CPU_KVCACHE_SPACE=1 vllm serve ..."): the
    replay sizes the launch with them, as the engine read them."""
    from servefit.engines.command import parse_launch_command

    return dict(parse_launch_command(text).env)


def quote_command(entrypoint: str, argv: list[str], env: dict[str, str]) -> str:
    env_part = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return " ".join(x for x in (env_part, entrypoint, shlex.join(argv)) if x)
