"""SGLang platform, CUDA-graph config and GPU-memory heuristics (resolution steps 2-3, 5).

Mirrors (0.5.23) sglang/srt/arg_groups/cuda_graph_hook.py, arg_groups/memory_hook.py and the
attention backend default (arg_groups/model_override_base.py:get_default_attn_backend); a
release's own tables come from its rules. See docs/engines/sglang-0.5.23.md §1-§2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from servefit.engines.sglang import common
from servefit.engines.sglang.flow.rules import Rules
from servefit.hardware.spec import GPUSpec
from servefit.model.layers import FullAttention
from servefit.model.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.recorder import Recorder

# sglang/srt/model_executor/cuda_graph_config.py:Backend
FULL, BREAKABLE, DISABLED = "full", "breakable", "disabled"

# --- platform (GPUSpec has no SM version; inferred from the catalog key / name) -------------


def is_hip(gpu: GPUSpec) -> bool:
    return gpu.vendor == "amd"


def is_sm100(gpu: GPUSpec) -> bool:
    """SM100/SM103: B200, B300, GB200, GB300 (not GB10 = SM121, not RTX 50xx / PRO 6000 = SM120)."""
    text = f"{gpu.key} {gpu.name}".lower()
    return any(tag in text for tag in ("b200", "b300", "gb200", "gb300"))


def is_hopper(gpu: GPUSpec) -> bool:
    key = gpu.key.lower()
    return any(key.startswith(p) for p in ("h100", "h200", "h800", "h20", "gh200"))


def is_multimodal(model: ModelSpec, v: dict[str, Any], rules: Rules) -> bool:
    """ModelConfig.is_multimodal = enable_multimodal and not is_lm_only and a multimodal arch."""
    enable = v.get("enable_multimodal")
    if enable is None:
        enable = model.architecture not in rules.mm_disabled_archs
    lm_only = v.get("language_model_only") or bool(
        model.raw_config.get("language_model_only", False)
    )
    return bool(enable) and not lm_only and model.is_multimodal


def is_mla(model: ModelSpec) -> bool:
    attn = model.first_attention()
    return attn is not None and attn.kind == "mla"


def default_attention_backend(model: ModelSpec, gpu: GPUSpec, v: dict[str, Any]) -> str:
    """arg_groups/model_override_base.py:get_default_attn_backend (CUDA/HIP paths)."""
    topk, page = v["speculative_eagle_topk"], v["page_size"]
    # utils/common.py:is_no_spec_infer_or_topk_one
    topk_one = topk is None or (topk == 1 and page in (1, None))
    if not is_mla(model):
        if is_hopper(gpu) and topk_one:
            return "fa3"
        algo = v["speculative_algorithm"]
        if (
            is_sm100(gpu)
            and topk_one
            and (algo is None or topk is not None or str(algo).upper() == "DFLASH")
        ):
            attn = model.first_attention()
            asymmetric = isinstance(attn, FullAttention) and attn.head_dim != attn.v_head_dim
            return "fa4" if asymmetric else "trtllm_mha"
        if is_hip(gpu):
            return "aiter"
        return "flashinfer"
    if is_hopper(gpu):
        return "fa3"
    if is_sm100(gpu):
        return "flashinfer"
    if is_hip(gpu):
        mla = model.first_attention()  # an MLA layer: is_mla above
        heads = mla.num_heads // max(1, v["tp_size"]) if mla is not None else 0
        return "aiter" if heads in (16, 128) else "triton"
    return "triton"


# --- the breakable prefill graph's compatibility checks ------------------------------------
# cuda_graph_hook.py:disable_breakable_cudagraph_if_incompatible (0.5.16-0.5.18:
# server_args.py:ServerArgs._disable_breakable_cudagraph_if_incompatible; "pp":
# apply_cuda_graph_compatibility, 0.5.19+): each check by the name a release's
# Rules.breakable_checks lists it under, with the reason the engine logs. The first that holds
# turns the prefill graph off. DeepSeek-V4 and attention context parallelism are not mirrored.

BreakableCheck = Callable[[ModelSpec, dict[str, Any], Rules], bool]

# configs/model_config.py:is_deepseek_dsa / is_nemotron_h (first architecture of the config)
_DSA_ARCHS = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN",
    "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
    "GlmMoeDsaForCausalLMNextN", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN",
})  # fmt: skip
_NEMOTRON_H_ARCHS = frozenset(
    {"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronHForCausalLMMTP"}
)


def _is_dsa(model: ModelSpec) -> bool:
    """is_deepseek_dsa: a DSA-capable architecture whose config sets index_topk."""
    cfg = model.text_config or model.raw_config
    has_topk = cfg.get("index_topk", model.raw_config.get("index_topk")) is not None
    return model.architecture in _DSA_ARCHS and has_topk


BREAKABLE_CHECKS: dict[str, tuple[str, BreakableCheck]] = {
    "pp": (
        "pipeline parallelism (opt-in with --cuda-graph-backend-prefill=breakable)",
        lambda m, v, r: v["pp_size"] > 1,
    ),
    "mla": ("MLA attention", lambda m, v, r: is_mla(m)),
    "mla_non_dsa": ("MLA attention (non-DSA)", lambda m, v, r: is_mla(m) and not _is_dsa(m)),
    "nemotron_h": (
        "NemotronH (hybrid Mamba2 prefill)",
        lambda m, v, r: m.architecture in _NEMOTRON_H_ARCHS,
    ),
    "kda": ("KDA hybrid linear attention", lambda m, v, r: bool(m.layer_ids("kda"))),
    "kda_except_glm5_next": (
        "KDA hybrid linear attention",
        lambda m, v, r: (
            bool(m.layer_ids("kda")) and m.architecture != "Glm5NextForConditionalGeneration"
        ),
    ),
    "dcp": ("decode context parallel (dcp_size > 1)", lambda m, v, r: v["dcp_size"] > 1),
    "lora": ("LoRA", lambda m, v, r: bool(v.get("lora_paths")) or bool(v.get("enable_lora"))),
    "two_batch_overlap": ("two-batch overlap", lambda m, v, r: bool(v["enable_two_batch_overlap"])),
    "a2a_any": ("MoE A2A backend", lambda m, v, r: v["moe_a2a_backend"] != "none"),
    "a2a_unvalidated": (
        "unvalidated a2a backend",
        lambda m, v, r: v["moe_a2a_backend"] not in ("none", "deepep", "megamoe", "flashinfer"),
    ),
    "dp_attention": ("DP attention", lambda m, v, r: v["attn_dp_size"] > 1),
    # releases whose DP attention is a flag (Rules.dp_attention == "flag")
    "dp_attention_flag": (
        "DP attention",
        lambda m, v, r: v["attn_dp_size"] > 1 or bool(v["enable_dp_attention"]),
    ),
    "multimodal": (
        "multimodal model",
        lambda m, v, r: is_multimodal(m, v, r) and m.architecture not in r.breakable_mm_archs,
    ),
}


# --- step 2: cuda_graph_hook.py:handle_cuda_graph_config ------------------------------------


def cuda_graph_config(
    model: ModelSpec, gpu: GPUSpec, v: dict[str, Any], r: Recorder, rules: Rules
) -> None:
    """parse_cuda_graph_config + apply_cuda_graph_compatibility (BREAKABLE auto-disable rules)."""
    if rules.prefill_graph != "breakable":
        piecewise_graph(model, gpu, v, rules)
        return
    decode, prefill = (
        FULL,
        (DISABLED if is_hip(gpu) else BREAKABLE),
    )  # default_prefill_backend: CUDA only
    locked = False
    if v["disable_cuda_graph"]:
        decode, prefill, locked = DISABLED, DISABLED, True
    if v["disable_prefill_cuda_graph"]:
        prefill, locked = DISABLED, True
    if v["disable_decode_cuda_graph"]:
        decode = DISABLED
    if v["cuda_graph_backend_decode"] is not None:
        decode = v["cuda_graph_backend_decode"]
    if v["cuda_graph_backend_prefill"] is not None:
        prefill, locked = v["cuda_graph_backend_prefill"], True
    if not locked and prefill == BREAKABLE:
        reason = breakable_off_reason(model, v, rules)
        if reason is not None:
            log = (
                None
                if reason.startswith("pipeline")
                else f"Breakable CUDA graph is incompatible with {reason}; disabling prefill CUDA graph."
            )
            r.set(
                "cuda_graph_backend_prefill",
                DISABLED,
                f"breakable prefill graph off: {reason}",
                log,
            )
            prefill = DISABLED
    v["cuda_graph_backend_decode"], v["cuda_graph_backend_prefill"] = decode, prefill


def breakable_off_reason(model: ModelSpec, v: dict[str, Any], rules: Rules) -> str | None:
    """Why the breakable prefill graph is turned off: the first of the release's checks that
    holds (Rules.breakable_checks, by name in BREAKABLE_CHECKS: cuda_graph_hook.py's
    compatibility rules from 0.5.16, server_args.py:_disable_breakable_cudagraph_if_incompatible
    in 0.5.15)."""
    return next(
        (
            BREAKABLE_CHECKS[name][0]
            for name in rules.breakable_checks
            if BREAKABLE_CHECKS[name][1](model, v, rules)
        ),
        None,
    )


def piecewise_graph(model: ModelSpec, gpu: GPUSpec, v: dict[str, Any], rules: Rules) -> None:
    """server_args.py:_handle_piecewise_cuda_graph (runs before the memory heuristic): the
    piecewise prefill graph is on unless one of its conditions turns it off. "piecewise_no_spec"
    also turns it off for speculative decoding (0.5.10's condition 2)."""
    off = (
        v.get("disable_piecewise_cuda_graph", False)
        or model.architecture in rules.piecewise_off_archs
        or (rules.prefill_graph == "piecewise_no_spec" and v["speculative_algorithm"] is not None)
        or bool(v["enable_dp_attention"])
        or v["pp_size"] > 1
        or is_hip(gpu)
        or v["moe_a2a_backend"] != "none"
        or is_multimodal(model, v, rules)
        or v["enable_hierarchical_cache"]
        or v["disaggregation_mode"] != "null"
    )
    if v.get("enforce_piecewise_cuda_graph"):
        off = False
    # Releases with per-phase backends (no disable_piecewise_cuda_graph field) lock the prefill
    # graph off with --disable-cuda-graph / --disable-prefill-cuda-graph, or to the backend the
    # user names (server_args.py:_handle_cuda_graph_config, _apply_cuda_graph_compatibility).
    phased = "disable_piecewise_cuda_graph" not in v
    if phased and (v["disable_cuda_graph"] or v["disable_prefill_cuda_graph"]):
        off = True
    if phased and v["cuda_graph_backend_prefill"] is not None:
        off = v["cuda_graph_backend_prefill"] == DISABLED
    v["disable_piecewise_cuda_graph"] = off
    decode_off = v["disable_cuda_graph"] or (phased and v["disable_decode_cuda_graph"])
    v["cuda_graph_backend_decode"] = DISABLED if decode_off else FULL
    v["cuda_graph_backend_prefill"] = DISABLED if off else "piecewise"


def decode_capture_bs(v: dict[str, Any], max_bs: int) -> list[int]:
    """cuda_graph_hook.py:generate_decode_cuda_graph_batch_sizes: the 0.5.9 list, plus max_bs
    appended when missing (server_args.py:_generate_cuda_graph_batch_sizes does so from 0.5.10)."""
    bs = common.decode_capture_bs(
        max_bs, v["speculative_algorithm"] is not None, v["disable_cuda_graph_padding"]
    )
    if max_bs not in bs:
        bs.append(max_bs)
    return bs


# --- step 3: memory_hook.py:handle_gpu_memory_settings --------------------------------------


def gpu_memory_settings(
    model: ModelSpec, gpu: GPUSpec, v: dict[str, Any], r: Recorder, rules: Rules
) -> None:
    gpu_mem = gpu.memory_mib  # get_nvgpu_memory_capacity: min over nvidia-smi GPUs, MiB
    tp = v["tp_size"]
    max_bs_is_default = v["cuda_graph_max_bs_decode"] is None and v["cuda_graph_bs_decode"] is None
    for bound, chunk, bs_small, bs_large in rules.tiers:
        if gpu_mem < bound:
            if v["chunked_prefill_size"] is None:
                r.set("chunked_prefill_size", chunk, f"default for a {gpu_mem} MiB GPU")
            if v["cuda_graph_max_bs_decode"] is None:
                r.set(
                    "cuda_graph_max_bs_decode",
                    bs_small if tp < 4 else bs_large,
                    f"decode cuda-graph max_bs default for a {gpu_mem} MiB GPU at TP {tp}",
                )
            break
    mrr = v["max_running_requests"]
    clamp = rules.decode_bs_clamp and max_bs_is_default and mrr is not None
    if clamp and v["cuda_graph_max_bs_decode"] > mrr:
        r.set("cuda_graph_max_bs_decode", mrr, "clamped to the explicit --max-running-requests")
    if v["cuda_graph_bs_decode"] is None:
        v["_decode_graph_bs"] = decode_capture_bs(v, v["cuda_graph_max_bs_decode"])
    else:
        v["_decode_graph_bs"] = list(v["cuda_graph_bs_decode"])
        v["cuda_graph_max_bs_decode"] = max(v["cuda_graph_bs_decode"])
    if v["cuda_graph_max_bs_prefill"] is None:
        v["cuda_graph_max_bs_prefill"] = _prefill_graph_max_bs(model, v, rules)
    if rules.prefill_graph_context_clamp and v["context_length"] is not None:
        v["cuda_graph_max_bs_prefill"] = min(v["cuda_graph_max_bs_prefill"], v["context_length"])
    if v["cuda_graph_bs_prefill"] is None:
        count = common.prefill_graph_count(v["cuda_graph_max_bs_prefill"])
        v["_prefill_graph_count"] = count
        # the list itself only where it is small enough to show
        v["_prefill_graph_bs"] = (
            common.prefill_graph_tokens(v["cuda_graph_max_bs_prefill"]) if count <= 4096 else None
        )
    else:
        v["_prefill_graph_bs"] = list(v["cuda_graph_bs_prefill"])
        v["_prefill_graph_count"] = len(v["_prefill_graph_bs"])
    if v["mem_fraction_static"] is None:
        _mem_fraction_static(model, gpu_mem, v, r, rules)


def _prefill_graph_max_bs(model: ModelSpec, v: dict[str, Any], rules: Rules) -> int:
    """The default prefill CUDA-graph max_bs: the chunk (MLA: Rules.mla_prefill_graph_max_bs,
    else min(8192, chunk)), capped under PP and by --max-total-tokens."""
    chunk = v["chunked_prefill_size"]
    if not is_mla(model):
        pmax = chunk
    elif rules.mla_prefill_graph_max_bs is not None:
        pmax = rules.mla_prefill_graph_max_bs
    else:
        pmax = min(8192, chunk)
    if (
        rules.pp_prefill_graph_cap
        and v["pp_size"] > 1
        and v["cuda_graph_backend_prefill"] == BREAKABLE
        and v["cuda_graph_bs_prefill"] is None
    ):
        pmax = min(pmax, 8192)  # _DEFAULT_PP_PREFILL_CUDA_GRAPH_MAX_TOKENS
    if v["max_total_tokens"] is not None:
        pmax = min(pmax, v["max_total_tokens"])
    return pmax


def reserve_for_graph_mb(model: ModelSpec, v: dict[str, Any]) -> float:
    """memory_hook.py:reserve_for_graph_mb."""
    mode, max_bs, attn_dp = (
        v["disaggregation_mode"],
        v["cuda_graph_max_bs_decode"],
        v["attn_dp_size"],
    )
    reserved = 0.0
    if mode != "prefill" and v["cuda_graph_backend_decode"] != DISABLED:
        reserved += max_bs * 2
    if attn_dp > 1 and mode != "prefill":
        reserved += max_bs * attn_dp * 3
        if max_bs > 300:
            reserved += max_bs * attn_dp * 1.5
    if mode != "decode" and v["cuda_graph_backend_prefill"] != DISABLED:
        reserved += v["_prefill_graph_count"] * 8 if not is_mla(model) else 1.5 * 1024
        if v["cuda_graph_backend_prefill"] == BREAKABLE and v["moe_a2a_backend"] == "deepep":
            reserved += 1 * 1024
    return reserved


def piecewise_reserve_mb(model: ModelSpec, v: dict[str, Any]) -> float:
    """server_args.py:_handle_gpu_memory_settings before the breakable graph: the decode graphs
    always (cuda_graph_max_bs x 2), DP attention by enable_dp_attention x dp_size, and the
    piecewise prefill graphs (len(piecewise_cuda_graph_tokens) x 8; MLA 1.5 GiB)."""
    max_bs = v["cuda_graph_max_bs_decode"]
    reserved = max_bs * 2
    if v["enable_dp_attention"]:
        reserved += max_bs * v["dp_size"] * 3
        if max_bs > 300:
            reserved += max_bs * v["dp_size"] * 1.5
    if not v["disable_piecewise_cuda_graph"]:
        reserved += v["_prefill_graph_count"] * 8 if not is_mla(model) else 1.5 * 1024
    return reserved


def draft_reserve_mib(v: dict[str, Any], rules: Rules) -> int:
    """_handle_gpu_memory_settings: the draft model and its graphs, by the algorithm as given
    (the heuristic runs before NEXTN becomes EAGLE)."""
    algo = str(v["speculative_algorithm"] or "").upper()
    if not algo or algo == "NGRAM":
        return 0
    return rules.standalone_reserve_mib if algo == "STANDALONE" else rules.eagle_reserve_mib


def _mem_fraction_static(
    model: ModelSpec, gpu_mem: int, v: dict[str, Any], r: Recorder, rules: Rules
) -> None:
    if v["disaggregation_mode"] == "decode":
        running = v["max_running_requests"] or v["cuda_graph_max_bs_decode"] or 1
        activation = max(running * (v["speculative_num_draft_tokens"] or 1), 2048)
    elif v["chunked_prefill_size"] > 0:
        activation = max(v["chunked_prefill_size"], 2048)
    else:
        activation = max(v["max_prefill_tokens"], 2048)
    graphs = (
        reserve_for_graph_mb(model, v)
        if rules.prefill_graph == "breakable"
        else piecewise_reserve_mb(model, v)
    )
    reserved = 512 + activation * 1.5 + v["tp_size"] * v["pp_size"] / 8 * 1024 + graphs
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    reserved += draft_reserve_mib(v, rules)
    if (
        rules.prefill_graph == "breakable"
        and v["moe_a2a_backend"] == "deepep"
        and v["disaggregation_mode"] != "prefill"
        and v["cuda_graph_backend_decode"] != DISABLED
    ):
        reserved += 2 * 1024  # reserve_for_deepep_a2a_mb
    frac = round((gpu_mem - reserved) / gpu_mem, 3)
    why = (
        f"({gpu_mem} - {reserved:g} MiB reserved [512 + {activation}x1.5 + tp*pp/8 GiB + "
        f"graphs {graphs:g}]) / {gpu_mem} = {frac}"
    )
    is_vlm = (
        is_multimodal(model, v, rules)
        and not v["language_only"]
        and v["disaggregation_mode"] != "decode"
    )
    if is_vlm:
        # adjust_mem_fraction_for_vlm: getattr(vision_config, "num_hidden_layers", 24), not re-rounded
        adjusted = common.vlm_adjusted_fraction(frac, model.vision_config)
        why += f", x VLM factor -> {adjusted:.6f}"
        frac = adjusted
    r.set("mem_fraction_static", frac, f"default heuristic: {why}")
