"""SGLang 0.5.9 server-arg resolution: the parts of ServerArgs.__post_init__ that size memory.

Mirrors sglang/srt/server_args.py (0.5.9) in the engine's own order:
_handle_missing_default_values -> _handle_gpu_memory_settings -> _handle_model_specific_adjustments
-> _handle_page_size -> _handle_data_parallelism -> _handle_speculative_decoding.
"""

from __future__ import annotations

from typing import Any

from servefit.engines.base import ResolvedArgs
from servefit.engines.recorder import Recorder
from servefit.engines.sglang import common
from servefit.engines.sglang.layout import check_pp_speculative
from servefit.errors import EngineRejection, UnsupportedModelError
from servefit.hardware.spec import GPUSet
from servefit.model.layers import MLA
from servefit.model.spec import ModelSpec

# sglang/srt/server_args.py:ServerArgs field defaults (0.5.9) for the args servefit mirrors.
DEFAULTS: dict[str, Any] = {
    "tp_size": 1,
    "pp_size": 1,
    "dp_size": 1,
    "ep_size": 1,
    "nnodes": 1,
    "mem_fraction_static": None,
    "max_running_requests": None,
    "max_total_tokens": None,
    "chunked_prefill_size": None,
    "max_prefill_tokens": 16384,
    "context_length": None,
    "page_size": None,
    "kv_cache_dtype": "auto",
    "cuda_graph_max_bs": None,
    "cuda_graph_bs": None,
    "disable_cuda_graph": False,
    "disable_cuda_graph_padding": False,
    "disable_radix_cache": False,
    "disable_overlap_schedule": False,
    "enable_dp_attention": False,
    "enable_mixed_chunk": False,
    "speculative_algorithm": None,
    "speculative_draft_model_path": None,
    "speculative_num_steps": None,
    "speculative_eagle_topk": None,
    "speculative_num_draft_tokens": None,
    "speculative_ngram_max_match_window_size": 12,
    "speculative_ngram_max_bfs_breadth": 10,
    "mamba_full_memory_ratio": 0.9,
    "max_mamba_cache_size": None,
    "mamba_ssm_dtype": None,
    "mamba_scheduler_strategy": "auto",
    "mamba_track_interval": 256,
    "enable_piecewise_cuda_graph": False,
    "piecewise_cuda_graph_max_tokens": None,
    "language_only": False,
    "enable_multimodal": None,
    "disaggregation_mode": "null",
    "attention_backend": None,
    "swa_full_tokens_ratio": 0.8,
    "disable_hybrid_swa_memory": False,
    "quantization": None,
}

# sglang/srt/configs/model_config.py:multimodal_model_archs (0.5.9), the entries servefit can meet.
MULTIMODAL_ARCHS = frozenset(
    {
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3OmniMoeForConditionalGeneration",
        "Gemma3ForConditionalGeneration",
        "Llama4ForConditionalGeneration",
        "Mistral3ForConditionalGeneration",
        "PixtralForConditionalGeneration",
        "KimiVLForConditionalGeneration",
        "KimiK25ForConditionalGeneration",
        "InternVLChatModel",
        "NemotronH_Nano_VL_V2",
        "JetVLMForConditionalGeneration",
        "LlavaForConditionalGeneration",
    }
)
# ModelConfig.__init__: enable_multimodal None -> False for these, else True.
_MM_DISABLED = frozenset(
    {
        "Gemma3ForConditionalGeneration",
        "Llama4ForConditionalGeneration",
        "Step3VLForConditionalGeneration",
    }
)

# _handle_model_specific_adjustments -> _handle_mamba_radix_cache(support_mamba_cache,
# support_mamba_cache_extra_buffer) per architecture (0.5.9).
MAMBA_RADIX_ARCHS: dict[str, tuple[bool, bool]] = {
    "KimiLinearForCausalLM": (False, False),
    "BailingMoeV2_5ForCausalLM": (False, False),
    "NemotronHForCausalLM": (True, False),
    "Qwen3NextForCausalLM": (True, True),
    "Qwen3_5MoeForConditionalGeneration": (True, True),
    "Qwen3_5ForConditionalGeneration": (True, True),
    "FalconH1ForCausalLM": (True, False),
    "JetNemotronForCausalLM": (True, False),
    "JetVLMForConditionalGeneration": (True, False),
    "GraniteMoeHybridForCausalLM": (True, False),
    "Lfm2ForCausalLM": (True, False),
}
# Archs with a state pool in 0.5.9 (model_runner.py:mambaish_config: mamba2_config,
# hybrid_gdn_config, kimi_linear_config, hybrid_lightning_config). Lfm2Moe has a pool but no
# radix-cache adjustment.
STATE_POOL_ARCHS = frozenset(MAMBA_RADIX_ARCHS) | {
    "Lfm2MoeForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
}

