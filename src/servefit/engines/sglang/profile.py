"""What every SGLang profile shares, and `declare`, which makes one release's Profile.

A release package (v<version>/__init__.py) declares its PROFILE with `declare(...)`: its own
arg resolution and pool sizing, the attributes it renamed, the log formats it prints. Its flag
table and architecture list are read from the files generated from its wheel
(flags_<version>.json by tools/extract_sglang_flags.py, archs_<version>.txt by
tools/extract_architectures.py). The rest reads the same in every mirrored release and lives
here: the parallel layout, the checks made before memory profiling, the memory inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache, partial
from typing import Any

from servefit.engines.base import (
    LogFeature,
    Measured,
    MemoryInputs,
    ParallelSizes,
    Profile,
    ResolveArgs,
    ResolvedArgs,
    SizePools,
)
from servefit.engines.dtypes import memory_as_loaded, sized_as_loaded, with_dtype
from servefit.engines.flagtable import read_architectures, release_numbers
from servefit.engines.sglang.common import pp_indices
from servefit.engines.sglang.dtype import resolve_dtype
from servefit.engines.sglang.flags import load_flags, parse_argv
from servefit.engines.sglang.layout import LayoutRules, check_layout
from servefit.errors import ArgumentError, EngineRejection, EngineVersionError, HardwareError
from servefit.evolve import evolve
from servefit.hardware.preload import pre_load_free_gib
from servefit.hardware.spec import GPUSet
from servefit.model import readers
from servefit.model.cache import weights
from servefit.model.spec import ModelSpec

ENGINE = "sglang"

# lever name (explain / fit) -> the ServerArgs attribute it sets, by its canonical name; a
# release that renamed an attribute says so in its `renames`.
LEVERS: dict[str, str] = {
    "mem_fraction_static": "mem_fraction_static",
    "max_running_requests": "max_running_requests",
    "mamba_full_memory_ratio": "mamba_full_memory_ratio",
    "max_mamba_cache_size": "max_mamba_cache_size",
    "mamba_ssm_dtype": "mamba_ssm_dtype",
    "speculative_num_steps": "speculative_num_steps",
    "speculative_num_draft_tokens": "speculative_num_draft_tokens",
    "speculative_algorithm": "speculative_algorithm",
    "context_length": "context_length",
    "kv_cache_dtype": "kv_cache_dtype",
    "chunked_prefill_size": "chunked_prefill_size",
    "cuda_graph_max_bs": "cuda_graph_max_bs",
    "disable_radix_cache": "disable_radix_cache",
    "mamba_scheduler_strategy": "mamba_scheduler_strategy",
    "parallelism": "tp_size",
}


def declare(
    version: str,
    *,
    resolve_args: ResolveArgs,
    size_pools: SizePools,
    log_format: frozenset[LogFeature],
    renames: Mapping[str, str] | None = None,
    check_config: Callable[[ModelSpec], None] | None = None,
    layout: LayoutRules | None = None,
    config_readers: frozenset[str] = frozenset(),
    dtype_cast_logged: bool = False,
) -> Profile:
    """The Profile of SGLang `version`, whose package provides its resolution and sizing;
    `check_config`: a config the release cannot load (EngineRejection), checked with the
    architecture before anything is resolved; `dtype_cast_logged`: the release prints
    _get_and_verify_dtype's cast line at the default log level (engines/sglang/dtype.py)."""
    renamed = dict(renames or {})
    flags = load_flags(version)
    archs = read_architectures(__package__, version)
    checks = (check_config, layout or LayoutRules(), config_readers)
    profile = Profile(
        engine=ENGINE,
        version=version,
        flags=flags,
        architectures=archs,
        levers={name: renamed.get(dest, dest) for name, dest in LEVERS.items()},
        log_format=log_format,
        parse_argv=partial(parse_argv, flags),
        parallel_sizes=parallel_sizes,
        check_model=partial(check_model, version, archs, *checks),
        resolve_args=_resolved_in_loaded_dtype(resolve_args, dtype_cast_logged),
        memory_inputs=memory_as_loaded(memory_inputs),
        size_pools=sized_as_loaded(size_pools),
        pool_shape=pool_shape,
        renames=renamed,
        hidden_args=frozenset({"cuda_graph_bs"}),  # the capture list, kept for sizing
        config_readers=config_readers,
    )
    return replace(profile, for_release=partial(_for_release, checks=checks))


