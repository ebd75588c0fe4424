"""Line rules: a literal key (cheap pre-filter), a regex for the engine's f-string, an event kind.

Each rule cites the engine source that prints the line. `sglang.py` and `vllm.py` hold the
engine-specific rules; this module holds the shared machinery and the lines both engines can
print (PyTorch / NCCL / CUDA errors, uvicorn access lines, Python exception lines).

A rule's `key` (or one of its keys) must occur verbatim in every line the rule can match: the
reader searches one compiled trie of all keys per line and runs only the rules of the keys it
found, so a multi-gigabyte log costs one regex search per line that mentions none of them.
Keys start with characters that are rare in log text (capitals, "_", "(") where possible: the
regex engine skips every position whose character cannot start a key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Any

from servefit.frozen import frozen

Event = dict[str, Any]


class EventKind(str, Enum):
    """What a recognised line says. The rules emit these; doctor/accumulate.py gives each one a
    start-up phase (PHASE_OF) and a handler (LaunchAcc._on_<kind>), tied by a test."""

    COMMAND = "command"
    ARGS_DUMP = "args_dump"
    VERSION = "version"
    ARGS_NONDEFAULT = "args_nondefault"
    ENGINE_CONFIG = "engine_config"
    ARCH = "arch"
    DEVICE_NAME = "device_name"
    MAX_MODEL_LEN = "max_model_len"
    BATCHED_TOKENS = "batched_tokens"
    BLOCK_SIZE = "block_size"
    MAMBA_PADDING = "mamba_padding"
    CHANGE = "change"
    DIST_BEGIN = "dist_begin"
    DIST_END = "dist_end"
    WEIGHTS_BEGIN = "weights_begin"
    WEIGHTS_END = "weights_end"
    KV_DTYPE = "kv_dtype"
    MAMBA_POOL = "mamba_pool"
    KV_POOL = "kv_pool"
    SWA_SPLIT = "swa_split"
    POOL_END = "pool_end"
    MM_RESERVE = "mm_reserve"
    KV_AVAILABLE = "kv_available"
    CG_ESTIMATE = "cg_estimate"
    KV_TOKENS = "kv_tokens"
    CONCURRENCY = "concurrency"
    GPU_BLOCKS = "gpu_blocks"
    V0_PROFILE = "v0_profile"
    PADDING_LAYERS = "padding_layers"
    FINAL = "final"
    CAP = "cap"
    GRAPH_BEGIN = "graph_begin"
    GRAPH_BS = "graph_bs"
    GRAPH_END = "graph_end"
    READY = "ready"
    ENGINE_READY = "engine_ready"
    SERVER_UP = "server_up"
    DECODE = "decode"
    PREFILL = "prefill"
    HTTP = "http"
    THROUGHPUT = "throughput"
    SPEC = "spec"
    FINISH_TEXT = "finish_text"
    EXCEPTION_START = "exception_start"
    ERROR = "error"
    ERROR_DETAIL = "error_detail"
    EXCEPTION = "exception"
    EXIT = "exit"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class BadLine(ValueError):
    """A line a rule recognises whose values cannot be read (a torn or corrupted line: "avail
    mem=1.2.3 GB", a 400-digit number): the reader skips it and counts it."""


# Beyond this a "number" in a log is corruption, not a measurement (and float() loses it).
_MAX_NUMBER = float(1 << 53)
# Group sub-patterns that capture a number: their value must read as one.
_NUMERIC_GROUP = re.compile(r"\(\?P<(\w+)>(?:-\?)?(?:\[\\d|\\d)")
_CONVERT_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError)


@frozen
class Rule:
    key: str | tuple[str, ...]  # literal text every matching line contains (one of them)
    pattern: re.Pattern[str]
    kind: EventKind
    engine: str | None  # "sglang" | "vllm" | None (either)
    source: str  # where the engine prints it, e.g. "sglang/srt/...py:function"
    convert: Callable[[re.Match[str]], Event] | None = None
    numeric: frozenset[str] = frozenset()  # groups that capture a number

    def event(self, m: re.Match[str]) -> Event:
        """The line's event; BadLine when its values do not read as the rule expects."""
        try:
            data = self.convert(m) if self.convert else numbers(m.groupdict())
        except _CONVERT_ERRORS as exc:
            raise BadLine(f"{type(exc).__name__}: {exc}"[:200]) from None
        for key, value in data.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if not -_MAX_NUMBER <= value <= _MAX_NUMBER:  # also false for nan
                    raise BadLine(f"{key} is not a plausible number")
            elif key in self.numeric and value is not None and not isinstance(value, list):
                raise BadLine(f"{key}={str(value)[:40]!r} is not a number")
        data["kind"] = self.kind
        return data


