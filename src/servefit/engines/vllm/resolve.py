"""The engine-arg resolution every mirrored vLLM release runs, with their differences as rules.

The flow and every step written here read the same in the 0.10.0 ... 0.33.0 wheels; what
differs is asked of the release's rules object (v0_10_0/rules.py:Rules, or the subclass in a
later profile's rules.py), each rule citing its own source. Paths are inside the wheels:
  vllm/engine/arg_utils.py:EngineArgs.create_engine_config -> _set_default_chunked_prefill_and_
      prefix_caching_args, _set_default_max_num_seqs_and_batched_tokens_args
  vllm/config/model.py:_get_and_verify_max_len (the user-override error)
  vllm/config/speculative.py:SpeculativeConfig (MTP methods, num_speculative_tokens default)
  vllm/model_executor/models/config.py:Qwen3_5ForConditionalGenerationConfig,
      NemotronHForCausalLMConfig (mamba_ssm_cache_dtype hooks)
  vllm/config/vllm.py:OPTIMIZATION_LEVEL_TO_CONFIG (-O0 no graphs, -O1 PIECEWISE, -O2/-O3
      FULL_AND_PIECEWISE), enforce_eager -> CUDAGraphMode.NONE
  vllm/platforms/interface.py:Platform._align_hybrid_block_size (page unification)
  vllm/v1/worker/gpu_model_runner.py:profile_run (when the multimodal encoder is profiled)
"""

from __future__ import annotations

import json
from typing import Any

from servefit._plan.schema import Change
from servefit.engines.base import ResolvedArgs
from servefit.engines.dtypes import loaded
from servefit.engines.vllm import common, cpu_platform
from servefit.engines.vllm import dtype as model_dtype
from servefit.engines.vllm.device import is_cpu
from servefit.errors import ArgumentError, EngineRejection
from servefit.frozen import frozen
from servefit.hardware.spec import GPUSet
from servefit.model.cache import by_identity
from servefit.model.layers import MoE
from servefit.model.spec import ModelSpec
from servefit.units import DTYPE_BYTES

_MTP_METHODS = {"mtp", "qwen3_next_mtp", "qwen3_5_mtp", "nemotron_h_mtp", "deepseek_mtp"}
_NO_DRAFT_METHODS = {"ngram", "suffix", "ngram_gpu"}
KV_DTYPES = {"auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"}
FULL_MODES = ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL")


@frozen
class KVLayout:
    """Per-rank KV cache specs after page unification (one attention page == one Mamba page)."""

    attn_page_1_token: int  # bytes of one token of one attention layer
    block_size: int  # tokens per attention block
    page_bytes: int  # bytes per layer per block (the attention page; the padded Mamba page)
    mamba_page_bytes: int  # unpadded: one request, one layer, all state tensors
    conv_bytes: int
    ssm_bytes: int
    padding_pct: float | None  # logged when the Mamba page is padded
    block_log: str | None  # "Setting attention block size to ..." when the engine raises it
    grouping: common.Grouping
    mamba_blocks_per_request: int  # per Mamba group, at any length (modes none / align)
    mamba_block_size: int | None

    @property
    def bytes_per_block(self) -> int:
        """Bytes one block takes on the most loaded worker (all of a group's layers, or a PP
        stage's share of them)."""
        return self.grouping.stage_group_size * self.page_bytes


# One release's rules object: an instance of v0_10_0/rules.py:Rules or of a subclass of it
# (each later profile's rules.py); that class defines every hook the flow asks.
Rules = Any


