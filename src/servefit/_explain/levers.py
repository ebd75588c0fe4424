"""The lever catalogue: the engine flags that size memory, per engine version, as data.

Each Lever says when it applies (a state pool, a speculative algorithm, ...) and generates
candidate values from the current plan; the attribute it sets in a release, and whether the
release has it at all, is the release profile's to say (engines/base.py:Profile.levers). What a
value does is never written here: explain and fix re-plan every value. The only prose is
`unused_when`, which states, from the current plan's own numbers, why the engine does not read
the flag; it is used only after re-planning has shown that no value changes anything.

This module holds SGLang's catalogue; vLLM's is levers_vllm.py, the shared types are in
lever_types.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servefit._explain.lever_types import (
    Context,
    Lever,
    Option,
    change_reason,
    fmt_value,
    options,
    parallel_fix,
    parallel_values,
)
from servefit.engines import registry
from servefit.errors import EngineVersionError

SPEC_ARGS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
)
_PREFERRED = ("--tp-size", "--pp-size", "--model-path", "--dist-init-addr")


def flag_name(profile: str, dest: str) -> str:
    """SGLang's own CLI spelling of `dest` in the release of `profile` (prefers --tp-size over
    --tensor-parallel-size); `--dest-with-dashes` for an attribute the release has no flag for."""
    try:
        f = registry.profile("sglang", profile).flag(dest)
    except EngineVersionError:
        f = None
    if f is not None:
        return next((n for n in f.names if n in _PREFERRED), f.names[0])
    return "--" + dest.replace("_", "-")


def cli_tokens(profile: str, dest: str, value: Any) -> list[str]:
    """SGLang CLI tokens that set `dest` to `value`: store_true flags bare when True, nothing
    when False or None (the engine default)."""
    if value is None or value is False:
        return []
    flag = flag_name(profile, dest)
    if value is True:
        return [flag]
    if isinstance(value, (list, tuple)):
        return [flag, *(fmt_value(v) for v in value)]
    return [flag, fmt_value(value)]


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def _f(c: Context) -> float:
    return float(c.args.get("mem_fraction_static") or 0.85)


def _fraction_values(c: Context) -> list[Option]:
    cur = _f(c)
    grid = {0.8, 0.85, 0.88, 0.9, 0.92, 0.94, round(cur - 0.03, 2), round(cur + 0.03, 2)}
    vals = sorted(v for v in grid if 0.5 <= v <= 0.97 and abs(v - cur) > 1e-9)
    return options("mem_fraction_static", vals, cur)


def _fraction_fix(c: Context) -> list[Option]:
    cur = _f(c)
    vals = [round(0.6 + 0.01 * i, 2) for i in range(38)]  # 0.60 .. 0.97
    return options("mem_fraction_static", [v for v in vals if abs(v - cur) > 1e-9], cur)


def _running_values(c: Context) -> list[Option]:
    cur = c.running
    vals = {1, 2, 4, 8, 16, 32, 64, 128, max(1, cur // 2), cur * 2}
    return options("max_running_requests", sorted(v for v in vals if v <= max(256, 2 * cur)), cur)


def _running_fix(c: Context) -> list[Option]:
    cur = c.running
    vals = list(range(1, min(cur, 64) + 1)) + [v for v in (80, 96, 128, 192, 256) if v < cur]
    return options("max_running_requests", vals, cur)


def _ratio_values(c: Context) -> list[Option]:
    cur = c.args.get("mamba_full_memory_ratio")
    return options("mamba_full_memory_ratio", [0.1, 0.3, 0.5, 0.7, 0.9, 1.5, 2.0, 4.0], cur)


def _cache_values(c: Context, fine: bool = False) -> list[Option]:
    p = c.plan.pools
    slots = p.mamba_slots_per_request or 1
    cur = p.max_mamba_cache_size
    base = range(1, c.running + 1) if fine else (4, 8, 16, 32, 48, 64)
    vals = sorted({slots * r for r in base} | ({max(1, cur // 2), cur * 2} if cur else set()))
    return options("max_mamba_cache_size", [v for v in vals if v != cur], cur)


def _ssm_values(c: Context) -> list[Option]:
    return options("mamba_ssm_dtype", ["bfloat16", "float32"], c.args.get("mamba_ssm_dtype"))


def _steps_values(c: Context) -> list[Option]:
    cur = c.args.get("speculative_num_steps")
    out = []
    for s in (1, 2, 3, 4, 5):
        if s == cur:
            continue
        args: dict[str, Any] = {"speculative_num_steps": s}
        if c.args.get("speculative_eagle_topk") == 1:
            args["speculative_num_draft_tokens"] = s + 1
        out.append(Option(str(s), args))
    return out


def _draft_values(c: Context) -> list[Option]:
    cur = c.args.get("speculative_num_draft_tokens")
    return options("speculative_num_draft_tokens", [2, 3, 4, 6, 8], cur)


def _spec_off(c: Context) -> list[Option]:
    return [Option("off", dict.fromkeys(SPEC_ARGS))]


def _context_values(c: Context) -> list[Option]:
    from servefit.engines.sglang.common import derived_context_len

    cur = c.plan.pools.context_len
    top = derived_context_len(c.model)
    vals = [v for v in (4096, 8192, 16384, 32768, 65536, 131072, 262144) if v <= top] + [top]
    return options("context_length", sorted(set(vals)), cur)


def _context_fix(c: Context) -> list[Option]:
    cur = c.plan.pools.context_len
    return options("context_length", [v for v in (4096, 8192, 16384, 24576) if v < cur], cur)


def _kv_values(c: Context) -> list[Option]:
    cur = c.args.get("kv_cache_dtype") or "auto"
    vals = ["fp8_e4m3", "auto"] if not str(cur).startswith("fp8") else ["auto"]
    return options("kv_cache_dtype", vals, cur)


def _chunk_values(c: Context) -> list[Option]:
    return options(
        "chunked_prefill_size", [2048, 4096, 8192, 16384], c.args.get("chunked_prefill_size")
    )


def _graph_values(dest: str) -> Callable[[Context], list[Option]]:
    return lambda c: options(dest, [8, 16, 32, 64, 128, 256], c.args.get(dest))


def _radix_values(c: Context) -> list[Option]:
    cur = bool(c.args.get("disable_radix_cache"))
    return [Option("on" if cur else "off", {"disable_radix_cache": not cur})]


def _same_lever(
    name: str, values: Callable[[str], Callable[[Context], list[Option]]]
) -> Callable[[Context], list[Option]]:
    """Values of lever `name` for the attribute the plan's release gives it."""
    return lambda c: values(c.lever_dests[name])(c)


