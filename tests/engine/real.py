"""Reading a real vLLM log, and running servefit on it, for the real-engine tests.

The engine's messages are compared in its own words: a vLLM log line is
`(EngineCore pid=…) INFO 12-01 06:15:12 [kv_cache_utils.py:2327] <message>`; the message is what
the engine's f-string printed (vllm/v1/core/kv_cache_utils.py:_report_kv_cache_config,
vllm/platforms/interface.py:Platform._align_hybrid_block_size, vllm/v1/worker/cpu_worker.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.engine_cases import EngineCase

SERVEFIT = str(Path(sys.executable).parent / "servefit")

# `(EngineCore pid=16296) INFO 12-01 06:15:12 [kv_cache_utils.py:2327] ` and its variants.
_PREFIX = re.compile(
    r"^(?:\(\w[\w-]*(?: pid=\d+)?\)\s+)?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+"
    r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]+\]\s?")

# The start-up figures, each by the engine's own wording (one kind per pattern).
CAPACITY = {
    "block": re.compile(r"^Setting attention block size to \d+ tokens"),
    "padding": re.compile(r"^Padding mamba page size by [\d.]+%"),
    "kv_space": re.compile(r"^Explicitly set \("),
    "kv_tokens": re.compile(r"^(?:CPU|GPU) KV cache size: [\d,]+ tokens"),
    "concurrency": re.compile(r"Maximum concurrency for [\d,]+ tokens per request: [\d.]+x"),
}


def messages(text: str) -> list[str]:
    """The log's engine messages without their process/level/time/source prefix."""
    out = []
    for line in text.splitlines():
        m = _PREFIX.match(line)
        if m:
            out.append(line[m.end():].rstrip())
    return out


def capacity_lines(lines: list[str]) -> dict[str, str]:
    """kind -> the line of that kind (the last one: a figure is printed once per start)."""
    found: dict[str, str] = {}
    for line in lines:
        for kind, pattern in CAPACITY.items():
            if pattern.search(line):
                found[kind] = line
    return found


def matches(predicted: str, actual: str) -> bool:
    """Equal, where the plan's `…` stands for a run-time measurement it cannot know."""
    parts = [re.escape(p) for p in predicted.split("…")]
    return re.fullmatch(".+?".join(parts), actual) is not None


_ERROR = re.compile(r"^(?:\w+Error|\w+Exception): .+|^vllm(?: serve)?: error: .+")


def engine_error(text: str) -> str | None:
    """The engine's root error: its first exception line (the engine core's, before the API
    server's "RuntimeError: Engine core initialization failed") or argparse's `error:` line."""
    for line in text.splitlines():
        m = _PREFIX.match(line)
        msg = (line[m.end():] if m else line).strip()
        if _ERROR.match(msg):
            return msg
    return None


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def servefit(*args: str, env: Mapping[str, str] | None = None, timeout: float = 900) -> Result:
    proc = subprocess.run([SERVEFIT, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(env) if env is not None else None)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def env_options(case: EngineCase) -> list[str]:
    return [f"--env={k}={v}" for k, v in case.env.items()]


def plan_args(case: EngineCase, model: Path, flags: tuple[str, ...], command: str = "plan") -> list[str]:
    """`servefit plan` (or explain) of a launch on the CPU, as a user would write it."""
    return [command, "--device", "cpu", "--engine", f"vllm=={case.release}", *env_options(case),
            "--format", "json", "--", "vllm", "serve", str(model), *flags]
