"""The contract every engine profile implements, the same for SGLang and vLLM.

A profile mirrors one released engine version (docs/engines/<engine>-<version>.md). Its
package, servefit/engines/<engine>/v<version>/, declares one `PROFILE = Profile(...)` holding
everything that release decides:

    flags          the release's server CLI (flags_<version>.json, generated from the wheel)
    architectures  the model classes the release registers (archs_<version>.txt, idem)
    renames        engine attributes this release spells differently from the engine's
                   canonical name (0.5.23: cuda_graph_max_bs -> cuda_graph_max_bs_decode)
    levers         lever name -> the attribute it sets in this release (explain / fit)
    log_format     the line formats this release prints (doctor tells releases apart by them)
    parse_argv     the release's own reading of a launch command's flags
    parallel_sizes the user's TP / PP / DP / EP, checked where servefit cannot plan them
    check_model    what the engine refuses before profiling memory: an architecture it does
                   not register, heads its TP does not split (EngineRejection)
    resolve_args   the engine's ServerArgs / EngineArgs post-init
    memory_inputs  the memory the engine profiles from: total, free before weights, weights
    size_pools     the engine's memory profiling and pool sizing
    pool_shape     (page size, context length) of the resolved args, for a launch that stops
                   before it sizes pools
    hidden_args    resolved attributes that are the engine's internals, not shown in a plan

`_plan/planner.py` calls these in that order and builds the immutable Plan; it holds no engine
default and names no engine. Which release uses which profile is declared once, in
servefit/engines/registry.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from servefit._plan.schema import Change, Consumer, PerRank, Pools
from servefit.errors import HardwareError
from servefit.frozen import frozen
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.validate import MAX_GIB, finite_float


@frozen
class Flag:
    """One engine CLI flag: its spellings, destination attribute and value type."""

    names: tuple[str, ...]
    dest: str
    kind: str = "str"  # "str" | "int" | "float" | "bool" (store_true) | "bool_false" (store_false) | "json" | "list"
    choices: tuple[str, ...] | None = None
    help: str = ""


@frozen
class ParsedArgs:
    """What an engine's parser read from one argv, without stopping at the first problem."""

    values: dict[str, Any] = field(default_factory=dict)  # dest -> typed value, as set by argv
    unknown: list[str] = field(default_factory=list)  # flags the engine does not define
    positionals: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # what argparse would reject, one line each
    warnings: list[str] = field(default_factory=list)  # deprecation notices the engine prints
    given: dict[str, str] = field(default_factory=dict)  # dest -> the option string matched
    # Required flags absent from argv (`--model-path`): argparse would stop here, but servefit
    # may take the model from elsewhere, so this is not an error.
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


# flag tables by identity -> (the table, dest -> its first flag): profiles keep their tables
# for the life of the process, and explain / fit look flags up thousands of times
_BY_DEST: dict[int, tuple[tuple[Flag, ...], dict[str, Flag]]] = {}


def by_dest(flags: tuple[Flag, ...]) -> dict[str, Flag]:
    """dest -> the first flag of `flags` that sets it (store_false twins come second)."""
    hit = _BY_DEST.get(id(flags))
    if hit is None or hit[0] is not flags:
        index: dict[str, Flag] = {}
        for f in flags:
            index.setdefault(f.dest, f)
        hit = _BY_DEST[id(flags)] = (flags, index)
    return hit[1]


@frozen
class ResolvedArgs:
    """Server args after the engine's own resolution, plus what it changed and why."""

    values: dict[str, Any]
    changes: tuple[Change, ...] = ()
    warnings: tuple[str, ...] = ()
    log_lines: tuple[str, ...] = ()  # warnings the engine prints while resolving, verbatim
    error: str | None = None  # an arg-resolution error the engine raises (exact text)
    env: dict[str, str] = field(default_factory=dict)  # engine env vars that size memory

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


@frozen
class MemoryInputs:
    """Runtime memory figures, per rank, in GiB (the unit SGLang prints as GB).

    pre_load_free_gib: free memory after CUDA/NCCL init and before weights, min over ranks
    (SGLang's `pre_model_load_memory` / v0.5.9 `min_per_gpu_memory`).
    weights_gib: target weights resident on the most loaded rank.
    draft_weights_gib: speculative draft weights on that rank (MTP layers etc.).
    """

    total_gib: float
    pre_load_free_gib: float
    weights_gib: float
    draft_weights_gib: float = 0.0
    calibrated: bool = False
    # vLLM: the profiling run's memory (activation peak, memory outside torch, CUDA-graph
    # estimate) as a real start measured it, minus what servefit models at that start's flags
    # (servefit/calibration/apply.py): added to the modelled figure of this launch
    nonkv_correction_gib: float = 0.0