def spec_config(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    if raw is None:
        return None, None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ArgumentError(f"--speculative-config expects JSON, got {raw!r}") from exc
    if not isinstance(raw, dict):
        raise ArgumentError("--speculative-config expects a JSON object")
    method = raw.get("method")
    if method is None and raw.get("model") is None:
        raise ArgumentError("--speculative-config needs a method or a draft model")
    return raw, (str(method) if method is not None else "draft_model")


def mtp_attention_layers(model: ModelSpec) -> int:
    """Draft layers that join the target's attention group: Qwen3-Next / Qwen3.5 MTP layers are
    full attention (qwen3_next_mtp.py / qwen3_5_mtp.py: layer_type="full_attention"), the
    Nemotron-H MTP block follows mtp_hybrid_override_pattern, whose "*" layers are attention."""
    pattern = (model.text_config or model.raw_config).get("mtp_hybrid_override_pattern")
    if isinstance(pattern, str):
        return pattern.count("*")
    return model.mtp_layers


def _json_arg(v: dict[str, Any], name: str) -> dict[str, Any]:
    raw = v.get(name) or {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ArgumentError(f"--{name.replace('_', '-')} expects JSON, got {raw!r}") from exc
    return raw if isinstance(raw, dict) else {}


def resolve(
    model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str], rules: Rules
) -> ResolvedArgs:
    v: dict[str, Any] = dict(user_args)
    changes: list[Change] = []
    logs: list[str] = []
    warnings: list[str] = []
    tp, pp, dp, ep = common.parallel_sizes(v)
    v.update(tensor_parallel_size=tp, pipeline_parallel_size=pp, data_parallel_size=dp, _ep_size=ep)
    common.check_heads_divisible(model, tp)
    if v.get("enable_expert_parallel") and not any(isinstance(x.ffn, MoE) for x in model.layers):
        # vllm/config/model.py:ModelConfig._verify_with_expert_parallelism (0.10.0 to 0.33.0)
        raise EngineRejection(
            "ValueError: Number of experts in the model must be greater than 0 when expert "
            "parallelism is enabled."
        )
    rules.check_engine(model, gpus, env)
    # ModelConfig.__post_init__: the dtype first (engines/vllm/dtype.py); the caches and
    # the CPU platform's checks read the model as loaded
    model_dtype.resolve_dtype(model, gpus, v, logs, changes, rules.FLOAT16_NOT_SUPPORTED)
    model = loaded(model, v)
    cpu = is_cpu(gpus.gpu)
    v["_device"] = "CPU" if cpu else "GPU"
    # the attention backend the user forces (envs.py / --attention-backend, 0.13.0 on)
    v["_env_attention_backend"] = env.get("VLLM_ATTENTION_BACKEND") or v.get("attention_backend")

    _memory_and_length(model, v, env, rules)

    _speculative(model, v, warnings)

    if v.get("enable_chunked_prefill") is None:
        v["enable_chunked_prefill"] = True  # ModelConfig.is_chunked_prefill_supported (generate)
    if v.get("enable_prefix_caching") is None:
        on, why = rules.prefix_caching_default(model)
        v["enable_prefix_caching"] = on
        if model.is_hybrid:
            changes.append(Change(arg="enable_prefix_caching", old=None, new=on, reason=why))

    _batch_defaults(gpus, v, changes, logs, rules, tp * pp)

    _dtypes(model, v, logs, changes, rules)
    v["_user_mamba_block_size"] = v.get("mamba_block_size") is not None
    _hybrid(model, v, logs, changes, rules)
    if cpu:  # CpuPlatform.check_and_update_config runs after the model's config hooks
        cpu_platform.update_config(model, gpus, v, env, logs, rules)

    _graphs_and_profiling(model, gpus, v, env, cpu, rules)
    if pp > 1:
        warnings.append(
            "pipeline parallel: every stage is charged the most loaded stage's "
            "weights and the sampler's activation peak"
        )

    layout = _layout(model, gpus, v, changes, rules)
    v["_layout"] = layout
    v["mamba_page_size_padded"] = layout.page_bytes if layout.padding_pct is not None else None
    # The block-size lines come after the weights load (update_block_size_for_backend runs
    # after load_model): planning.py prints them after "Model loading took".
    return ResolvedArgs(
        values=v,
        changes=tuple(changes),
        warnings=tuple(warnings),
        log_lines=tuple(logs),
        env=dict(env),
    )


def _memory_and_length(
    model: ModelSpec, v: dict[str, Any], env: dict[str, str], rules: Rules
) -> None:
    """--gpu-memory-utilization and max_model_len (vllm/config/model.py:_get_and_verify_max_len;
    -1 asks the KV sizing to auto-fit it)."""
    util = v.get("gpu_memory_utilization")
    if util is None:
        util = rules.DEFAULT_GPU_MEMORY_UTILIZATION
    if isinstance(util, bool) or not 0 < util <= 1:
        raise ArgumentError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    v["gpu_memory_utilization"] = util

    derived, key = rules.derived_max_model_len(model)
    asked = v.get("max_model_len")
    if asked is not None and asked != -1 and asked < 1:
        raise ArgumentError(f"--max-model-len must be positive or -1 (auto), got {asked}")
    if key is None and asked is not None and asked != -1:
        # vllm/config/model.py:_get_and_verify_max_len: a config with no length key takes the user's value as it is
        # (0.10.0-0.33.0), without the derived 2048 or the check against it
        derived = asked
    allow_long = env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").strip().lower() in ("1", "true")
    if asked is not None and asked != -1 and asked > derived and not allow_long:
        # vllm/config/model.py:_get_and_verify_max_len
        raise EngineRejection(
            f"ValueError: User-specified max_model_len ({asked}) is greater than the derived max_model_len "
            f"({key}={derived} or model_max_length=None in model's config.json). To allow "
            "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses "
            "relative position encoding (RoPE), positions exceeding derived_max_model_len lead to "
            "nan. If the model uses absolute position encoding, positions exceeding "
            "derived_max_model_len will cause a CUDA array out-of-bounds error."
        )
    mml = derived if asked is None or asked == -1 else asked
    v["max_model_len"] = mml
    v["_auto_fit_max_model_len"] = asked == -1


def _batch_defaults(
    gpus: GPUSet,
    v: dict[str, Any],
    changes: list[Change],
    logs: list[str],
    rules: Rules,
    world_size: int,
) -> None:
    """max_num_batched_tokens and max_num_seqs the user left unset
    (EngineArgs.get_batch_defaults for vllm serve)."""
    mml = v["max_model_len"]
    tokens_default, seqs_default, why = rules.batch_defaults(gpus, world_size)
    twice = 2 if (v.get("performance_mode") or "balanced") == "throughput" else 1
    if v.get("max_num_batched_tokens") is None:
        t = tokens_default * twice
        if not v["enable_chunked_prefill"]:
            t = max(mml, t)
        t = min((v.get("max_num_seqs") or seqs_default * twice) * mml, t)
        changes.append(
            Change(
                arg="max_num_batched_tokens",
                old=None,
                new=t,
                reason=f"get_batch_defaults for vllm serve: {why}",
            )
        )
        v["max_num_batched_tokens"] = t
    if v.get("max_num_seqs") is None:
        s = min(seqs_default * twice, v["max_num_batched_tokens"])
        changes.append(
            Change(
                arg="max_num_seqs",
                old=None,
                new=s,
                reason=f"get_batch_defaults for vllm serve: {why}",
            )
        )
        v["max_num_seqs"] = s
    for name in ("max_num_seqs", "max_num_batched_tokens"):
        if v[name] < 1:
            raise ArgumentError(f"--{name.replace('_', '-')} must be >= 1, got {v[name]}")
    _scheduler_checks(v, logs)


# the checks run in a pydantic validator (model_validator / a pydantic dataclass's
# __post_init__), so the engine stops with pydantic's ValidationError
_SCHEDULER_INVALID = "ValidationError: 1 validation error for SchedulerConfig: Value error, "


def _scheduler_checks(v: dict[str, Any], logs: list[str]) -> None:
    """vllm/config/scheduler.py:SchedulerConfig.verify_max_model_len (vllm/config.py:
    SchedulerConfig._verify_args in 0.10.0; the same checks and texts 0.10.0-0.33.0), run when the scheduler
    config is built from the args."""
    tokens, seqs, mml = v["max_num_batched_tokens"], v["max_num_seqs"], v["max_model_len"]
    if tokens < mml and not v["enable_chunked_prefill"]:
        raise EngineRejection(
            f"{_SCHEDULER_INVALID}max_num_batched_tokens ({tokens}) is smaller than max_model_len "
            f"({mml}). This effectively limits the maximum sequence length to "
            "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
            "max_num_batched_tokens or decrease max_model_len."
        )
    if tokens < seqs:
        raise EngineRejection(
            f"{_SCHEDULER_INVALID}max_num_batched_tokens ({tokens}) must be greater than or equal to "
            f"max_num_seqs ({seqs})."
        )
    if tokens > seqs * mml:
        logs.append(
            f"max_num_batched_tokens ({tokens}) exceeds max_num_seqs * max_model_len "
            f"({seqs * mml}). This may lead to unexpected behavior."
        )


def _hybrid(
    model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change], rules: Rules
) -> None:
    """Prefix caching and the Mamba cache mode of a hybrid model
    (model_executor/models/config.py:MambaModelConfig / HybridAttentionMambaModelConfig)."""
    mml = v["max_model_len"]
    if model.is_hybrid:
        v["enable_prefix_caching"] = rules.hybrid_prefix_caching(model, v, logs, changes)
        v["_cudagraph_mode_given"] = bool(_json_arg(v, "compilation_config").get("cudagraph_mode"))
        logs += rules.hybrid_config_logs(model, v)
        rules.check_speculative(model, v)
        if v["_user_mamba_block_size"] and not v["enable_prefix_caching"]:
            # vllm/config/vllm.py:VllmConfig.validate_mamba_block_size
            raise EngineRejection(
                "ValueError: --mamba-block-size can only be set with --enable-prefix-caching"
            )
        if v.get("disable_hybrid_kv_cache_manager"):
            raise ArgumentError(
                "--disable-hybrid-kv-cache-manager: hybrid Mamba models need the hybrid KV cache "
                "manager (unify_hybrid_kv_cache_specs cannot promote Mamba specs)"
            )
        v["mamba_cache_mode"] = rules.mamba_cache_mode(model, v, logs, changes)
        if v["mamba_cache_mode"] == "none":
            v["mamba_block_size"] = mml  # MambaModelConfig: prefix caching off -> max_model_len
    else:
        v["mamba_cache_mode"] = None


