"""vLLM's lever catalogue for explain / fix / fit, built from the profile's own lever data
(servefit/engines/vllm/levers.py: EngineArgs attributes, candidate values, args_for, flag_for).

Explain re-plans the profile's candidate values; the fix searches the finer grids below. As for
SGLang, what a value does is never written here; `unused_when` only says, from the current
plan's numbers, why vLLM does not read a flag once re-planning has shown that nothing moves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from servefit._explain.lever_types import (
    Context,
    Lever,
    Option,
    fmt_value,
    options,
    parallel_fix,
    parallel_values,
)
from servefit.engines import registry
from servefit.engines.base import Flag
from servefit.engines.vllm import levers as vllm
from servefit.errors import EngineVersionError


def _flags(profile: str) -> tuple[Flag, ...]:
    """The flag table of the release of `profile`; the newest profile's for an unknown one."""
    try:
        return registry.profile("vllm", profile).flags
    except EngineVersionError:
        return registry.profiles("vllm")[-1].flags


def flag_name(profile: str, dest: str) -> str:
    return vllm.flag_for(_flags(profile), dest)


def _negative_flag(profile: str, dest: str) -> str | None:
    """The BooleanOptionalAction `--no-...` spelling, when the release has one."""
    return next(
        (
            next(n for n in f.names if n.startswith("--"))
            for f in _flags(profile)
            if f.dest == dest and f.kind == "bool_false"
        ),
        None,
    )


def cli_tokens(profile: str, dest: str, value: Any) -> list[str]:
    """`vllm serve` tokens that set `dest` to `value` (JSON for the config dicts; --no-X for
    False when the flag is a BooleanOptionalAction); [] when nothing is to be passed."""
    if value is None:
        return []
    flag = flag_name(profile, dest)
    if isinstance(value, bool):
        if value:
            return [flag]
        neg = _negative_flag(profile, dest)
        return [neg] if neg else []
    if isinstance(value, dict):
        return [flag, json.dumps(value, separators=(",", ":"))]
    if isinstance(value, (list, tuple)):
        return [flag, *(fmt_value(v) for v in value)]
    return [flag, fmt_value(value)]


