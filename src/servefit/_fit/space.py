"""What fit searches, per engine: the engine args of a layout and of --spec, the grids of the
running-request cap and of the memory fraction, the variants around them (lossy dtypes, prefix
caching off, state-pool sizing), which attributes count as tuning flags, and how a baseline
launch command is read. _fit/search.py and _fit/rank.py ask `space_for(engine)` and never branch
on the engine; the flag spellings and headroom come from the lever catalogue."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from servefit._explain.catalogue import catalogue_for
from servefit._explain.lever_types import Catalogue
from servefit._plan.schema import Plan
from servefit.engines import registry
from servefit.errors import ArgumentError
from servefit.frozen import frozen
from servefit.model.spec import ModelSpec

SPEC_CHOICES = ("none", "mtp", "nextn", "eagle", "eagle3", "standalone", "ngram")
RATIOS = (0.3, 0.5, 0.7, 1.5, 2.0)
Variants = list[tuple[str, dict[str, Any]]]


@frozen
class FitSpace:
    catalogue: Catalogue
    fraction_grid: tuple[float, ...]
    running_grid: tuple[int, ...]
    running_needed: Callable[[Plan], bool]  # whether to search the running cap at all
    spec_arguments: Callable[[str, int | None, str | None, ModelSpec], dict[str, Any]]
    outers: Callable[[bool, bool, Plan], Variants]  # (allow_lossy, allow_no_radix, plan)
    state_variants: Callable[[Plan, int | None], Variants]
    base_dests: frozenset[str]  # model, parallelism, context and speculation
    memory_dests: frozenset[str]  # attributes that size memory: tuning flags when set
    launch_dests: frozenset[str]  # set by the command renderer (model, nodes, host, port)
    # features a baseline turns on that cost memory: every candidate keeps the user's choice
    # (turning them off is what --allow-no-radix searches)
    kept_from_baseline: frozenset[str]
    model_keys: tuple[str, ...]
    spec_of: Callable[[dict[str, Any]], tuple[str, int | None, str | None]]  # of a baseline

    @property
    def not_carried(self) -> frozenset[str]:
        """Baseline args the candidates set themselves, so not copied from the user's launch."""
        return self.base_dests | self.memory_dests | self.launch_dests

    def carried(self, baseline: dict[str, Any] | None) -> dict[str, Any]:
        """The baseline's other args (parsers, eager mode, multimodal limits, ...): every
        candidate is planned with them and its command keeps them. Host and port go to the
        command only."""
        return {
            k: v
            for k, v in (baseline or {}).items()
            if k not in self.not_carried and k not in ("host", "port") and v is not None
        }

    def layout_args(
        self, tp: int, pp: int, context: int, spec_args: dict[str, Any]
    ) -> dict[str, Any]:
        cat = self.catalogue
        args = {cat.tp_dest: tp, cat.context_dest: context, **spec_args}
        if pp > 1:
            args[cat.pp_dest] = pp
        return args

    def parallel_of(self, args: dict[str, Any]) -> tuple[int, int]:
        cat = self.catalogue
        return int(args.get(cat.tp_dest) or 1), int(args.get(cat.pp_dest) or 1)


def _steps(steps: int | None) -> int:
    steps = steps or 3
    if steps < 1:
        raise ArgumentError(f"--spec-steps must be at least 1, got {steps}")
    return steps


def _no_mtp(spec: str, model: ModelSpec) -> ArgumentError:
    return ArgumentError(
        f"--spec {spec}: {model.name} has no MTP layers; use --spec none, or --spec eagle3 "
        "--draft-model PATH"
    )


def _check_spec(spec: str) -> str:
    s = (spec or "none").lower()
    if s in ("off", "no"):
        return "none"
    if s not in SPEC_CHOICES:
        raise ArgumentError(
            f"unknown --spec {spec!r}; use none, mtp, eagle, eagle3, standalone or ngram"
        )
    return s


# --------------------------------------------------------------------------------------------
# SGLang
# --------------------------------------------------------------------------------------------

SGLANG_F_GRID = tuple(round(0.70 + 0.01 * i, 3) for i in range(15)) + tuple(
    round(0.85 + 0.005 * i, 3) for i in range(25)
)  # 0.70 .. 0.84 by 0.01, 0.85 .. 0.97 by 0.005
SGLANG_R_GRID = tuple(range(1, 33)) + (36, 40, 44, 48, 56, 64, 80, 96, 128, 160, 192, 256)


def sglang_spec_arguments(
    spec: str, steps: int | None, draft: str | None, model: ModelSpec
) -> dict[str, Any]:
    s = _check_spec(spec)
    if s == "none":
        return {}
    if s == "ngram":
        return {"speculative_algorithm": "NGRAM"}
    n = _steps(steps)
    chain = {
        "speculative_num_steps": n,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": n + 1,
    }
    if s in ("mtp", "nextn"):
        if not model.mtp_layers:
            raise _no_mtp(s, model)
        return {"speculative_algorithm": "NEXTN", **chain}
    if not draft:
        raise ArgumentError(f"--spec {s} needs --draft-model PATH (the draft checkpoint)")
    return {"speculative_algorithm": s.upper(), "speculative_draft_model_path": draft, **chain}