# Environment variables (sglang/srt/environ.py, 0.5.9) that change memory sizing.
ENV_VARS = (
    "SGLANG_MAMBA_CONV_DTYPE",
    "SGLANG_MAMBA_SSM_DTYPE",
    "SGLANG_ENABLE_SPEC_V2",
    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
)

SPEC_EAGLE = ("EAGLE", "EAGLE3", "STANDALONE")
RESET_48 = (
    "Max running requests is reset to 48 for speculative decoding. You can override this "
    "by explicitly setting --max-running-requests."
)


def is_multimodal(model: ModelSpec, v: dict[str, Any]) -> bool:
    enable = v.get("enable_multimodal")
    if enable is None:
        enable = model.architecture not in _MM_DISABLED
    return bool(enable) and model.architecture in MULTIMODAL_ARCHS


def check_nemotron_h_layout(model: ModelSpec) -> None:
    """configs/nemotron_h.py:NemotronHConfig.__init__ (0.5.9) reads the layer layout only from
    hybrid_override_pattern (default: a 52-layer pattern, num_hidden_layers default 52) and
    asserts the two agree; Nemotron-3 configs that give it as layers_block_type (read from
    0.5.10 on, NemotronHConfig._resolve_layers_block_type) get the default layout, whose
    modules do not match the checkpoint's weights."""
    raw = model.raw_config
    if model.architecture != "NemotronHForCausalLM" or "hybrid_override_pattern" in raw:
        return
    if raw.get("layers_block_type") is None:
        return
    layers = raw.get("num_hidden_layers", 52)
    if layers != 52:
        raise EngineRejection(
            "AssertionError: hybrid_override_pattern must have same length as num_hidden_layers "
            "(SGLang 0.5.9 does not read layers_block_type; 0.5.10 does)"
        )
    raise EngineRejection(
        f"SGLang 0.5.9 cannot load {model.name}: its config gives the layer layout as "
        "layers_block_type, which 0.5.9's NemotronHConfig does not read (it reads "
        "hybrid_override_pattern, default a 52-layer pattern), so the model it builds does not "
        f"match the checkpoint's {len(raw['layers_block_type'])} layers; SGLang 0.5.10 reads it"
    )


def resolve_args(
    model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str]
) -> ResolvedArgs:
    v = dict(DEFAULTS)
    v.update({k: val for k, val in user_args.items() if val is not None})
    r = Recorder(v)
    if model.is_hybrid and model.architecture not in STATE_POOL_ARCHS:
        raise UnsupportedModelError(
            f"SGLang 0.5.9 has no recurrent-state pool for {model.architecture} "
            f"({', '.join(sorted(set(model.recurrent_mixer(i).kind for i in model.recurrent_layer_ids)))} layers); "
            "it cannot serve this model"
        )

    # _handle_missing_default_values: "auto" -> "no_buffer" (extra_buffer not yet the default).
    if v["mamba_scheduler_strategy"] == "auto":
        r.set("mamba_scheduler_strategy", "no_buffer", "0.5.9 resolves 'auto' to no_buffer")

    error = None
    _gpu_memory_settings(model, gpus.gpu.memory_mib, v, r)
    _gpt_oss(model, f"{gpus.gpu.key} {gpus.gpu.name}".lower(), v, r)
    try:
        _mamba_radix_cache(model, v, r)
    except common.EngineError as exc:
        error = str(exc)
    if v["page_size"] is None:  # _handle_page_size
        v["page_size"] = 1
    if v["dp_size"] == 1:  # _handle_data_parallelism
        v["enable_dp_attention"] = False
    if v["enable_dp_attention"]:
        r.set(
            "chunked_prefill_size",
            v["chunked_prefill_size"] // v["dp_size"],
            "DP attention divides the chunk by dp_size",
            f"DP attention is enabled. The chunked prefill size is adjusted to "
            f"{v['chunked_prefill_size'] // v['dp_size']} to avoid MoE kernel issues. ",
        )
    try:
        _speculative(model, v, r, env)
        v["context_len"] = common.context_len(model, v["context_length"], env)
    except common.EngineError as exc:
        error = error or str(exc)
        # the launch stops before it derives the context: it asked for its own, if any
        v.setdefault("context_len", v.get("context_length") or common.derived_context_len(model))
    try:  # check_server_args, the last step of __post_init__
        check_pp_speculative(v, env, "refused_mixed_chunk")
    except common.EngineError as exc:
        error = error or str(exc)
    # --mamba-ssm-dtype is exported as SGLANG_MAMBA_SSM_DTYPE (_handle_environment_variables).
    mem_env = {k: env[k] for k in ENV_VARS if k in env}
    if v["mamba_ssm_dtype"] is not None:
        mem_env["SGLANG_MAMBA_SSM_DTYPE"] = v["mamba_ssm_dtype"]
    return ResolvedArgs(
        values=v, changes=tuple(r.changes), log_lines=tuple(r.logs), error=error, env=mem_env
    )