def _graphs_and_profiling(
    model: ModelSpec, gpus: GPUSet, v: dict[str, Any], env: dict[str, str], cpu: bool, rules: Rules
) -> None:
    """The CUDA-graph mode and capture sizes, whether the encoder is profiled, and whether the
    CUDA-graph memory estimate is subtracted."""
    cc = _json_arg(v, "compilation_config")
    level = str(v.get("optimization_level") or "2").upper().removeprefix("O")
    gmode = cc.get("cudagraph_mode")
    gmode = gmode.upper() if isinstance(gmode, str) else None
    if gmode is None:
        gmode = {"0": "NONE", "1": "PIECEWISE"}.get(level, "FULL_AND_PIECEWISE")
    if v.get("enforce_eager") or cpu:  # CpuPlatform: no CUDA graphs, no capture sizes
        gmode = "NONE"
    v["cudagraph_mode"] = gmode
    if cc.get("max_cudagraph_capture_size") is not None:
        v["max_cudagraph_capture_size"] = cc["max_cudagraph_capture_size"]
    if cc.get("cudagraph_capture_sizes"):
        v["cudagraph_capture_sizes"] = list(cc["cudagraph_capture_sizes"])
    v["_capture_max_num_seqs"] = rules.CAPTURE_MAX_NUM_SEQS
    v["_v1_runner"] = rules.v1_runner(model)
    v["_graphs"] = rules.graph_counts(gpus, v) if gmode != "NONE" else {}

    limits = _json_arg(v, "limit_mm_per_prompt")
    images_off = limits.get("image") == 0 and limits.get("video", 0) == 0
    v["_encoder_profiled"] = bool(
        model.is_multimodal
        and model.vision_config
        and not v.get("language_model_only")
        and not v.get("skip_mm_profiling")
        and not images_off
    )
    # the CUDA-graph memory estimate (gpu_worker.py:determine_available_memory): profiled
    # from 0.18.0, subtracted when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (the release's
    # default) says so
    default = rules.CUDAGRAPH_ESTIMATE_DEFAULT
    rocm = gpus.gpu.vendor == "amd"
    v["_profiles_cudagraphs"] = (
        default is not None and not cpu and (not rocm or rules.CUDAGRAPH_ESTIMATE_ROCM)
    )
    flag = env.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", default or "0").strip()
    v["_estimate_cudagraphs"] = v["_profiles_cudagraphs"] and flag not in ("0", "")


