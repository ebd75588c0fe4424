"""One vLLM release as an engine profile (engines/base.py:Profile).

Every mirrored release runs the same flow, resolve.py (engine args) and planning.py (memory),
asking its own rules module (v<version>/rules.py) wherever they differ; `declare` ties the flow
to one release's rules and reads the release's flag table (flags_<version>.json) and
architecture list (archs_<version>.txt), both generated from its wheel. The rest of the
contract reads the same in every release and lives here (common.py, memory.py).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache, partial
from typing import Any

from servefit.engines.base import (
    LogFeature,
    MemoryInputs,
    ParallelSizes,
    Profile,
    ResolvedArgs,
    Sizing,
)
from servefit.engines.dtypes import memory_as_loaded, sized_as_loaded
from servefit.engines.flagtable import read_architectures, release_numbers
from servefit.engines.vllm import common, planning, resolve
from servefit.engines.vllm.flags import VllmFlag, available_versions, load_flags, parse_argv
from servefit.engines.vllm.layout import LayoutRules, check_layout
from servefit.engines.vllm.levers import LEVERS as VLLM_LEVERS
from servefit.engines.vllm.memory import memory_inputs
from servefit.errors import EngineRejection, EngineVersionError
from servefit.hardware.spec import GPUSet
from servefit.model.readers import config_refusal
from servefit.model.spec import ModelSpec

__all__ = ["ENGINE", "LEVERS", "declare", "memory_inputs", "parallel_sizes"]

ENGINE = "vllm"

# lever name (explain / fit) -> the EngineArgs attribute it sets
LEVERS: dict[str, str] = {
    **{lv.dest: lv.dest for lv in VLLM_LEVERS if lv.dest != "tensor_parallel_size"},
    "speculative_config": "speculative_config",
    "parallelism": "tensor_parallel_size",
}


def declare(rules: Any, *, log_format: frozenset[LogFeature] = frozenset()) -> Profile:
    """The Profile of the release whose rules are `rules` (an instance of v0_10_0/rules.py:Rules
    or of a later profile's subclass; rules.VERSION is the profile id)."""
    version: str = rules.VERSION
    flags = load_flags(version)
    archs = read_architectures(__package__, version)

    def resolve_args(
        model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str]
    ) -> ResolvedArgs:
        return resolve.resolve(model, gpus, user_args, env, rules)

    def size_pools(
        model: ModelSpec,
        gpus: GPUSet,
        resolved: ResolvedArgs,
        memory: MemoryInputs,
        *,
        text: bool = True,
    ) -> Sizing:
        # the text is built either way: the consumers hold the profiled peak and the graph
        # estimate an outcome reads (_explain/outcome.py:memory_gib), the log lines come out of
        # the same pass
        return planning.size(model, gpus, resolved, memory, rules)

    layout = LayoutRules(fp8_moe_block_refine=rules.FP8_MOE_BLOCK_REFINE)
    profile = Profile(
        engine=ENGINE,
        version=version,
        flags=flags,
        architectures=archs,
        levers=_levers(flags),
        log_format=log_format,
        parse_argv=partial(parse_argv, flags),
        parallel_sizes=parallel_sizes,
        check_model=partial(check_model, archs, layout, rules.CONFIG_READERS),
        config_readers=rules.CONFIG_READERS,
        resolve_args=resolve_args,
        memory_inputs=memory_as_loaded(memory_inputs),
        size_pools=sized_as_loaded(size_pools),
        pool_shape=pool_shape,
    )
    return replace(
        profile, for_release=partial(_for_release, layout=layout, readers=rules.CONFIG_READERS)
    )


def pool_shape(v: dict[str, Any]) -> tuple[int, int]:
    """(block size, max_model_len) as the engine args resolved them."""
    return int(v.get("block_size") or 1), int(v.get("max_model_len") or 0)


