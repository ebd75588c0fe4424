"""SGLang server-arg resolution (0.5.10 onward): the memory-relevant steps, in the engine's order.

Mirrors (0.5.23) sglang/srt/arg_groups/pipeline.py:run_resolution_pipeline:
handle_deprecated_dp_attention -> handle_cuda_graph_config -> handle_gpu_memory_settings ->
handle_model_specific_adjustments (model overrides, _mamba_radix_cache_resolution) ->
handle_attention_backend_compatibility -> _page_size_default -> handle_data_parallelism ->
_pipeline_parallel_overlap_disable -> handle_speculative_decoding -> check_server_args.
Where a release differs, the step asks its rules (flow/rules.py). See docs/engines/sglang-*.md.
"""

from __future__ import annotations

from typing import Any

from servefit.engines.base import ResolvedArgs
from servefit.engines.recorder import Recorder
from servefit.engines.sglang import common
from servefit.engines.sglang.flow import heuristics as h
from servefit.engines.sglang.flow import mamba_handler
from servefit.engines.sglang.flow.rules import Rules
from servefit.engines.sglang.layout import check_pp_speculative
from servefit.errors import UnsupportedModelError
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec

SPEC_EAGLE = ("EAGLE", "EAGLE3", "STANDALONE")
# speculative/spec_info.py:SpeculativeAlgorithm members (NONE aside)
SPEC_BUILTINS = (
    "DFLASH",
    "UNO",
    "DSPARK",
    "EAGLE",
    "EAGLE3",
    "FROZEN_KV_MTP",
    "STANDALONE",
    "NGRAM",
)
RESET_48 = (
    "Max running requests is reset to 48 for speculative decoding. You can override this "
    "by explicitly setting --max-running-requests."
)
TOPK1_FIX = "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"


def env_true(env: dict[str, str], name: str) -> bool:
    return env.get(name, "").lower() in ("1", "true", "yes")


def resolve_args(
    model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str], rules: Rules
) -> ResolvedArgs:
    v = dict(rules.defaults)
    v.update({k: val for k, val in user_args.items() if val is not None})
    r = Recorder(v)
    if model.is_hybrid and model.architecture not in rules.state_pool_archs:
        kinds = ", ".join(
            sorted({model.recurrent_mixer(i).kind for i in model.recurrent_layer_ids})
        )
        raise UnsupportedModelError(
            f"SGLang {rules.version} has no recurrent-state pool for {model.architecture} "
            f"({kinds} layers); it cannot serve this model"
        )
    _deprecated_dp_attention(v, r, rules)
    if v["mamba_full_memory_ratio"] is None:
        v["mamba_full_memory_ratio"] = rules.mamba_full_memory_ratio
    error = None
    try:
        _pipeline(model, gpus, v, r, env, rules)
    except common.EngineError as exc:
        error = str(exc)
        # the launch stops before it derives the context: it asked for its own, if any
        v.setdefault("context_len", v.get("context_length") or common.derived_context_len(model))
        if v["page_size"] is None:
            v["page_size"] = 1
    # serving_hook.py:handle_environment_variables exports --mamba-ssm-dtype.
    mem_env = {k: env[k] for k in rules.env_vars if k in env}
    if v["mamba_ssm_dtype"] is not None:
        mem_env["SGLANG_MAMBA_SSM_DTYPE"] = v["mamba_ssm_dtype"]
    return ResolvedArgs(
        values=v, changes=tuple(r.changes), log_lines=tuple(r.logs), error=error, env=mem_env
    )


def _deprecated_dp_attention(v: dict[str, Any], r: Recorder, rules: Rules) -> None:
    """parallel_hook.py:handle_deprecated_dp_attention. Releases without --attn-dp-size
    (rules.dp_attention == "flag") keep the flag: their attention DP degree is dp_size."""
    if not v["enable_dp_attention"]:
        return
    if rules.dp_attention == "flag":
        v["attn_dp_size"] = v["dp_size"]
        return
    if v["attn_dp_size"] == 1:
        r.set(
            "attn_dp_size", v["dp_size"], "--enable-dp-attention --dp-size N means --attn-dp-size N"
        )
        r.set("dp_size", 1, "--dp-size now counts replicas")
    v["enable_dp_attention"] = False