# The oldest release whose architecture list is kept (archs_0_5_1.txt: sglang 0.5.1, the first
# 0.5.x on PyPI; it registers no hybrid model: Qwen3-Next came in 0.5.2, Falcon-H1 in 0.5.3,
# Nemotron-H and Kimi-Linear in 0.5.5, Qwen3.5 in 0.5.9).
OLDEST_LISTED = "0.5.1"


@cache
def _for_release(
    profile: Profile,
    release: str,
    *,
    checks: tuple[Callable[[ModelSpec], None] | None, LayoutRules, frozenset[str]],
) -> Profile:
    """The profile as `release` registers models: its own architecture list
    (archs_<release>.txt, tools/extract_architectures.py on its wheel, post releases
    included), else, for a release older than every list, the oldest list (an architecture
    0.5.1 does not register, no earlier release does either: servefit never plans a model older
    releases lack). A release newer than every list keeps its profile's."""
    try:
        archs = read_architectures(__package__, release)
    except EngineVersionError:
        if release_numbers(release) >= release_numbers(OLDEST_LISTED):
            return profile
        archs = read_architectures(__package__, OLDEST_LISTED)
    if archs == profile.architectures:
        return profile
    return replace(
        profile,
        architectures=archs,
        check_model=partial(check_model, release, archs, *checks),
    )


def _resolved_in_loaded_dtype(resolve_args: ResolveArgs, cast_logged: bool) -> ResolveArgs:
    """ModelConfig resolves the dtype before anything reads the model (engines/sglang/dtype.py):
    the release's resolution sees the model as loaded; the dtype is kept as "_model_dtype"."""

    def resolve(
        model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str]
    ) -> ResolvedArgs:
        dtype, log = resolve_dtype(model, user_args)
        resolved = resolve_args(with_dtype(model, dtype), gpus, user_args, env)
        if log is None:
            return resolved
        logs = (log, *resolved.log_lines) if cast_logged else resolved.log_lines
        return evolve(resolved, values={**resolved.values, "_model_dtype": dtype}, log_lines=logs)

    return resolve


def pool_shape(v: dict[str, Any]) -> tuple[int, int]:
    """(page size, context length) as ServerArgs resolved them; a launch refused before it
    resolves them has the context it asked for."""
    return int(v.get("page_size") or 1), int(v.get("context_len") or v.get("context_length") or 0)


def parallel_sizes(args: dict[str, Any]) -> ParallelSizes:
    """TP / PP / DP / EP from ServerArgs attributes. With DP attention the DP ranks share the
    TP ranks: the world is TP x PP, and one attention layer's heads split over TP / DP."""
    get = args.get
    tp, pp, dp, ep = (
        1 if x is None else int(x)
        for x in (get("tp_size"), get("pp_size"), get("dp_size"), get("ep_size"))
    )
    for name, val in (("tp-size", tp), ("pp-size", pp), ("dp-size", dp), ("ep-size", ep)):
        if val <= 0:
            raise ArgumentError(f"--{name} must be a positive integer, got {val}")
    _check_ranges(args)
    dp_attention = bool(args.get("enable_dp_attention"))
    return ParallelSizes(
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        world=tp * pp * (1 if dp_attention else dp),
        attn_tp=tp // dp if dp_attention else tp,
    )


# (dest, flag, lowest allowed, highest allowed): values the engine would accept but that make no
# physical sense, or that it would reject later with a traceback.
_RANGES = (
    ("mem_fraction_static", "--mem-fraction-static", 1e-9, 1.0),
    ("max_running_requests", "--max-running-requests", 1, None),
    ("max_total_tokens", "--max-total-tokens", 1, None),
    ("context_length", "--context-length", 1, None),
    ("page_size", "--page-size", 1, None),
    ("max_mamba_cache_size", "--max-mamba-cache-size", 1, None),
    ("mamba_full_memory_ratio", "--mamba-full-memory-ratio", 1e-9, None),
    ("speculative_num_steps", "--speculative-num-steps", 1, None),
    ("speculative_eagle_topk", "--speculative-eagle-topk", 1, None),
    ("speculative_num_draft_tokens", "--speculative-num-draft-tokens", 1, None),
    # the engine lists every captured batch size (server_args.py:_generate_cuda_graph_batch_sizes):
    # beyond a million there is no GPU to capture them on, and the list alone would take gigabytes
    ("cuda_graph_max_bs", "--cuda-graph-max-bs", 1, 1 << 20),
    ("cuda_graph_max_bs_decode", "--cuda-graph-max-bs-decode", 1, 1 << 20),
    ("max_prefill_tokens", "--max-prefill-tokens", 1, None),
)


_RANGE_DESTS = frozenset(dest for dest, *_ in _RANGES)