def _speculative(model: ModelSpec, v: dict[str, Any], warnings: list[str]) -> None:
    spec, method = spec_config(v.get("speculative_config"))
    v["_spec_method"] = None
    v["num_speculative_tokens"] = 0
    v["_draft_attention_layers"] = 0
    if spec is None:
        return
    if method in _MTP_METHODS:
        if model.mtp_layers <= 0:
            raise ArgumentError(
                f"{model.name} ships no MTP layers (mtp_num_hidden_layers / "
                "num_nextn_predict_layers); speculative method 'mtp' needs them"
            )
        v["_spec_method"] = "mtp"
        v["_draft_attention_layers"] = mtp_attention_layers(model)
        k = spec.get("num_speculative_tokens") or model.mtp_layers  # defaults to n_predict
    else:
        v["_spec_method"] = "ngram" if method in _NO_DRAFT_METHODS else method
        k = spec.get("num_speculative_tokens")
        if k is None:
            raise ArgumentError(
                f"--speculative-config method {method!r} needs num_speculative_tokens"
            )
        if method not in _NO_DRAFT_METHODS:
            warnings.append(
                f"the {method} draft model's config is not read: its weights and KV "
                "layers are not counted"
            )
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ArgumentError(f"num_speculative_tokens must be a positive integer, got {k!r}")
    v["num_speculative_tokens"] = k