def _pipeline(
    model: ModelSpec,
    gpus: GPUSet,
    v: dict[str, Any],
    r: Recorder,
    env: dict[str, str],
    rules: Rules,
) -> None:
    """The resolution steps after the deprecated-flag pass; an engine rejection raises."""
    gpu = gpus.gpu
    h.cuda_graph_config(model, gpu, v, r, rules)
    h.gpu_memory_settings(model, gpu, v, r, rules)
    _qwen3_5_sm100_override(model, gpu, v, r, rules)
    _step3p_hicache_override(model, v, r)
    if rules.mamba_radix_cache == "handler":
        mamba_handler.handle(model, gpu, v, r, rules)
    else:
        _mamba_radix_cache(model, gpu, v, r, rules)
    _attention_backend(model, gpu, v, r, env, rules)
    if v["page_size"] is None:  # overrides.py:_page_size_default
        hip_5d = (
            h.is_hip(gpu) and env.get("SGLANG_AITER_KV_CACHE_LAYOUT", "").lower() == "vectorized_5d"
        )
        v["page_size"] = 64 if hip_5d else 1
    # parallel_hook.py:handle_data_parallelism
    if v["attn_dp_size"] < 1:
        raise common.EngineError(
            f"ValueError: --attn-dp-size must be positive (got {v['attn_dp_size']})."
        )
    if v["attn_dp_size"] > 1 and v["tp_size"] % v["attn_dp_size"]:
        raise common.EngineError("AssertionError")  # assert cfg.tp_size % cfg.attn_dp_size == 0
    if v["attn_dp_size"] > 1:
        old = v["chunked_prefill_size"]
        new = old // v["attn_dp_size"]
        r.set(
            "chunked_prefill_size",
            new,
            "attention DP divides the chunk",
            f"DP attention is enabled. chunked prefill size is adjusted from {old} to {new}.",
        )
    if v["pp_size"] > 1:  # overrides.py:_pipeline_parallel_overlap_disable (after the mamba pass)
        r.set(
            "disable_overlap_schedule",
            True,
            "pipeline parallelism",
            "Pipeline parallelism is incompatible with overlap schedule.",
        )
    _speculative(model, v, r, env, rules)
    # kv_cache_hook.py:handle_cache_compatibility validates the effective ratio (any model).
    if v["swa_full_tokens_ratio"] is None:
        v["swa_full_tokens_ratio"] = rules.swa_full_tokens_ratio
    if not 0 < v["swa_full_tokens_ratio"] <= 1.0:
        raise common.EngineError("ValueError: --swa-full-tokens-ratio should be in range (0, 1.0].")
    v["context_len"] = common.context_len(model, v["context_length"], env)
    # validation_hook.py:check_server_args
    check_pp_speculative(v, env, rules.pp_spec)
    if (
        v["chunked_prefill_size"] > 0
        and v["disaggregation_mode"] != "decode"
        and v["chunked_prefill_size"] % v["page_size"] != 0
    ):
        raise common.EngineError(
            "AssertionError: chunked_prefill_size must be divisible by page_size"
        )


def _qwen3_5_sm100_override(
    model: ModelSpec, gpu: Any, v: dict[str, Any], r: Recorder, rules: Rules
) -> None:
    """model_overrides/qwen3_5.py:_qwen3_5_hybrid_overrides. Runs before the mamba pass, so the
    strategy it reads is still the user's (normally "auto", i.e. not extra_buffer)."""
    if (
        model.architecture not in rules.qwen3_5_hybrid_archs
        or not h.is_sm100(gpu)
        or v["attention_backend"] is not None
    ):
        return
    backend = "triton"
    extra = not v["disable_radix_cache"] and v["mamba_radix_cache_strategy"] in (
        "extra_buffer",
        "extra_buffer_lazy",
    )
    if h.default_attention_backend(model, gpu, v) == "trtllm_mha" and not (
        not extra and not v["disable_radix_cache"] and v["speculative_algorithm"] is None
    ):
        backend = "trtllm_mha"
    r.set("attention_backend", backend, "Qwen3.5 hybrid default on SM100")
    r.set(
        "page_size",
        64 if backend == "trtllm_mha" else 1,
        f"Qwen3.5 hybrid default with {backend} on SM100",
    )


