"""Input validation at the edge: numbers, paths and JSON, one clear error line each.

Every value a user hands servefit (a CLI option, an API argument, a file) passes one of these
checks before any arithmetic or I/O uses it, so that bad input ends as a servefit error
(`servefit: error: ...`, exit 2) and never as a traceback, a hang or a silently wrong number:

* numbers: floats finite and inside a range (nan / inf / 1e300 are refused), integers bounded;
* paths: `~user` that does not exist, over-long names, NUL bytes, FIFOs and devices (reading
  one blocks forever), directories given as files, unreadable or unwritable places;
* JSON: size and nesting depth limited (a 100,000-deep document overflows Python's parser's
  recursion), huge integers refused, text that is not UTF-8 named as such.

The click parameter types at the end wrap the same functions for the command line, so each
rule lives here once.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import click

from servefit.errors import ArgumentError, ServefitError

# Figures far beyond any real deployment, small enough that arithmetic on them stays exact and
# cheap: 16 TiB of memory per GPU, 2**16 GPUs, a day of seconds for timeouts.
MAX_GIB = float(1 << 14)
MAX_MIB = 1 << 24
MAX_GPUS = 1 << 16
MAX_SECONDS = 86_400.0 * 7
# Counts of tokens and requests: both engines index token slots with int32 tensors.
MAX_COUNT = (1 << 31) - 1

# Linux PATH_MAX / NAME_MAX: longer names fail in the kernel with ENAMETOOLONG.
_PATH_MAX = 4096
_NAME_MAX = 255

# JSON limits: real config.json files are kilobytes, safetensors index files a few MB, and no
# real document nests deeper than a handful of levels.
MAX_JSON_BYTES = 64 << 20
_MAX_INT_DIGITS = 40  # 10**40 is beyond any count or size; int() of more digits is quadratic
_INT_TEXT = re.compile(rf"[+-]?\d{{1,{_MAX_INT_DIGITS}}}")


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------


def finite_float(
    value: Any,
    what: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    error: type[ServefitError] = ArgumentError,
) -> float:
    """`value` as a finite float in [low, high] ((low, high] with `low_open`)."""
    if isinstance(value, bool):
        raise error(f"{what} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise error(f"{what} must be a number, got {_show(value)}") from None
    if not math.isfinite(number):
        raise error(f"{what} must be a finite number, got {_show(value)}")
    if low is not None and (number < low or (low_open and number == low)):
        raise error(f"{what} must be {_above(low, low_open)}, got {number:g}")
    if high is not None and number > high:
        raise error(f"{what} must be at most {high:g}, got {number:g}")
    return number


def bounded_int(
    value: Any,
    what: str,
    *,
    low: int | None = None,
    high: int | None = None,
    error: type[ServefitError] = ArgumentError,
) -> int:
    """`value` as an int in [low, high]; integral floats (4.0) count, bools and 4.5 do not."""
    if isinstance(value, bool):
        raise error(f"{what} must be an integer, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise error(f"{what} must be an integer, got {_show(value)}")
        value = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not _INT_TEXT.fullmatch(text):
            raise error(f"{what} must be an integer, got {_show(value)}")
        value = int(text)
    elif not isinstance(value, int):
        raise error(f"{what} must be an integer, got {_show(value)}")
    if low is not None and value < low:
        raise error(
            f"{what} must be {_above(low - 1, True) if low == 1 else _above(low, False)}, got {_show(value)}"
        )
    if high is not None and value > high:
        raise error(f"{what} must be at most {high}, got {_show(value)}")
    return value


def _above(low: float, open_: bool) -> str:
    if low == 0:
        return "positive" if open_ else "zero or more"
    return f"{'>' if open_ else '>='} {low:g}"


def _show(value: Any) -> str:
    # Redacted before it is cut short: a cut through `user:password@` would leave the start of
    # the password where no rule recognises it any more.
    if isinstance(value, int):
        text = str(value)
    else:
        from servefit.redact import redact_text  # only for an error: off the CLI's start path

        text = repr(redact_text(value) if isinstance(value, str) else value)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def expand_path(raw: Any, what: str, *, error: type[ServefitError] = ArgumentError) -> Path:
    """A user-typed path with `~` / `~user` expanded; refused when it cannot name a file:
    empty, a NUL byte, an unknown `~user`, over-long (the kernel's ENAMETOOLONG)."""
    if isinstance(raw, Path):
        raw = str(raw)
    if not isinstance(raw, str) or not raw.strip():
        raise error(f"{what}: empty path")
    if "\0" in raw:
        raise error(f"{what}: the path contains a NUL byte")
    if raw.startswith("~"):
        user = raw[1:].split("/", 1)[0]
        try:
            expanded = os.path.expanduser(raw)
        except (RuntimeError, KeyError):  # no home directory known for this process
            expanded = raw
        if expanded.startswith("~"):
            who = f"user {user!r}" if user else "the home directory"
            raise error(f"{what}: {raw!r:.80}: {who} is not known on this machine")
        raw = expanded
    if len(raw.encode("utf-8", "surrogateescape")) >= _PATH_MAX:
        raise error(f"{what}: the path is too long ({len(raw)} characters)")
    for part in raw.split("/"):
        if len(part.encode("utf-8", "surrogateescape")) > _NAME_MAX:
            raise error(
                f"{what}: a path component is too long ({part[:40]}... {len(part)} characters)"
            )
    return Path(raw)


def os_error(exc: OSError, path: Any, what: str, error: type[ServefitError] = ArgumentError):
    """One clear error for an OSError on `path` (permission, not a directory, disk full...)."""
    reason = exc.strerror or type(exc).__name__
    return error(f"{what}: {_short(path)}: {reason}")


def _short(path: Any) -> str:
    text = str(path)
    return text if len(text) <= 160 else text[:80] + "..." + text[-60:]


def _stat(path: Path, what: str, error: type[ServefitError]) -> os.stat_result | None:
    """os.stat, None when nothing is there; other failures (EACCES on a parent, ELOOP,
    ENAMETOOLONG) are errors."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None  # a parent is a file: nothing can be there
    except OSError as exc:
        raise os_error(exc, path, what, error) from None


def readable_file(raw: Any, what: str, *, error: type[ServefitError] = ArgumentError) -> Path:
    """A regular file that exists and can be opened for reading. FIFOs, sockets and devices are
    refused up front: opening a FIFO blocks until a writer appears, which may be never."""
    path = expand_path(raw, what, error=error)
    st = _stat(path, what, error)
    if st is None:
        raise error(f"no such {what} file: {_short(path)}")
    check_regular(st, path, what, error)
    if not os.access(path, os.R_OK):
        raise error(f"{what}: {_short(path)}: permission denied")
    return path


def check_regular(
    st: os.stat_result, path: Path, what: str, error: type[ServefitError] = ArgumentError
) -> None:
    """A regular file: a directory, a FIFO (which blocks readers until a writer comes), a
    socket or a device (/dev/zero never ends) is refused."""
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{_short(path)} is a directory, not a {what} file")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise error(f"{_short(path)} is {kind}, not a regular {what} file")


def readable_dir(raw: Any, what: str, *, error: type[ServefitError] = ArgumentError) -> Path:
    """A directory that exists and can be listed."""
    path = expand_path(raw, what, error=error)
    st = _stat(path, what, error)
    if st is None:
        raise error(f"no such {what} directory: {_short(path)}")
    if not stat.S_ISDIR(st.st_mode):
        raise error(f"{what}: {_short(path)} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise error(f"{what}: {_short(path)}: permission denied")
    return path


def directory(raw: Any, what: str, *, error: type[ServefitError] = ArgumentError) -> Path:
    """A directory to read from, which need not exist yet (nothing there: nothing in it); a
    file or an unreadable directory there is an error."""
    path = expand_path(raw, what, error=error)
    st = _stat(path, what, error)
    if st is None:
        return path
    if not stat.S_ISDIR(st.st_mode):
        raise error(f"{what}: {_short(path)} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise error(f"{what}: {_short(path)}: permission denied")
    return path


def writable_dir(
    raw: Any, what: str, *, error: type[ServefitError] = ArgumentError, mode: int | None = None
) -> Path:
    """A directory servefit may create files in; created (with its parents) when missing, and
    then given exactly `mode` when one is asked (the umask only removes bits)."""
    path = expand_path(raw, what, error=error)
    st = _stat(path, what, error)
    if st is None:
        try:
            path.mkdir(parents=True, exist_ok=True)
            if mode is not None:
                os.chmod(path, mode)
        except OSError as exc:
            raise os_error(exc, path, what, error) from None
    elif not stat.S_ISDIR(st.st_mode):
        raise error(f"{what}: {_short(path)} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise error(f"{what}: {_short(path)}: permission denied (not writable)")
    return path


def writable_file(raw: Any, what: str, *, error: type[ServefitError] = ArgumentError) -> Path:
    """A file path servefit may write: not a directory or special file, its directory exists
    and is writable."""
    path = expand_path(raw, what, error=error)
    st = _stat(path, what, error)
    if st is not None:
        check_regular(st, path, what, error)
        if not os.access(path, os.W_OK):
            raise error(f"{what}: {_short(path)}: permission denied")
    parent = path.parent if str(path.parent) else Path(".")
    pst = _stat(parent, what, error)
    if pst is None or not stat.S_ISDIR(pst.st_mode):
        raise error(f"{what}: {_short(parent)}: no such directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise error(f"{what}: {_short(parent)}: permission denied (not writable)")
    return path


# --------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------


def http_url(raw: Any, what: str, *, error: type[ServefitError] = ArgumentError) -> str:
    """An http:// or https:// URL with a host and, when given, a port in 1..65535."""
    from urllib.parse import urlsplit

    if not isinstance(raw, str) or not raw.strip():
        raise error(f"{what}: empty URL")
    url = raw.strip()
    if not url.lower().startswith(("http://", "https://")):
        raise error(f"{_show(url)} is not an http:// or https:// URL")
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise error(f"{what}: {_show(url)} contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise error(f"{what}: {_show(url)} is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise error(f"{what}: {_show(url)} names no host")
    if port is not None and not 0 < port < 65536:
        raise error(f"{what}: port {port} is out of range")
    if any(len(label) > 63 for label in parts.hostname.split(".")):
        raise error(f"{what}: {_show(url)}: a host name label is longer than 63 characters")
    return url


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(data: bytes) -> int:
    """The deepest nesting of objects and arrays in a JSON text (strings skipped), without
    parsing it: the check that runs before Python's recursive parser."""
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub(b"", data)):
        if m.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


# CPython's own refusal of an integer literal longer than sys.get_int_max_str_digits()
_INT_LIMIT = re.compile(r"value has (\d+) digits")
_INT_DIGITS = 4300  # CPython's default limit, kept where the interpreter runs without one


def _bounded_int(token: str) -> int:
    if len(token.lstrip("-")) > _INT_DIGITS:
        raise ValueError(f"value has {len(token.lstrip('-'))} digits")
    return int(token)


def load_json(
    data: bytes | str,
    what: str,
    *,
    max_bytes: int = MAX_JSON_BYTES,
    error: type[ServefitError] = ArgumentError,
) -> Any:
    """Parse a JSON document within limits, in one pass of the C parser: no hook per value
    and no walk of the document (a 60 MB config reads in seconds). Python's json is kept
    because it reads the bare Infinity/NaN tokens official configs contain (Nemotron-H
    `time_step_limit`); its recursion limit bounds the nesting, and CPython's
    int_max_str_digits the length of an integer, whose conversion is quadratic in its digits."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise error(
            f"{what}: {len(raw):,} bytes of JSON is more than servefit reads ({max_bytes:,})"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    limited = getattr(sys, "get_int_max_str_digits", lambda: 0)() > 0
    # A parsed document holds no reference cycles, and the cycle collector would otherwise
    # walk every container built so far again and again while a large one is read.
    collecting = gc.isenabled()
    gc.disable()
    try:
        # without the interpreter's limit (PYTHONINTMAXSTRDIGITS=0, Python < 3.10.7) the
        # integers are checked as they are read, the slow way
        return json.loads(text) if limited else json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise error(
            f"{what}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        # the document only: the depth is counted once the parser has given up on it
        raise error(
            f"{what}: JSON nested {json_depth(raw)} levels deep (more than Python's JSON "
            "parser reads)"
        ) from None
    except ValueError as exc:
        digits = _INT_LIMIT.search(str(exc))
        if digits:
            raise error(f"{what}: an integer of {digits.group(1)} digits is implausible") from None
        raise error(f"{what}: invalid JSON ({type(exc).__name__})") from None
    finally:
        if collecting:
            gc.enable()


def read_json_file(
    raw: Any,
    what: str,
    *,
    max_bytes: int = MAX_JSON_BYTES,
    error: type[ServefitError] = ArgumentError,
) -> Any:
    """A JSON file read within limits: a regular file (never a FIFO), at most `max_bytes`."""
    path = readable_file(raw, what, error=error)
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise os_error(exc, path, what, error) from None
    return load_json(data, f"{what} {_short(path)}", max_bytes=max_bytes, error=error)


# --------------------------------------------------------------------------------------------
# Click parameter types: the same rules on the command line
# --------------------------------------------------------------------------------------------


def _option_name(param: click.Parameter | None) -> str:
    if param is None:
        return "value"
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return opts[0] if opts else (param.human_readable_name or "value")


class FiniteFloat(click.ParamType):
    """A finite float within [low, high] (or (low, high] when `low_open`)."""

    name = "float"

    def __init__(
        self, low: float | None = None, high: float | None = None, *, low_open: bool = False
    ):
        self.low, self.high, self.low_open = low, high, low_open

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        return finite_float(
            value, _option_name(param), low=self.low, high=self.high, low_open=self.low_open
        )


class BoundedInt(click.ParamType):
    """An integer within [low, high]."""

    name = "integer"

    def __init__(self, low: int | None = None, high: int | None = None):
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        return bounded_int(value, _option_name(param), low=self.low, high=self.high)


class InputFile(click.ParamType):
    """A regular file to read (never a FIFO, a directory or a device)."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(readable_file(value, _option_name(param)))


class OutputFile(click.ParamType):
    """A file to write, in an existing writable directory."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(writable_file(value, _option_name(param)))


class PathText(click.ParamType):
    """A path checked for what can never name a file (unknown ~user, NUL, over-long), with
    `~` expanded; whether it exists is the caller's business."""

    name = "path"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(expand_path(value, _option_name(param)))


# Shared instances for the common cases.
GIB = FiniteFloat(0.0, MAX_GIB, low_open=True)
GIB_OR_ZERO = FiniteFloat(0.0, MAX_GIB)
SECONDS = FiniteFloat(0.0, MAX_SECONDS, low_open=True)
SECONDS_OR_ZERO = FiniteFloat(0.0, MAX_SECONDS)
MIB = BoundedInt(1, MAX_MIB)
GPU_COUNT = BoundedInt(1, MAX_GPUS)
COUNT = BoundedInt(1, MAX_COUNT)