@cache
def _for_release(
    profile: Profile, release: str, *, layout: LayoutRules, readers: frozenset[str]
) -> Profile:
    """The profile as `release` registers models and reads its command line: its own
    architecture list (archs_<release>.txt, tools/extract_architectures.py) and its own flag
    table (flags_<release>.json, tools/extract_vllm_flags.py) where the group's releases differ
    (0.10.1 and 0.10.1.1 size as 0.10.0 but have 0.10.1's flags, --mamba-ssm-cache-dtype
    among them; 0.11.0 and 0.16.0 likewise)."""
    changes: dict[str, Any] = {}
    try:
        archs = read_architectures(__package__, release)
    except EngineVersionError:
        # older than every list (archs_0_8_5.txt, vLLM 0.8.5, is the oldest kept): the oldest
        # list, so an architecture 0.8.5 lacks is not planned on an earlier release either
        older = release_numbers(release) < release_numbers(OLDEST_LISTED)
        archs = read_architectures(__package__, OLDEST_LISTED) if older else profile.architectures
    if archs != profile.architectures:
        changes.update(architectures=archs, check_model=partial(check_model, archs, layout, readers))
    if release != profile.version and release in available_versions():
        flags = load_flags(release)
        if flags != profile.flags:
            changes.update(flags=flags, parse_argv=partial(parse_argv, flags), levers=_levers(flags))
    return replace(profile, **changes) if changes else profile


OLDEST_LISTED = "0.8.5"


def _levers(flags: tuple[VllmFlag, ...]) -> dict[str, str]:
    """The levers whose flag the table has (--mamba-ssm-cache-dtype is 0.10.1+, ...)."""
    dests = {f.dest for f in flags}
    return {k: d for k, d in LEVERS.items() if d in dests or d == "num_speculative_tokens"}


def parallel_sizes(args: dict[str, Any]) -> ParallelSizes:
    """TP / PP / DP / EP from vLLM's flags (common.parallel_sizes); every DP rank is a full
    TP x PP group: the world is TP x PP x DP."""
    tp, pp, dp, ep = common.parallel_sizes(args)
    return ParallelSizes(tp=tp, pp=pp, dp=dp, ep=ep, world=tp * pp * dp, attn_tp=tp)


def check_model(
    architectures: frozenset[str],
    layout: LayoutRules,
    readers: frozenset[str],
    model: ModelSpec,
    sizes: ParallelSizes,
) -> None:
    """What vLLM refuses before it profiles memory (EngineRejection): a config its readers stop
    at (the release's Rules.CONFIG_READERS, model/readers.py: ModelConfig parses the config
    before it looks the architecture up), an architecture it does not register, attention heads
    its TP does not split (config time), a layout its worker cannot build the model in
    (layout.py)."""
    refused = config_refusal(model.issues, readers)
    if refused is not None:
        raise EngineRejection(refused)
    check_architecture(architectures, model)
    common.check_heads_divisible(model, sizes.tp)
    check_layout(model, sizes, layout)


def check_architecture(architectures: frozenset[str], model: ModelSpec) -> None:
    """vllm/model_executor/models/registry.py:_ModelRegistry._raise_for_unsupported, reached
    when no architecture of the config is registered (and, as servefit assumes, no
    Transformers-backend fallback applies): a removed architecture names the last release
    that had it; any other is "not supported for now"."""
    archs = list(model.raw_config.get("architectures") or [model.architecture])
    if any(a in architectures for a in archs):
        return
    for arch in archs:
        if arch in common.PREVIOUSLY_SUPPORTED:
            raise EngineRejection(
                common.previously_supported_error(arch, common.PREVIOUSLY_SUPPORTED[arch])
            )
    # f"... Supported architectures: {all_supported_archs}" prints the registry's dict_keys;
    # the list is shortened here to its size.
    raise EngineRejection(
        f"ValueError: Model architectures {archs!r} are not supported for now. Supported "
        f"architectures: dict_keys([... {len(architectures)} architectures])"
    )