def rule(
    key: str | tuple[str, ...], regex: str, kind: str, engine: str | None, source: str, convert=None
) -> Rule:
    numeric = frozenset(_NUMERIC_GROUP.findall(regex)) - _TEXT_GROUPS
    return Rule(key, re.compile(regex), EventKind(kind), engine, source, convert, numeric)


def num(text: str | None) -> int | float | None:
    """'1,234' -> 1234, '0.85' -> 0.85, None -> None."""
    if text is None:
        return None
    t = text.replace(",", "")
    try:
        return int(t)
    except ValueError:
        try:
            return float(t)
        except ValueError:
            return None


def numbers(groups: dict[str, str | None]) -> Event:
    """Named groups to values: numbers where they parse, text otherwise."""
    out: Event = {}
    for k, v in groups.items():
        if v is None:
            continue
        n = num(v)
        out[k] = v if n is None or k in _TEXT_GROUPS else n
    return out


_TEXT_GROUPS = {"text", "arch", "dtype", "quant", "role", "version", "path", "method", "model"}


def fixed(**values: Any) -> Callable[[re.Match[str]], Event]:
    """A converter that adds constant fields to the named groups."""

    def convert(m: re.Match[str]) -> Event:
        out = numbers(m.groupdict())
        out.update(values)
        return out

    return convert


def whole_line(**values: Any) -> Callable[[re.Match[str]], Event]:
    """A converter that keeps the matched text (from the match start to the end of the line)."""

    def convert(m: re.Match[str]) -> Event:
        out = numbers(m.groupdict())
        out.update(values)
        # keep the exception name when the line has one before the match ("ValueError: ...")
        head = _EXC_BEFORE.search(m.string, 0, m.start() + 1)
        start = head.start("exc") if head else m.start()
        out["text"] = m.string[start:].strip()
        return out

    return convert


_EXC_BEFORE = re.compile(r"(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): (?=.)")

# ---------------------------------------------------------------------------------------------
# Lines either engine prints
# ---------------------------------------------------------------------------------------------

_ERR = "error"

GENERIC_RULES: tuple[Rule, ...] = (
    # torch/cuda/memory.py via the caching allocator: "CUDA out of memory. Tried to allocate
    # 2.00 GiB. GPU 0 has a total capacity of 47.41 GiB of which 1.06 GiB is free. ..."
    rule(
        ("CUDA out of memory", "HIP out of memory"),
        r"(?:CUDA|HIP) out of memory\. Tried to allocate (?P<alloc>[\d.]+) (?P<unit>[GMK]i?B)"
        r"(?:\. GPU(?: \d+)? has a total capacity of (?P<total_gib>[\d.]+) GiB of which "
        r"(?P<free>[\d.]+) (?P<free_unit>[GMK]i?B) is free)?",
        _ERR,
        None,
        "PyTorch c10/cuda/CUDACachingAllocator.cpp (OutOfMemoryError text)",
        whole_line(error="cuda_oom"),
    ),
    rule(
        ("OutOfMemoryError", "CUDA error: out of memory"),
        r"(?:torch\.)?(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory",
        _ERR,
        None,
        "PyTorch torch.OutOfMemoryError",
        whole_line(error="cuda_oom"),
    ),
    rule(
        ("CUDA error: an illegal", "[CUDA]: an illegal"),
        r"an illegal memory access was encountered",
        _ERR,
        None,
        "CUDA runtime error cudaErrorIllegalAddress (text of cudaGetErrorString)",
        whole_line(error="illegal_memory_access"),
    ),
    rule(
        "NCCL",
        r"NCCL error|ncclUnhandledCudaError|ncclInternalError|ncclSystemError|ncclRemoteError"
        r"|ProcessGroupNCCL.*(?:[Tt]imeout|timed out|Watchdog)|NCCL WARN",
        _ERR,
        None,
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, NCCL's own warnings",
        whole_line(error="nccl"),
    ),
    rule(
        "Watchdog caught",
        r"Watchdog caught",
        _ERR,
        None,
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
        whole_line(error="nccl"),
    ),
    # uvicorn access log: '127.0.0.1:53220 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    rule(
        'HTTP/1.1"',
        r'"(?P<method>POST|GET) (?P<path>/\S*) HTTP/1\.1" (?P<status>\d{3})',
        "http",
        None,
        "uvicorn/protocols/http/*: access log",
    ),
    rule(
        "Killed",
        r"^(?:\[\d+\]\+?\s+)?Killed\b",
        "exit",
        None,
        "the shell, when the process got SIGKILL",
        whole_line(code=-9),
    ),
)

# Python's last traceback line: "RuntimeError: ...", "torch.OutOfMemoryError: ..." (no log
# prefix). Matched by the reader's extra pre-filter pattern, not by a literal key.
EXCEPTION_LINE = re.compile(
    r"^(?:\[[^\]]*\]\s*|\([^)]*\)\s*)*(?P<exc>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]*(?:Error|Exception|Interrupt))"
    r": (?P<text>.*)$"
)