def _step3p_hicache_override(model: ModelSpec, v: dict[str, Any], r: Recorder) -> None:
    """arg_groups/overrides.py:_step3p_overrides: with --enable-hierarchical-cache, Step3p5/3p7
    reset the SWA ratio to 1.0 and turn hybrid SWA memory off."""
    archs = ("Step3p5ForCausalLM", "Step3p7ForConditionalGeneration")
    if model.architecture not in archs or not v["enable_hierarchical_cache"]:
        return
    r.set(
        "swa_full_tokens_ratio",
        1.0,
        "Step3p5 with hierarchical cache",
        "Reset swa_full_tokens_ratio to 1.0 for Step3p5ForCausalLM model with hierarchical cache",
    )
    r.set(
        "disable_hybrid_swa_memory",
        True,
        "Step3p5 with hierarchical cache",
        "Disable hybrid SWA memory for Step3p5ForCausalLM model with hierarchical cache",
    )


def _mamba_radix_cache(
    model: ModelSpec, gpu: Any, v: dict[str, Any], r: Recorder, rules: Rules
) -> None:
    """overrides.py:_mamba_radix_cache_resolution + model_hook.py:handle_mamba_radix_cache checks."""
    arch = model.architecture
    in_branch = arch in rules.mamba_radix_archs
    if arch == "GraniteMoeHybridForCausalLM":
        in_branch = model.is_hybrid
    strategy = v["mamba_radix_cache_strategy"]
    if not in_branch or v["disable_radix_cache"]:
        if in_branch or strategy == "auto" or v["disable_radix_cache"]:
            return
        raise common.EngineError(
            f"ValueError: --mamba-radix-cache-strategy {strategy} needs mamba state, got {arch}."
        )
    supports_extra = arch in rules.extra_buffer_archs and v["linear_attn_backend"] == "triton"
    if strategy == "auto":
        wants_overlap = not v["disable_overlap_schedule"]
        wants_paging = v["page_size"] is not None and v["page_size"] > 1
        if (wants_overlap or wants_paging) and supports_extra:
            r.set(
                "mamba_radix_cache_strategy",
                "extra_buffer",
                "auto: overlap schedule or paging, arch supports it",
            )
        else:
            r.set("mamba_radix_cache_strategy", "no_buffer", "auto: extra_buffer unavailable")
            r.set(
                "disable_overlap_schedule",
                True,
                "mamba no_buffer does not support the overlap schedule",
            )
    if v["mamba_radix_cache_strategy"] in ("extra_buffer", "extra_buffer_lazy"):
        # mamba_hook.py:validate_mamba_extra_buffer (bare asserts)
        if not supports_extra:
            raise common.EngineError(
                f"AssertionError: extra_buffer is not supported for {arch}; use no_buffer."
            )
        draft = v["speculative_num_draft_tokens"]  # only a user-given value is set at this point
        if draft is not None and v["mamba_track_interval"] < draft:
            raise common.EngineError("AssertionError")
        page = v["page_size"]
        if page is not None:
            if v["mamba_track_interval"] % page != 0:
                raise common.EngineError("AssertionError")
            chunk = 64  # FLA CHUNK_SIZE (overrides.py:mamba_cache_chunk_size)
            if max(chunk, page) % min(chunk, page) != 0:
                raise common.EngineError(
                    "AssertionError: For SSM models, either chunk_size or page_size must be divisible by the "
                    f"other, got chunk_size={chunk}, page_size={page}"
                )
    else:  # mamba_hook.py:validate_mamba_no_buffer
        if v["page_size"] not in (1, None):
            raise common.EngineError("AssertionError: no_buffer only supports page_size=1.")
        if not v["disable_overlap_schedule"]:
            raise common.EngineError(
                "AssertionError: no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True."
            )
        if v["attention_backend"] == "trtllm_mha":
            raise common.EngineError(
                "AssertionError: no_buffer do not support trtllm_mha attention backend."
            )


