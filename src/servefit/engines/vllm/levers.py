"""vLLM's memory levers, as data for `servefit explain` / `fit` (servefit/_explain/levers.py).

Each lever names the EngineArgs attribute a `vllm serve` flag sets and proposes candidate
values from the current plan's resolved args and pools. What a value does is never written
here: explain and fit re-plan every candidate with the vLLM profile. `lossy` marks levers that
change numerics (KV / state precision), which fit only tries when asked to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servefit.engines.base import Flag
from servefit.frozen import frozen


@frozen
class VllmLever:
    dest: str  # EngineArgs attribute (speculative tokens: the key inside --speculative-config)
    title: str
    values: Callable[[dict[str, Any], dict[str, Any]], list[Any]]  # (resolved args, pools)
    lossy: bool = False
    hybrid_only: bool = False


def _uniq(current: Any, values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v is not None and v != current and v not in out:
            out.append(v)
    return out


def _util(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    u = float(a.get("gpu_memory_utilization") or 0.92)
    return _uniq(u, [round(min(x, 0.98), 2) for x in (u - 0.04, u + 0.02, u + 0.04, 0.95)])


def _seqs(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    s = int(a.get("max_num_seqs") or 256)
    blocks = p.get("mamba_blocks")  # the check that fails start-up for hybrids
    smaller = [max(1, s // 2), max(1, s // 4), 16 if s > 16 else None]
    return _uniq(s, [*smaller, blocks if blocks and blocks < s else None, min(2 * s, 1024)])


def _len(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    n = int(a.get("max_model_len") or 0)
    return _uniq(n, [n // 2, n // 4, -1]) if n else []


def _batched(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    t = int(a.get("max_num_batched_tokens") or 0)
    return _uniq(t, [t // 2 if t > 2048 else None, 2048, 2 * t, 8192]) if t else []


def _kv(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    cur = a.get("kv_cache_dtype") or "auto"
    return _uniq(cur, ["auto"] if str(cur).startswith("fp8") else ["fp8_e4m3"])


def _ssm(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    return _uniq(a.get("mamba_ssm_cache_dtype"), ["bfloat16"])


def _spec(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    k = int(a.get("num_speculative_tokens") or 0)
    return _uniq(k, [*range(1, k), k + 1]) if k else []


def _mamba_block(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    # read in Mamba cache mode "all" (0.24.0: the chunk a state is kept every); mode "align"
    # replaces it with the attention block size; without prefix caching vLLM rejects it
    return _uniq(a.get("mamba_block_size"), [256, 512, 1024, 2048])


def _prefix(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    return _uniq(a.get("enable_prefix_caching"), [False, True])


def _kv_bytes(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    # read only when given (--kv-cache-memory-bytes, or VLLM_CPU_KVCACHE_SPACE on the CPU)
    b = int(a.get("kv_cache_memory_bytes") or 0)
    return _uniq(b, [b // 2, b * 2]) if b else []


def _tp(a: dict[str, Any], p: dict[str, Any]) -> list[Any]:
    tp = int(a.get("tensor_parallel_size") or 1)
    return _uniq(tp, [tp * 2, tp // 2 or None])


LEVERS: tuple[VllmLever, ...] = (
    VllmLever("gpu_memory_utilization", "GPU memory utilization", _util),
    VllmLever("max_num_seqs", "max running sequences", _seqs),
    VllmLever("max_model_len", "context length", _len),
    VllmLever("max_num_batched_tokens", "tokens per step (profiling peak)", _batched),
    VllmLever("kv_cache_dtype", "KV cache dtype", _kv, lossy=True),
    VllmLever("mamba_ssm_cache_dtype", "SSM state dtype", _ssm, lossy=True, hybrid_only=True),
    VllmLever("num_speculative_tokens", "speculative tokens", _spec),
    VllmLever(
        "enable_prefix_caching", "prefix caching (Mamba cache mode)", _prefix, hybrid_only=True
    ),
    VllmLever("mamba_block_size", "Mamba block size", _mamba_block, hybrid_only=True),
    VllmLever("kv_cache_memory_bytes", "KV cache memory (bytes, given)", _kv_bytes),
    VllmLever("tensor_parallel_size", "tensor parallel size", _tp),
)


def args_for(lever: VllmLever, value: Any, resolved: dict[str, Any]) -> dict[str, Any]:
    """The user args that set `value`: speculative tokens live inside --speculative-config."""
    if lever.dest == "num_speculative_tokens":
        spec = dict(resolved.get("speculative_config") or {})
        spec["num_speculative_tokens"] = value
        return {"speculative_config": spec}
    return {lever.dest: value}


def flag_for(flags: tuple[Flag, ...], dest: str) -> str:
    """The `vllm serve` spelling of an EngineArgs attribute in a release's flag table `flags`
    (the first long option)."""
    if dest == "num_speculative_tokens":
        return "--speculative-config.num_speculative_tokens"
    for f in flags:
        if f.dest == dest and f.kind != "bool_false":
            return next((n for n in f.names if n.startswith("--")), f.names[0])
    return "--" + dest.replace("_", "-")
