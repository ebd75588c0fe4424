"""Which stored entry calibrates a launch: the same engine release, GPU, model and layout.

An entry's terms are measured on one release's code, one GPU, one model's weights and one
parallel layout; any of those changed changes what the engine measures, so each must be equal.
Among the entries left, the one whose flags differ least from the launch wins, then the newest.
The flags that still differ are named: their effect is modelled, not measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from servefit.calibration.entry import Entry
from servefit.frozen import frozen

# Engine flags that change nothing the engine measures at start-up (serving, parsing, logging,
# names, paths): a difference in them is not worth a note.
_NOT_MEMORY = (
    "host",
    "port",
    "served_model_name",
    "parser",
    "tool",
    "chat_template",
    "log",
    "api_key",
    "ssl",
    "middleware",
    "allowed",
    "root_path",
    "uvicorn",
    "trust_remote_code",
    "download_dir",
    "revision",
    "tokenizer",
    "model",
    "enable_auto_tool_choice",
    "disable_fastapi_docs",
    "response_role",
    "seed",
)


@frozen
class Key:
    """What must be equal for an entry to apply."""

    engine: str
    profile: str
    gpu: str
    gpu_memory_mib: int
    model_fingerprint: str
    tp: int
    pp: int
    dp: int
    ep: int


@frozen
class Match:
    entry: Entry
    differs: tuple[str, ...]  # "max_num_seqs: 256 -> 64"


def key_of(entry: Entry) -> Key:
    return Key(
        engine=entry.engine,
        profile=entry.profile,
        gpu=entry.gpu,
        gpu_memory_mib=entry.gpu_memory_mib,
        model_fingerprint=entry.model_fingerprint,
        tp=entry.tp,
        pp=entry.pp,
        dp=entry.dp,
        ep=entry.ep,
    )


def same(a: Key, b: Key) -> bool:
    """Equal keys; the GPU by name (case-insensitive) and by memory within 1 % (nvidia-smi and
    the catalog round it differently)."""
    return (
        a.engine == b.engine
        and a.profile == b.profile
        and a.gpu.casefold() == b.gpu.casefold()
        and abs(a.gpu_memory_mib - b.gpu_memory_mib) <= 0.01 * max(a.gpu_memory_mib, 1)
        and a.model_fingerprint == b.model_fingerprint
        and (a.tp, a.pp, a.dp, a.ep) == (b.tp, b.pp, b.dp, b.ep)
    )


def usable(entry: Entry) -> bool:
    """An entry with the figures its engine's plan takes."""
    m = entry.measured
    if entry.engine == "vllm":
        return m.kv_available_gib is not None
    return m.free_before_weights_gib is not None and m.weights_gib is not None


RESOLVED = "server_args dump"  # Entry.args_source of a recorded launch's resolved values


def differences(
    recorded: Mapping[str, Any], launch: Mapping[str, Any], *, resolved: bool = False
) -> tuple[str, ...]:
    """Settings that differ, "name: recorded -> this launch's". `resolved`: the recorded
    args are every resolved value (SGLang's server_args dump) and `launch` the resolved args of
    this launch's plan: only the settings both hold are compared."""
    out = []
    keys = set(recorded) & set(launch) if resolved else set(recorded) | set(launch)
    for k in sorted(keys):
        if any(word in k for word in _NOT_MEMORY):
            continue
        a, b = recorded.get(k), launch.get(k)
        if resolved and b is None:  # a value servefit's mirror does not resolve
            continue
        if a != b:
            out.append(f"{k}: {_show(a)} -> {_show(b)}")
    return tuple(out)


def _show(v: Any) -> str:
    return "default" if v is None else str(v)


def best(entries: Iterable[Entry], key: Key, args: Mapping[str, Any]) -> Match | None:
    """The entry that calibrates a launch of `key` with engine `args`, or None. `entries` come
    newest first (store.load), so the newest wins a tie."""
    found: Match | None = None
    for e in entries:
        if not usable(e) or not same(key_of(e), key):
            continue
        dump = e.args_source == RESOLVED  # ranked on the flags this launch gives
        m = Match(
            entry=e,
            differs=differences({k: e.args.get(k) for k in args} if dump else e.args, args),
        )
        if found is None or len(m.differs) < len(found.differs):
            found = m
    return found