def _attention_backend(
    model: ModelSpec, gpu: Any, v: dict[str, Any], r: Recorder, env: dict[str, str], rules: Rules
) -> None:
    """attention_hook.py:handle_attention_backend_compatibility: the default backend, AMD aiter's
    x0.85 (explicit fractions included) and FA4's page 128 (overrides.py:_fa4_page_constraint)."""
    if v["attention_backend"] is None:
        backend = h.default_attention_backend(model, gpu, v)
        r.set(
            "attention_backend",
            backend,
            "default for this GPU",
            f"Attention backend not specified. Use {backend} backend by default.",
        )
    ctx = common.derived_context_len(model) if v["context_length"] is None else v["context_length"]
    if v["attention_backend"] == "aiter" and ctx > 8192:
        explicit = "mem_fraction_static" not in {c.arg for c in r.changes}
        honor = "SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION" in rules.env_vars
        if not (explicit and honor and env_true(env, "SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION")):
            r.set(
                "mem_fraction_static",
                v["mem_fraction_static"] * 0.85,
                "aiter attention with context_len > 8192 scales mem_fraction_static by 0.85",
            )
    if (
        v["attention_backend"] == "fa4"
        and not h.is_mla(model)
        and h.is_sm100(gpu)
        and (v["speculative_eagle_topk"] or 0) <= 1
    ):
        r.set(
            "page_size",
            128,
            "FA4 needs page size 128",
            f"FA4 backend only supports page size 128 for non-MLA model architectures, changing page_size "
            f"from {v['page_size']} to 128.",
        )


def _speculative(
    model: ModelSpec, v: dict[str, Any], r: Recorder, env: dict[str, str], rules: Rules
) -> None:
    """speculative_hook.py:handle_speculative_decoding -> _handle_eagle_family / _handle_ngram."""
    if v["speculative_algorithm"] is None:
        return
    algo = str(v["speculative_algorithm"]).upper()
    if algo in ("NEXTN", "EAGLE"):  # _resolve_speculative_algorithm_alias
        algo = "EAGLE"
    if algo not in SPEC_BUILTINS:
        # speculative/spec_info.py:SpeculativeAlgorithm.from_string, called by the hook: a name
        # that is neither a builtin nor registered by a plugin (servefit sees no plugins).
        raise common.EngineError(
            f"ValueError: Unknown speculative algorithm name: {v['speculative_algorithm']}"
        )
    r.set(
        "speculative_algorithm",
        algo,
        "NEXTN is an alias of EAGLE" if algo == "EAGLE" else "upper-cased",
    )
    if algo in SPEC_EAGLE:
        _eagle_family(model, algo, v, r, env, rules)
    elif algo == "NGRAM":
        _ngram(v, r)