def _sglang_outers(allow_lossy: bool, allow_no_radix: bool, p0: Plan) -> Variants:
    has_state = p0.pools.mamba_layers > 0
    outers: Variants = [("", {})]
    if allow_lossy:
        outers.append(("kv fp8", {"kv_cache_dtype": "fp8_e4m3"}))
        if has_state:
            outers.append(("ssm bf16", {"mamba_ssm_dtype": "bfloat16"}))
            outers.append(
                ("kv fp8 + ssm bf16", {"kv_cache_dtype": "fp8_e4m3", "mamba_ssm_dtype": "bfloat16"})
            )
    if allow_no_radix and has_state and not p0.resolved_args.get("disable_radix_cache"):
        outers += [
            (f"{k} + no radix".lstrip(" +"), {**a, "disable_radix_cache": True}) for k, a in outers
        ]
    return outers


def _sglang_state_variants(p0: Plan, running: int | None) -> Variants:
    """An explicit --max-mamba-cache-size of exactly running x slots-per-request, or the
    ratio, when the state pool is sized by it."""
    out: Variants = [("", {})]
    if p0.pools.mamba_layers <= 0:
        return out
    slots = p0.pools.mamba_slots_per_request or 1
    ratio_sized = (p0.pools.mamba_sizing or "").startswith("mamba_full_memory_ratio")
    if running is not None and (slots > 1 or ratio_sized):
        out.append(("exact slots", {"max_mamba_cache_size": running * slots}))
    if running is None and ratio_sized:
        out += [(f"ratio {r:g}", {"mamba_full_memory_ratio": r}) for r in RATIOS]
    return out


_SGLANG_ALGO = {"NEXTN": "mtp", "EAGLE": "eagle", "EAGLE3": "eagle3", "STANDALONE": "standalone"}


def _sglang_spec_of(args: dict[str, Any]) -> tuple[str, int | None, str | None]:
    algo = str(args.get("speculative_algorithm") or "").upper()
    spec = "ngram" if algo == "NGRAM" else _SGLANG_ALGO.get(algo, "none")
    return spec, args.get("speculative_num_steps"), args.get("speculative_draft_model_path")


def _sglang() -> FitSpace:
    cat = catalogue_for("sglang")
    base = frozenset(
        {
            "tp_size",
            "context_length",
            "speculative_algorithm",
            "speculative_draft_model_path",
            "speculative_num_steps",
            "speculative_eagle_topk",
            "speculative_num_draft_tokens",
        }
    )
    memory = frozenset(
        {d for p in registry.profiles(cat.engine) for d in p.levers.values()}
        | {
            "pp_size",
            "dp_size",
            "ep_size",
            "enable_dp_attention",
            "max_total_tokens",
            "max_prefill_tokens",
            "page_size",
            "cuda_graph_bs",
            "disable_cuda_graph",
            "disable_overlap_schedule",
            "mamba_track_interval",
            "attention_backend",
        }
    )
    return FitSpace(
        catalogue=cat,
        fraction_grid=SGLANG_F_GRID,
        running_grid=SGLANG_R_GRID,
        # without a state pool or speculation SGLang derives the cap from the KV pool itself
        running_needed=lambda p0: (
            p0.pools.mamba_layers > 0 or p0.resolved_args.get("speculative_algorithm") is not None
        ),
        spec_arguments=sglang_spec_arguments,
        outers=_sglang_outers,
        state_variants=_sglang_state_variants,
        base_dests=base,
        memory_dests=memory,
        launch_dests=frozenset({"model_path", "nnodes", "node_rank", "dist_init_addr"}),
        kept_from_baseline=frozenset(),  # the radix cache is on unless the engine disables it
        model_keys=("model_path",),
        spec_of=_sglang_spec_of,
    )


# --------------------------------------------------------------------------------------------
# vLLM
# --------------------------------------------------------------------------------------------

VLLM_U_GRID = tuple(round(0.80 + 0.01 * i, 2) for i in range(19))  # 0.80 .. 0.98
VLLM_S_GRID = (
    *range(1, 17),
    20,
    24,
    28,
    32,
    40,
    48,
    56,
    64,
    80,
    96,
    128,
    160,
    192,
    256,
    384,
    512,
    768,
    1024,
)
# vllm/config/speculative.py:SpeculativeMethod: "mtp" (any MTP checkpoint), "eagle", "eagle3",
# "draft_model" (a separate small model), "ngram" (prompt lookup, no draft weights)
_VLLM_METHOD = {
    "mtp": "mtp",
    "nextn": "mtp",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "standalone": "draft_model",
}