def _check_ranges(args: dict[str, Any]) -> None:
    present = _RANGE_DESTS.intersection(args)
    for dest, flag, lo, hi in _RANGES:
        if dest not in present:
            continue
        val = args[dest]
        if val is None or isinstance(val, bool) or not isinstance(val, (int, float)):
            continue
        if val != val or val < lo or (hi is not None and val > hi):
            low = f"[{lo}" if lo >= 1 else "(0"
            bound = f"in {low}, {hi}]" if hi is not None else f">= {lo}" if lo >= 1 else "> 0"
            raise ArgumentError(f"{flag} must be {bound}, got {val}")
    cps = args.get("chunked_prefill_size")
    if isinstance(cps, int) and not isinstance(cps, bool) and cps == 0:
        raise ArgumentError(
            "--chunked-prefill-size must be positive, or -1 to disable chunked prefill"
        )


def config_readers(
    transformers: str,
    *,
    modelopt_fp8_text: str,
    kv_divides_by_cell: bool,
    own_configs: str = readers.SGLANG_CONFIGS,
) -> frozenset[str]:
    """The code a release reads a config with (model/readers.py), from what its rules declare:
    its transformers, its own config classes (0.5.9's differ), ModelOptFp8Config's text, and
    the KV pool sizing that divides by the KV bytes per token."""
    out = {readers.transformers(transformers), readers.SGLANG_QUANT, readers.GPTQ_AWQ_CLASSIC}
    out.add(own_configs)
    out.add(
        readers.SGLANG_MODELOPT_REGULAR_FP8
        if modelopt_fp8_text == "regular"
        else readers.SGLANG_MODELOPT_STATIC_FP8
    )
    if kv_divides_by_cell:
        out.add(readers.SGLANG_KV_DIVIDES_BY_CELL)
    return frozenset(out)


def check_model(
    version: str,
    architectures: frozenset[str],
    check_config: Callable[[ModelSpec], None] | None,
    layout: LayoutRules,
    config_readers: frozenset[str],
    model: ModelSpec,
    sizes: ParallelSizes,
) -> None:
    """What SGLang `version` refuses before it profiles memory (EngineRejection): a config its
    readers stop at (get_config runs before the model is looked up), a model it does not
    register or cannot load, a layout it cannot build the model in (layout.py)."""
    refused = readers.config_refusal(model.issues, config_readers)
    if refused is not None:
        raise EngineRejection(refused)
    check_architecture(version, architectures, model)
    if check_config is not None:
        check_config(model)
    check_layout(model, sizes, layout)


def check_architecture(version: str, architectures: frozenset[str], model: ModelSpec) -> None:
    """sglang/srt/model_loader/utils.py:get_model_architecture: an architecture no module of
    sglang/srt/models/ registers (EntryClass) is not served natively; SGLang then tries its
    Transformers backend (resolve_transformers_arch), which servefit does not plan."""
    archs = list(model.raw_config.get("architectures") or [model.architecture])
    if any(a in architectures for a in archs):
        return
    raise EngineRejection(
        f"SGLang {version} does not register {', '.join(archs)} (no sglang/srt/models/ module "
        "declares it as its EntryClass): the engine would fall back to its Transformers "
        "backend, which servefit does not plan"
    )


def memory_inputs(
    model: ModelSpec, gpus: GPUSet, v: dict[str, Any], measured: Measured
) -> MemoryInputs:
    """Pre-load free memory and weights per rank: measured (calibrated) or modelled."""
    tp, pp = int(v.get("tp_size") or 1), int(v.get("pp_size") or 1)
    ep = int(v.get("ep_size") or 1)
    w = weights(model, tp, pp, ep, pp_indices)
    spec = v.get("speculative_algorithm") in ("EAGLE", "EAGLE3", "STANDALONE")
    draft = w.draft_gib if spec and not v.get("speculative_draft_model_path") else 0.0
    total = gpus.gpu.memory_mib / 1024
    if measured.free_before_gib is not None:
        pre = measured.free_before_gib
    elif gpus.free_gib_override is not None:
        pre = gpus.free_gib_override
    else:
        pre = pre_load_free_gib(gpus.gpu, world_size=tp * pp, tp=tp, engine=ENGINE)
    if pre > total + 1e-6:
        raise HardwareError(
            f"free memory before weights ({pre:.2f} GiB) exceeds the GPU's {total:.2f} GiB"
        )
    return MemoryInputs(
        total_gib=total,
        pre_load_free_gib=pre,
        weights_gib=measured.weights_gib if measured.weights_gib is not None else w.target_gib,
        draft_weights_gib=draft,
        calibrated=measured.calibrated,
    )