def _eagle_family(
    model: ModelSpec, algo: str, v: dict[str, Any], r: Recorder, env: dict[str, str], rules: Rules
) -> None:
    """speculative_hook.py:_handle_eagle_family."""
    if algo == "STANDALONE" and v["attn_dp_size"] > 1:
        raise common.EngineError(
            "ValueError: Currently standalone speculative decoding does not support dp attention."
        )
    if v["max_running_requests"] is None:
        r.set("max_running_requests", 48, "speculative decoding resets it", RESET_48)
    if rules.spec_v2_default is not None:
        _spec_v2(v, r, env_spec_v2(env, rules.spec_v2_default))
    elif v["disable_overlap_schedule"]:
        r.log(
            "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding."
        )
    if v["enable_mixed_chunk"]:
        r.set(
            "enable_mixed_chunk",
            False,
            "speculative decoding",
            f"Mixed chunked prefill is disabled: {algo} speculative decoding does not support it.",
        )
    # The draft path defaults to the model path for these archs; kept out of the values so
    # "no draft path" still means "draft layers from the target checkpoint" downstream.
    v["_draft_path_is_model"] = (
        model.architecture in rules.draft_in_target_archs
        and v["speculative_draft_model_path"] is None
    )
    if v["speculative_num_steps"] is None:
        _auto_speculative_params(model, algo, v, r)
    topk = v["speculative_eagle_topk"]
    if v["attention_backend"] == "trtllm_mha" and topk is not None and topk > 1:
        raise common.EngineError(
            "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding."
        )
    if topk == 1 and v["speculative_num_draft_tokens"] != v["speculative_num_steps"] + 1:
        r.set(
            "speculative_num_draft_tokens",
            v["speculative_num_steps"] + 1,
            "topk 1 forces draft tokens = steps + 1",
            TOPK1_FIX,
        )
    if (
        topk is not None
        and topk > 1
        and v["page_size"] > 1
        and v["attention_backend"] not in ("flashinfer", "fa3", "triton")
    ):
        raise common.EngineError(
            "ValueError: speculative_eagle_topk > 1 with page_size > 1 is only supported on "
            "('flashinfer', 'fa3', 'triton'); got attention_backend="
            f"{v['attention_backend']!r}. Use page_size == 1 or one of those backends."
        )


def env_spec_v2(env: dict[str, str], default: bool) -> bool:
    """environ.py:Envs.SGLANG_ENABLE_SPEC_V2 (EnvBool)."""
    raw = env.get("SGLANG_ENABLE_SPEC_V2")
    return default if raw is None else raw.strip().lower() in ("1", "true", "yes", "y", "on")


def _spec_v2(v: dict[str, Any], r: Recorder, enabled: bool) -> None:
    """server_args.py:_handle_speculative_decoding with a spec v1 worker: spec v2 turns the
    overlap schedule on (topk 1 only); spec v1 turns it off."""
    if not enabled:
        r.set(
            "disable_overlap_schedule",
            True,
            "speculative decoding v1 runs without the overlap schedule",
            "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative "
            "algorithm. You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental "
            "overlap scheduler. ",
        )
        return
    r.set(
        "disable_overlap_schedule",
        False,
        "spec v2 runs with the overlap schedule",
        "Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on.",
    )
    topk = v["speculative_eagle_topk"]
    if topk is not None and topk > 1:
        raise common.EngineError(
            "ValueError: Spec v2 currently only supports topk = 1 for speculative decoding."
        )


def _auto_speculative_params(model: ModelSpec, algo: str, v: dict[str, Any], r: Recorder) -> None:
    """speculative_hook.py:_auto_choose_speculative_params (steps, topk, draft tokens)."""
    if v["speculative_eagle_topk"] is not None or v["speculative_num_draft_tokens"] is not None:
        raise common.EngineError("AssertionError")
    llama_like = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
    steps, topk, draft = (
        (5, 4, 8) if algo != "STANDALONE" and model.architecture in llama_like else (3, 1, 4)
    )
    r.set("speculative_num_steps", steps, "_auto_choose_speculative_params")
    r.set("speculative_eagle_topk", topk, "_auto_choose_speculative_params")
    r.set("speculative_num_draft_tokens", draft, "_auto_choose_speculative_params")


def _ngram(v: dict[str, Any], r: Recorder) -> None:
    """speculative_hook.py:_handle_ngram."""
    if v["max_running_requests"] is None:
        r.set("max_running_requests", 48, "speculative decoding resets it", RESET_48)
    r.set("enable_mixed_chunk", False, "ngram speculative decoding")
    v["speculative_eagle_topk"] = v["speculative_ngram_max_bfs_breadth"]
    if v["speculative_num_draft_tokens"] is None:
        r.set(
            "speculative_num_draft_tokens",
            12,
            "ngram default",
            "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
            "You can override this by explicitly setting --speculative-num-draft-tokens.",
        )
    if v["speculative_num_steps"] is None:
        v["speculative_num_steps"] = (
            v["speculative_num_draft_tokens"] // v["speculative_eagle_topk"]
        )
    r.log("The mixed chunked prefill are disabled because of using ngram speculative decoding.")