def _label(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value == -1:
        return "auto (-1)"
    return fmt_value(value)


def _from_profile(lever: vllm.VllmLever) -> Callable[[Context], list[Option]]:
    def values(c: Context) -> list[Option]:
        pools = c.plan.pools.model_dump()
        return [
            Option(_label(v), vllm.args_for(lever, v, c.args)) for v in lever.values(c.args, pools)
        ]

    return values


def _grid(dest: str, grid: Callable[[Context], list[Any]]) -> Callable[[Context], list[Option]]:
    def values(c: Context) -> list[Option]:
        return [
            Option(_label(o.args[dest]), o.args) for o in options(dest, grid(c), c.args.get(dest))
        ]

    return values


def _util_fix(c: Context) -> list[Any]:
    return [round(0.6 + 0.01 * i, 2) for i in range(39)]  # 0.60 .. 0.98


def _seqs_fix(c: Context) -> list[Any]:
    cur = c.running
    bigger = (80, 96, 128, 192, 256, 384, 512, 768)
    return list(range(1, min(cur, 64) + 1)) + [v for v in bigger if v < cur]


def _len_fix(c: Context) -> list[Any]:
    """Shorter contexts only, as for SGLang: the fix is judged at the requested context. With
    them the longest that fits, as vLLM's own auto-fit (--max-model-len -1) finds it
    (kv_cache_planning.py:_auto_fit_max_model_len), written out as a number."""
    from servefit._explain.replan import replan

    cur = c.plan.pools.context_len
    vals = [v for v in (4096, 8192, 16384, 24576, 32768, 65536, 131072) if v < cur]
    if c.plan.verdict != "ok":
        fitted, _ = replan(c.request, Option("auto", {"max_model_len": -1}))
        if fitted is not None and fitted.verdict == "ok" and fitted.pools.context_len < cur:
            vals.append(fitted.pools.context_len)
    return vals


def _kv_bytes_fix(c: Context) -> list[Any]:
    """Whole GiB below the given size, up to the device's memory (the NUMA node's on the CPU
    platform), 64 values at most."""
    gib = 2**30
    node = c.plan.hardware.cpu_node
    device = node.total_bytes if node is not None else c.plan.hardware.memory_mib * 2**20
    top = min(int(c.args.get("kv_cache_memory_bytes") or 0) - 1, device) // gib
    step = max(1, -(-top // 64))
    return [n * gib for n in range(1, top + 1, step)]


def _kv_bytes_given(c: Context) -> bool:
    """The flag is the KV size only when given, and VLLM_CPU_KVCACHE_SPACE does not override it
    (vllm/platforms/cpu.py:CpuPlatform.check_and_update_config)."""
    from servefit.engines.vllm.cpu_platform import kv_space_env

    given = bool(c.request.args.get("kv_cache_memory_bytes"))
    return given and (c.plan.hardware.cpu_node is None or kv_space_env(dict(c.request.env)) is None)


def _profile_values(dest: str) -> Callable[[Context], list[Any]]:
    lever = next(lv for lv in vllm.LEVERS if lv.dest == dest)
    return lambda c: lever.values(c.args, c.plan.pools.model_dump())


def _spec_on(c: Context) -> bool:
    return bool(c.args.get("num_speculative_tokens"))


def _activation_phase(c: Context) -> str | None:
    return next((x.name for x in c.plan.consumers if x.name.startswith("activation peak")), None)


# Why vLLM does not read a flag, from the plan's own numbers ---------------------------------


def _util_unused(c: Context) -> str | None:
    if c.args.get("kv_cache_memory_bytes"):
        return (
            "--kv-cache-memory-bytes is given: vLLM skips memory profiling and sizes the KV "
            "cache from it, not from --gpu-memory-utilization "
            "(vllm/v1/worker/gpu_worker.py:Worker.determine_available_memory)"
        )
    return None


def _batched_unused(c: Context) -> str | None:
    phase = _activation_phase(c) or ""
    whose = {
        "sampler": f"the sampler's (max_num_seqs {c.args.get('max_num_seqs')} x the vocabulary)",
        "encoder": "the multimodal encoder's (--limit-mm-per-prompt)",
    }
    for key, text in whose.items():
        if f"({key})" in phase:
            return (
                f"the profiling run's activation peak is {text}, not the forward pass over "
                "--max-num-batched-tokens (vllm/v1/worker/gpu_model_runner.py:profile_run)"
            )
    return None


def _mamba_block_unused(c: Context) -> str | None:
    mode = c.args.get("mamba_cache_mode")
    if mode == "align":
        return (
            "in Mamba cache mode 'align' (prefix caching on) vLLM sets mamba_block_size to the "
            f"attention block size, {c.args.get('block_size')} tokens, whatever is given "
            "(vllm/platforms/interface.py:Platform._align_hybrid_block_size)"
        )
    if mode == "none":
        return (
            "without prefix caching (Mamba cache mode 'none') vLLM sets mamba_block_size to "
            f"max_model_len ({c.args.get('max_model_len')}) and rejects any other value "
            "(vllm/config/vllm.py:VllmConfig.validate_mamba_block_size)"
        )
    return None


def _lever(
    dest: str,
    fix: Callable[[Context], list[Option]] | None = None,
    *,
    applies: Callable[[Context], bool] = lambda c: True,
    unused_when: Callable[[Context], str | None] = lambda c: None,
    context: bool = False,
) -> Lever:
    h = next(lv for lv in vllm.LEVERS if lv.dest == dest)
    return Lever(
        dest,
        h.title,
        _from_profile(h),
        fix,
        applies=(lambda c: c.has_state and applies(c)) if h.hybrid_only else applies,
        unused_when=unused_when,
        lossy=h.lossy,
        context=context,
    )


LEVERS: tuple[Lever, ...] = (
    _lever(
        "gpu_memory_utilization",
        _grid("gpu_memory_utilization", _util_fix),
        unused_when=_util_unused,
    ),
    _lever("max_num_seqs", _grid("max_num_seqs", _seqs_fix)),
    _lever("max_model_len", _grid("max_model_len", _len_fix), context=True),
    _lever(
        "max_num_batched_tokens",
        _grid("max_num_batched_tokens", _profile_values("max_num_batched_tokens")),
        unused_when=_batched_unused,
    ),
    _lever("kv_cache_dtype", _grid("kv_cache_dtype", _profile_values("kv_cache_dtype"))),
    _lever(
        "mamba_ssm_cache_dtype",
        _grid("mamba_ssm_cache_dtype", _profile_values("mamba_ssm_cache_dtype")),
    ),
    _lever("num_speculative_tokens", applies=_spec_on),
    Lever(
        "speculative_config",
        "speculative decoding",
        lambda c: [Option("off", {"speculative_config": None})],
        applies=_spec_on,
    ),
    _lever("enable_prefix_caching"),
    _lever(
        "mamba_block_size",
        _grid("mamba_block_size", _profile_values("mamba_block_size")),
        unused_when=_mamba_block_unused,
    ),
    _lever(
        "kv_cache_memory_bytes",
        _grid("kv_cache_memory_bytes", _kv_bytes_fix),
        applies=_kv_bytes_given,
    ),
    Lever(
        "parallelism",
        "TP / PP",
        parallel_values,
        parallel_fix,
    ),
)