def _strategy_values(dest: str) -> Callable[[Context], list[Option]]:
    """Every strategy the release's flag accepts, "auto" aside (it resolves to one of them)."""

    def values(c: Context) -> list[Option]:
        flag = c.engine_profile.flag(dest)
        choices = [x for x in (flag.choices or ()) if x != "auto"] if flag else []
        return options(dest, choices, c.args.get(dest))

    return values


# --------------------------------------------------------------------------------------------
# Why the engine does not read a flag, from the plan's own numbers
# --------------------------------------------------------------------------------------------


def _ratio_unused(c: Context) -> str | None:
    sizing = c.plan.pools.mamba_sizing or ""
    if sizing.startswith("mamba_full_memory_ratio"):
        return None
    why = f"the state pool is sized by {sizing}"
    if "radix cache disabled" in sizing:
        radix = change_reason(c, "disable_radix_cache")
        if radix:
            why += f"; the engine disabled the radix cache because {radix}"
        mrr = change_reason(c, "max_running_requests")
        if mrr:
            why += f", and max_running_requests={c.args.get('max_running_requests')} ({mrr})"
    return why + ", so --mamba-full-memory-ratio is never read"


def _running_unused(c: Context) -> str | None:
    reason = c.plan.pools.cap_reason
    if reason.startswith("mamba state cache"):
        return (
            f"running requests are capped at {c.plan.pools.effective_max_running_requests} by the "
            f"{reason}, below --max-running-requests {c.args.get('max_running_requests')}"
        )
    return None


def _heuristic_only(c: Context) -> str | None:
    if "mem_fraction_static" in c.plan.user_args:
        return (
            "it only enters the default --mem-fraction-static heuristic, and "
            f"--mem-fraction-static {fmt_value(c.plan.user_args['mem_fraction_static'])} is given"
        )
    return None


def _has_state(c: Context) -> bool:
    return c.has_state


def _eagle(c: Context) -> bool:
    return c.spec in ("EAGLE", "EAGLE3", "STANDALONE")


LEVERS: tuple[Lever, ...] = (
    Lever(
        "mem_fraction_static",
        "static memory fraction",
        _fraction_values,
        _fraction_fix,
    ),
    Lever(
        "max_running_requests",
        "max running requests",
        _running_values,
        _running_fix,
        unused_when=_running_unused,
    ),
    Lever(
        "mamba_full_memory_ratio",
        "state/KV split ratio",
        _ratio_values,
        _ratio_values,
        applies=_has_state,
        unused_when=_ratio_unused,
    ),
    Lever(
        "max_mamba_cache_size",
        "state pool slots",
        _cache_values,
        lambda c: _cache_values(c, fine=True),
        applies=_has_state,
    ),
    Lever(
        "mamba_ssm_dtype",
        "SSM state dtype",
        _ssm_values,
        _ssm_values,
        applies=_has_state,
        lossy=True,
    ),
    Lever(
        "speculative_num_steps",
        "speculative steps",
        _steps_values,
        applies=_eagle,
    ),
    Lever(
        "speculative_num_draft_tokens",
        "speculative draft tokens",
        _draft_values,
        applies=lambda c: c.spec is not None,
    ),
    Lever(
        "speculative_algorithm",
        "speculative decoding",
        _spec_off,
        applies=lambda c: c.spec is not None,
    ),
    Lever(
        "context_length",
        "context length",
        _context_values,
        _context_fix,
        context=True,
    ),
    Lever(
        "kv_cache_dtype",
        "KV cache dtype",
        _kv_values,
        _kv_values,
        lossy=True,
    ),
    Lever(
        "chunked_prefill_size",
        "chunked prefill size",
        _chunk_values,
        _chunk_values,
        unused_when=_heuristic_only,
    ),
    Lever(
        "cuda_graph_max_bs",
        "CUDA-graph max batch size",
        _same_lever("cuda_graph_max_bs", _graph_values),
        _same_lever("cuda_graph_max_bs", _graph_values),
        unused_when=_heuristic_only,
    ),
    Lever(
        "disable_radix_cache",
        "radix (prefix) cache",
        _radix_values,
        applies=_has_state,
    ),
    Lever(
        "mamba_scheduler_strategy",
        "mamba scheduler strategy",
        _same_lever("mamba_scheduler_strategy", _strategy_values),
        applies=_has_state,
    ),
    Lever(
        "parallelism",
        "TP / PP",
        parallel_values,
        parallel_fix,
    ),
)