@frozen
class Measured:
    """Memory figures the user measured or imposes, per rank, GiB: --free-gib (free before
    weights, any engine), and a log's "free before weights" / "weights" (a calibrated plan)."""

    free_gib: float | None = None
    free_before_gib: float | None = None
    weights_gib: float | None = None
    # vLLM's measured non-KV memory minus the modelled one at the calibration start (GiB; may
    # be negative): MemoryInputs.nonkv_correction_gib
    nonkv_correction_gib: float | None = None

    def check(self) -> None:
        for name, val in (
            ("--measured-free-before-gib", self.free_before_gib),
            ("--free-gib", self.free_gib),
            ("--measured-weights-gib", self.weights_gib),
        ):
            if val is not None:
                finite_float(val, name, low=0.0, low_open=True, high=MAX_GIB, error=HardwareError)

    @property
    def calibrated(self) -> bool:
        return self.nonkv_correction_gib is not None or (
            self.free_before_gib is not None and self.weights_gib is not None
        )


@frozen
class ParallelSizes:
    """The launch's parallel layout as the engine reads it from its flags."""

    tp: int
    pp: int
    dp: int
    ep: int
    world: int  # GPUs one instance occupies
    attn_tp: int  # ranks one attention layer's heads are split over


@frozen
class Sizing:
    """What an engine profile computes from memory: pools, per-rank breakdown, verdict."""

    pools: Pools
    per_rank: PerRank
    error: str | None = None
    error_consumer: str | None = None
    error_detail: str | None = None  # the numbers behind error_consumer
    consumers: tuple[Consumer, ...] = ()
    log_lines: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


class LogFeature(str, Enum):
    """A line-format trait that tells engine releases apart in a log (SGLang does not print
    its version). doctor records the traits it sees; each profile declares those its release
    prints (Profile.log_format); the registry matches the two."""

    # the server_args dump names the mamba strategy field
    ARGS_MAMBA_SCHEDULER_STRATEGY = "args.mamba_scheduler_strategy"
    ARGS_MAMBA_RADIX_CACHE_STRATEGY = "args.mamba_radix_cache_strategy"
    # "Load weight end. elapsed=.., type=.., dtype=.., avail mem=.." (model_runner.py:load_model)
    LOAD_END_DTYPE = "load_weight_end.dtype"
    # "Load weight end. elapsed=.., type=.., {quant_str}, avail mem=.."
    LOAD_END_QUANT = "load_weight_end.quant"
    # "Load weight end. type=.., dtype=.., avail mem=.." without elapsed= (older releases)
    LOAD_END_NO_ELAPSED = "load_weight_end.no_elapsed"
    # "KV Cache is allocated. dtype: .., #tokens: .." (memory_pool.py:_finalize_allocation_log)
    KV_ALLOCATED_DTYPE = "kv_allocated.dtype"


ResolveArgs = Callable[[ModelSpec, GPUSet, dict[str, Any], dict[str, str]], ResolvedArgs]


class SizePools(Protocol):
    """The engine's memory profiling and pool sizing. `text=False`: the same Sizing without its
    display text (the engine's log lines, the consumers) where the profile can skip building
    them; the pools, the per-rank figures, the error and its consumer are the same. fit's
    candidates and a fix search compare only those (tests/plan/test_text_free.py)."""

    def __call__(
        self,
        model: ModelSpec,
        gpus: GPUSet,
        resolved: ResolvedArgs,
        memory: MemoryInputs,
        *,
        text: bool = True,
    ) -> Sizing: ...


MemoryInputsFn = Callable[[ModelSpec, GPUSet, dict[str, Any], Measured], MemoryInputs]


@dataclass(frozen=True, eq=False)
class Profile:
    """One engine release as servefit mirrors it; see the module docstring for each field."""

    engine: str  # "sglang" | "vllm"
    version: str  # the release whose code the profile mirrors: the profile's id
    flags: tuple[Flag, ...]
    architectures: frozenset[str]
    levers: Mapping[str, str]
    log_format: frozenset[LogFeature]
    parse_argv: Callable[[list[str]], ParsedArgs]
    parallel_sizes: Callable[[dict[str, Any]], ParallelSizes]
    check_model: Callable[[ModelSpec, ParallelSizes], None]
    resolve_args: ResolveArgs
    memory_inputs: MemoryInputsFn
    size_pools: SizePools
    pool_shape: Callable[[dict[str, Any]], tuple[int, int]]
    renames: Mapping[str, str] = field(default_factory=dict)
    # A release of this profile's group as the engine registers it where it differs from the
    # profile's own release (the architectures it serves): (this profile, release) -> its
    # Profile, called through at_release so a profile derived with replace() is the one
    # adjusted. None: every release of the group is the profile as is.
    for_release: Callable[[Profile, str], Profile] | None = None
    hidden_args: frozenset[str] = frozenset()
    # the code the release reads a config with before anything else (model/readers.py): its
    # transformers, its own config and quantization classes; check_model refuses what they do
    config_readers: frozenset[str] = frozenset()

    def at_release(self, release: str) -> Profile:
        """This profile as `release` of its group registers models and reads its flags."""
        return self if self.for_release is None else self.for_release(self, release)

    def flag(self, dest: str) -> Flag | None:
        """The release's flag that sets `dest`, None when it has none."""
        return by_dest(self.flags).get(dest)

    def __repr__(self) -> str:
        return f"<{self.engine} profile {self.version}>"