def vllm_spec_arguments(
    spec: str, steps: int | None, draft: str | None, model: ModelSpec
) -> dict[str, Any]:
    """--speculative-config: {"method", "num_speculative_tokens" (= --spec-steps), "model"}."""
    s = _check_spec(spec)
    if s == "none":
        return {}
    n = _steps(steps)
    if s == "ngram":
        return {"speculative_config": {"method": "ngram", "num_speculative_tokens": n}}
    if s in ("mtp", "nextn"):
        if not model.mtp_layers:
            raise _no_mtp(s, model)
        return {"speculative_config": {"method": "mtp", "num_speculative_tokens": n}}
    if not draft:
        raise ArgumentError(f"--spec {s} needs --draft-model PATH (the draft checkpoint)")
    return {
        "speculative_config": {
            "method": _VLLM_METHOD[s],
            "model": draft,
            "num_speculative_tokens": n,
        }
    }


def _vllm_outers(allow_lossy: bool, allow_no_radix: bool, p0: Plan) -> Variants:
    has_state = p0.pools.mamba_layers > 0
    outers: Variants = [("", {})]
    if allow_lossy:
        outers.append(("kv fp8", {"kv_cache_dtype": "fp8_e4m3"}))
        if has_state:
            outers.append(("ssm bf16", {"mamba_ssm_cache_dtype": "bfloat16"}))
            outers.append(
                (
                    "kv fp8 + ssm bf16",
                    {"kv_cache_dtype": "fp8_e4m3", "mamba_ssm_cache_dtype": "bfloat16"},
                )
            )
    # prefix caching on puts hybrids in Mamba cache mode align: 2 + k (+1) state blocks per
    # request instead of 1 + k (servefit/engines/vllm/v0_33_0/rules.py:mamba_blocks_per_request)
    if allow_no_radix and has_state and p0.resolved_args.get("enable_prefix_caching"):
        outers += [
            (f"{k} + no prefix caching".lstrip(" +"), {**a, "enable_prefix_caching": False})
            for k, a in outers
        ]
    return outers


_VLLM_SPEC_BACK = {
    "mtp": "mtp",
    "ngram": "ngram",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "draft_model": "standalone",
}


def _vllm_spec_of(args: dict[str, Any]) -> tuple[str, int | None, str | None]:
    """--spec of a baseline's --speculative-config (the per-model MTP methods are "mtp")."""
    from servefit.engines.vllm.resolve import _MTP_METHODS, spec_config

    cfg, method = spec_config(args.get("speculative_config"))
    if cfg is None:
        return "none", None, None
    kind = "mtp" if method in _MTP_METHODS else _VLLM_SPEC_BACK.get(str(method))
    if kind is None:
        raise ArgumentError(
            f"fit searches --speculative-config methods {', '.join(_VLLM_SPEC_BACK)}; the "
            f"launch uses {method!r}: pass --spec"
        )
    return kind, cfg.get("num_speculative_tokens"), cfg.get("model")


def _vllm() -> FitSpace:
    cat = catalogue_for("vllm")
    # the levers, the parallelism fit does not search (DP, EP), and the two settings that
    # replace the memory profile fit sizes from --gpu-memory-utilization
    memory = frozenset(
        {d for p in registry.profiles(cat.engine) for d in p.levers.values()}
        | {
            "pipeline_parallel_size",
            "data_parallel_size",
            "enable_expert_parallel",
            "kv_cache_memory_bytes",
            "num_gpu_blocks_override",
        }
    ) - {"num_speculative_tokens"}
    return FitSpace(
        catalogue=cat,
        fraction_grid=VLLM_U_GRID,
        running_grid=VLLM_S_GRID,
        # vLLM's sampler profiles max_num_seqs requests: the cap always sizes memory
        running_needed=lambda p0: True,
        spec_arguments=vllm_spec_arguments,
        outers=_vllm_outers,
        state_variants=lambda p0, running: [("", {})],  # vLLM has no separate state pool
        base_dests=frozenset({"tensor_parallel_size", "max_model_len", "speculative_config"}),
        memory_dests=memory,
        launch_dests=frozenset(
            {"model", "model_tag", "nnodes", "node_rank", "master_addr", "master_port", "headless"}
        ),
        # 0.24.0 leaves prefix caching off for hybrids, 0.33.0 turns it on
        kept_from_baseline=frozenset({"enable_prefix_caching"}),
        model_keys=("model_tag", "model"),
        spec_of=_vllm_spec_of,
    )


@cache
def space_for(engine: str) -> FitSpace:
    if engine == "sglang":
        return _sglang()
    if engine == "vllm":
        return _vllm()
    raise ArgumentError(f"servefit fit searches SGLang and vLLM launches; got {engine!r}")