def _gpu_memory_settings(model: ModelSpec, gpu_mem: int, v: dict[str, Any], r: Recorder) -> None:
    """server_args.py:ServerArgs._handle_gpu_memory_settings (0.5.9)."""
    tp = v["tp_size"]
    # (upper bound MiB, chunked_prefill_size, cuda_graph_max_bs tp<4, tp>=4)
    tiers = (
        (20 * 1024, 2048, 8, 8),
        (35 * 1024, 2048, 24, 80),
        (60 * 1024, 4096, 32, 160),
        (90 * 1024, 8192, 256, 512),
        (160 * 1024, 8192, 256, 512),
        (float("inf"), 16384, 512, 512),
    )
    for bound, chunk, bs_small, bs_large in tiers:
        if gpu_mem < bound:
            if v["chunked_prefill_size"] is None:
                r.set("chunked_prefill_size", chunk, f"default for a {gpu_mem} MiB GPU")
            if v["cuda_graph_max_bs"] is None:
                r.set(
                    "cuda_graph_max_bs",
                    bs_small if tp < 4 else bs_large,
                    f"default for a {gpu_mem} MiB GPU at TP {tp}",
                )
            break
    if v["cuda_graph_bs"] is None:
        v["cuda_graph_bs"] = common.decode_capture_bs(
            v["cuda_graph_max_bs"],
            v["speculative_algorithm"] is not None,
            v["disable_cuda_graph_padding"],
        )
    else:
        v["cuda_graph_max_bs"] = max(v["cuda_graph_bs"])
    if v["piecewise_cuda_graph_max_tokens"] is None:
        mla = isinstance(model.first_attention(), MLA)
        v["piecewise_cuda_graph_max_tokens"] = 2048 if mla else v["chunked_prefill_size"]
    if v["mem_fraction_static"] is not None:
        return
    reserved = 512.0
    if v["chunked_prefill_size"] > 0:
        reserved += max(v["chunked_prefill_size"], 2048) * 1.5
    else:
        reserved += max(v["max_prefill_tokens"], 2048) * 1.5
    reserved += v["cuda_graph_max_bs"] * 2
    reserved += v["tp_size"] * v["pp_size"] / 8 * 1024
    if v["enable_dp_attention"]:
        reserved += v["cuda_graph_max_bs"] * v["dp_size"] * 3
        if v["cuda_graph_max_bs"] > 300:
            reserved += v["cuda_graph_max_bs"] * v["dp_size"] * 1.5
    if v["enable_piecewise_cuda_graph"]:
        reserved += common.prefill_graph_count(v["piecewise_cuda_graph_max_tokens"]) * 8
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    algo = v["speculative_algorithm"]
    if algo is not None:
        if algo == "STANDALONE":
            reserved += 6 * 1024
        elif algo != "NGRAM":
            reserved += 2 * 1024
    frac = round((gpu_mem - reserved) / gpu_mem, 3)
    why = f"({gpu_mem} - {reserved:g} MiB reserved) / {gpu_mem}"
    if is_multimodal(model, v) and not v["language_only"]:
        adjusted = common.vlm_adjusted_fraction(frac, model.vision_config)
        why += f" = {frac}, x VLM factor -> {adjusted:.6f}"
        frac = adjusted
    r.set("mem_fraction_static", frac, f"default heuristic: {why}")


def _gpt_oss(model: ModelSpec, gpu_key: str, v: dict[str, Any], r: Recorder) -> None:
    """_handle_model_specific_adjustments, GptOssForCausalLM (0.5.9): SM100 (B200/B300/GB200)
    picks trtllm_mha, which turns hybrid SWA memory off."""
    if model.architecture != "GptOssForCausalLM":
        return
    backend = v["attention_backend"]
    sm100 = any(tag in gpu_key for tag in ("b200", "b300", "gb200", "gb300"))
    if backend is None and sm100:
        backend = "trtllm_mha"
        v["attention_backend"] = backend
    if backend == "trtllm_mha":
        r.set(
            "disable_hybrid_swa_memory",
            True,
            "trtllm_mha has no SWA kv indices translation",
            "Disable hybrid SWA memory for GPT-OSS model with trtllm_mha attention backend.",
        )