def _dtypes(
    model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change], rules: Rules
) -> None:
    flag = v.get("kv_cache_dtype") or "auto"
    if flag not in KV_DTYPES:
        raise ArgumentError(
            f"servefit does not size --kv-cache-dtype {flag} for vLLM {rules.VERSION}"
        )
    # resolve_kv_cache_dtype_string: "auto" takes the checkpoint's kv_cache_quant_algo ("fp8"),
    # then kv_cache_dtype_str_to_dtype: "auto" is the model dtype.
    if flag == "auto":
        v["_kv_dtype"] = "fp8" if model.quant.kv_cache_fp8 else model.dtype
    else:
        v["_kv_dtype"] = flag
    v["kv_cache_dtype"] = flag
    conv = v.get("mamba_cache_dtype") or "auto"
    v["mamba_cache_dtype"] = model.dtype if conv == "auto" else conv
    ssm = v.get("mamba_ssm_cache_dtype") or "auto"
    if model.is_hybrid and ssm == "auto":
        cfg = model.text_config or model.raw_config
        if model.architecture in rules.QWEN35_SSM_DTYPE_ARCHS:
            if model.mamba_ssm_dtype:
                ssm = model.mamba_ssm_dtype
                changes.append(
                    Change(
                        arg="mamba_ssm_cache_dtype",
                        old="auto",
                        new=ssm,
                        reason="Qwen3.5: the config's mamba_ssm_dtype",
                    )
                )
        elif (
            model.architecture == "NemotronHForCausalLM"
            and rules.NEMOTRON_H_SSM_DEFAULT is not None
        ):
            ssm = cfg.get("mamba_ssm_cache_dtype") or rules.NEMOTRON_H_SSM_DEFAULT
            log = f"Updating mamba_ssm_cache_dtype to '{ssm}' for NemotronH model"
            logs.append(log)
            changes.append(
                Change(
                    arg="mamba_ssm_cache_dtype",
                    old="auto",
                    new=ssm,
                    log=log,
                    reason="NemotronH: the config's mamba_ssm_cache_dtype, else "
                    f"{rules.NEMOTRON_H_SSM_DEFAULT}",
                )
            )
    v["mamba_ssm_cache_dtype"] = ssm  # "auto": the conv dtype (KDA: float32), per the rules


def _layout(
    model: ModelSpec, gpus: GPUSet, v: dict[str, Any], changes: list[Change], rules: Rules
) -> KVLayout:
    tp = v["tensor_parallel_size"]
    a1 = common.attention_bytes_per_token(model, tp, DTYPE_BYTES[v["_kv_dtype"]])
    sliding = _sliding(model, v)
    sliding_layers = sum(n for _, n in sliding)
    attn_layers = len(model.attention_layer_ids) - sliding_layers + v["_draft_attention_layers"]
    preferred, align = rules.block_alignment(model, gpus, v)
    block = v.get("block_size") or preferred
    # the tokens a sliding-window request may hold beyond its window (the release's rule)
    v["_sliding_in_flight"] = rules.sliding_in_flight_tokens(gpus, v) if sliding else 0
    if not model.is_hybrid:
        v["block_size"] = block
        grouping = _staged(
            common.group_layers(attn_layers, 0, rules.GROUP_MAX_RATIO, sliding), model, v
        )
        return KVLayout(a1, block, block * a1, 0, 0, 0, None, None, grouping, 0, None)
    states = rules.mamba_state(
        model, tp, v["num_speculative_tokens"], v["mamba_cache_dtype"], v["mamba_ssm_cache_dtype"]
    )
    mamba_page = sum(s.nbytes for s in states)
    conv_b = states[0].nbytes if len(states) > 1 else mamba_page
    ssm_b = sum(s.nbytes for s in states[1:])
    if a1 == 0:
        # Attention-free (Mamba, Mamba2): update_block_size_for_backend finds no attention
        # backend and returns; one uniform Mamba group whose page is the state page.
        if v["mamba_cache_mode"] == "align":
            v["mamba_block_size"] = block
        grouping = _staged(
            common.group_layers(0, len(model.recurrent_layer_ids), rules.GROUP_MAX_RATIO), model, v
        )
        v["block_size"] = block
        return KVLayout(
            0,
            v["mamba_block_size"],
            mamba_page,
            mamba_page,
            conv_b,
            ssm_b,
            None,
            None,
            grouping,
            rules.mamba_blocks_per_request(model, gpus, v),
            v["mamba_block_size"],
        )
    block, block_log = _hybrid_block(model, v, changes, block, mamba_page, a1, align)
    if v["mamba_cache_mode"] == "align":
        v["mamba_block_size"] = block
    v["block_size"] = block
    page = block * a1
    pad = 100 * (page - mamba_page) / mamba_page if page != mamba_page else None
    grouping = _staged(
        common.group_layers(
            attn_layers, len(model.recurrent_layer_ids), rules.GROUP_MAX_RATIO, sliding
        ),
        model,
        v,
    )
    return KVLayout(
        a1,
        block,
        page,
        mamba_page,
        conv_b,
        ssm_b,
        pad,
        block_log,
        grouping,
        rules.mamba_blocks_per_request(model, gpus, v),
        v.get("mamba_block_size"),
    )