def _mamba_radix_cache(model: ModelSpec, v: dict[str, Any], r: Recorder) -> None:
    """server_args.py:ServerArgs._handle_mamba_radix_cache via _handle_model_specific_adjustments."""
    arch = model.architecture
    if arch not in MAMBA_RADIX_ARCHS:
        return
    if arch == "GraniteMoeHybridForCausalLM" and not model.is_hybrid:
        return
    support, support_extra = MAMBA_RADIX_ARCHS[arch]
    if not support:
        r.set(
            "disable_radix_cache",
            True,
            f"radix cache is not supported for {arch} in 0.5.9",
            f"Disabling Radix Cache for {arch} as it is not yet supported.",
        )
        return
    if v["mamba_scheduler_strategy"] == "extra_buffer":
        if not support_extra:
            raise common.EngineError(
                f"AssertionError: mamba extra_buffer is not supported for {arch} model"
            )
        # Runs before _handle_speculative_decoding, so only a user-given draft count is checked.
        draft = v["speculative_num_draft_tokens"]
        if draft is not None and v["mamba_track_interval"] < draft:
            raise common.EngineError(
                f"AssertionError: mamba_track_interval {v['mamba_track_interval']} must be greater than "
                f"or equal to speculative_num_draft_tokens {draft}"
            )
        return
    if v["disable_radix_cache"]:
        return
    if v["speculative_algorithm"] is None:
        r.set(
            "disable_overlap_schedule",
            True,
            "mamba no_buffer is not compatible with the overlap schedule",
            "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, "
            "try to use --disable-radix-cache if overlap schedule is necessary",
        )
    else:
        r.set(
            "disable_radix_cache",
            True,
            f"speculative decoding for {arch} does not support radix cache in 0.5.9",
            f"Disabling radix cache since speculative decoding for {arch} is not supported with radix cache yet.",
        )


def _speculative(model: ModelSpec, v: dict[str, Any], r: Recorder, env: dict[str, str]) -> None:
    """server_args.py:ServerArgs._handle_speculative_decoding (0.5.9)."""
    if v["speculative_algorithm"] == "NEXTN":
        r.set("speculative_algorithm", "EAGLE", "NEXTN is an alias of EAGLE")
    algo = v["speculative_algorithm"]
    if algo in SPEC_EAGLE:
        if algo == "STANDALONE" and v["enable_dp_attention"]:
            raise common.EngineError(
                "ValueError: Currently standalone speculative decoding does not support dp attention."
            )
        if v["max_running_requests"] is None:
            r.set("max_running_requests", 48, "speculative decoding resets it", RESET_48)
        if env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true"):
            r.set(
                "disable_overlap_schedule",
                False,
                "SGLANG_ENABLE_SPEC_V2 turns the overlap scheduler on",
                "Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on.",
            )
        else:
            r.set(
                "disable_overlap_schedule",
                True,
                "spec v1 runs without the overlap scheduler",
                "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. "
                "You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. ",
            )
        if v["enable_mixed_chunk"]:
            r.set(
                "enable_mixed_chunk",
                False,
                "eagle speculative decoding",
                "Mixed chunked prefill is disabled because of using eagle speculative decoding.",
            )
        if v["speculative_num_steps"] is None:
            # auto_choose_speculative_params: (5, 4, 8) for Llama/Grok, else (3, 1, 4)
            steps, topk, draft = (
                (5, 4, 8)
                if (
                    algo != "STANDALONE"
                    and model.architecture
                    in ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
                )
                else (3, 1, 4)
            )
            r.set("speculative_num_steps", steps, "auto_choose_speculative_params")
            r.set("speculative_eagle_topk", topk, "auto_choose_speculative_params")
            r.set("speculative_num_draft_tokens", draft, "auto_choose_speculative_params")
        if v["speculative_eagle_topk"] is None:
            v["speculative_eagle_topk"] = 1
        if (
            v["speculative_eagle_topk"] == 1
            and v["speculative_num_draft_tokens"] != v["speculative_num_steps"] + 1
        ):
            r.set(
                "speculative_num_draft_tokens",
                v["speculative_num_steps"] + 1,
                "topk 1 forces draft tokens = steps + 1",
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
            )
    elif algo == "NGRAM":
        if v["max_running_requests"] is None:
            r.set("max_running_requests", 48, "speculative decoding resets it", RESET_48)
        r.set("disable_overlap_schedule", True, "ngram speculative decoding")
        v["speculative_eagle_topk"] = v["speculative_ngram_max_bfs_breadth"]
        if v["speculative_num_draft_tokens"] is None:
            v["speculative_num_draft_tokens"] = v["speculative_ngram_max_match_window_size"]