def _hybrid_block(
    model: ModelSpec,
    v: dict[str, Any],
    changes: list[Change],
    block: int,
    mamba_page: int,
    a1: int,
    align: int,
) -> tuple[int, str | None]:
    """The attention block size of a hybrid model: one attention page must hold one Mamba
    state page (Platform._align_hybrid_block_size), and the line the engine logs when it grows."""
    if v["mamba_cache_mode"] == "all":  # 0.11.1 - 0.31.0 only (the release's rules say so)
        cfg = model.text_config or model.raw_config
        base = v.get("mamba_block_size") if v["_user_mamba_block_size"] else None
        base = int(base or cfg.get("mamba_chunk_size") or cfg.get("chunk_size") or 2048)
        from math import lcm

        chunk = lcm(base, align)
        attn_block = chunk * common.cdiv(common.cdiv(mamba_page, a1), chunk)
        v["mamba_block_size"] = attn_block
    else:
        attn_block = common.attention_block_size(mamba_page, a1, align)
    block_log = None
    if block < attn_block:
        block_log = (
            f"Setting attention block size to {attn_block} tokens to ensure that "
            "attention page size is >= mamba page size."
        )
        changes.append(
            Change(
                arg="block_size",
                old=block,
                new=attn_block,
                log=block_log,
                reason="hybrid model: one attention page must hold one Mamba state "
                "page (_align_hybrid_block_size)",
            )
        )
        block = attn_block
    return block, block_log


# kv_cache_utils.py:unify_hybrid_kv_cache_specs (get_kv_cache_groups, when
# --disable-hybrid-kv-cache-manager is set): a model with both full and sliding-window layers
# has its sliding specs promoted to full attention, with this warning; an all-sliding model
# keeps its SlidingWindowSpec (nothing to unify)
HMA_DISABLED_WARNING = (
    "Hybrid KV cache manager is disabled for this hybrid model, This means we do not enable "
    "any optimizations for saving KV cache memory (e.g., dropping the KV cache outside the "
    "sliding window). The compute of layers like sliding window is still saved."
)


def _sliding(model: ModelSpec, v: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    """(window, layers) of each sliding-window bucket that keeps its own KV groups."""
    buckets = common.sliding_buckets(model)
    v["_hma_warning"] = None
    if not buckets:
        return ()
    full = len(model.attention_layer_ids) - sum(len(ids) for _, ids in buckets)
    if v.get("disable_hybrid_kv_cache_manager") and full:
        v["_hma_warning"] = HMA_DISABLED_WARNING
        return ()
    return tuple((w, len(ids)) for w, ids in buckets)


def _staged(grouping: common.Grouping, model: ModelSpec, v: dict[str, Any]) -> common.Grouping:
    draft, pp = v["_draft_attention_layers"], v["pipeline_parallel_size"]
    # a function of the model, the grouping and these two: kept per model object for fit
    key = ("vllm_staged", grouping, draft, pp)
    return by_identity(model, key, lambda: _per_stage(grouping, model, draft, pp))


def _per_stage(grouping: common.Grouping, model: ModelSpec, draft: int, pp: int) -> common.Grouping:
    # MTP draft layers sit after the target's layers (the last stage).
    n = model.num_layers
    sliding = (
        tuple(list(ids) for _, ids in common.sliding_buckets(model)) if grouping.sliding else ()
    )
    slide = {i for ids in sliding for i in ids}
    attn = [i for i in model.attention_layer_ids if i not in slide] + [n + i for i in range(draft)]
    return common.per_stage(grouping, attn, list(model.recurrent_layer_ids), n + draft, pp, sliding)
