"""Carry a launch's settings between SGLang and vLLM names, for `servefit plan --compare`.

Only settings that mean the same thing in both engines are carried; the rest are listed so the
comparison says what it left at the other engine's defaults. The two memory knobs are not
translated on purpose: SGLang's --mem-fraction-static is a share of the free memory before
weights, vLLM's --gpu-memory-utilization a share of the total, each engine's default applies.
"""

from __future__ import annotations

from typing import Any

# SGLang ServerArgs attribute -> vLLM EngineArgs attribute, same meaning and value.
_SAME = {
    "tp_size": "tensor_parallel_size",
    "pp_size": "pipeline_parallel_size",
    "dp_size": "data_parallel_size",
    "context_length": "max_model_len",
    "max_running_requests": "max_num_seqs",
    "chunked_prefill_size": "max_num_batched_tokens",
    "mamba_ssm_dtype": "mamba_ssm_cache_dtype",
    "trust_remote_code": "trust_remote_code",
}
_KV_DTYPE = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "auto": "auto",
    "float16": "float16",
}
_MTP_ALGOS = ("NEXTN", "MTP", "EAGLE")


def sglang_to_vllm(args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for key, val in args.items():
        if val is None:
            continue
        if key in _SAME:
            if key == "chunked_prefill_size" and (not isinstance(val, int) or val <= 0):
                dropped.append(key)
                continue
            out[_SAME[key]] = val
        elif key == "ep_size":
            if val > 1:
                out["enable_expert_parallel"] = True
        elif key == "kv_cache_dtype" and val in _KV_DTYPE:
            out["kv_cache_dtype"] = _KV_DTYPE[val]
        elif key == "disable_radix_cache":
            if val:
                out["enable_prefix_caching"] = False
        elif key == "speculative_algorithm":
            algo = str(val).upper()
            steps = args.get("speculative_num_steps")
            if algo in _MTP_ALGOS and not args.get("speculative_draft_model_path") and steps:
                out["speculative_config"] = {"method": "mtp", "num_speculative_tokens": int(steps)}
            else:
                dropped.append(key)
        elif key.startswith("speculative_"):
            continue
        else:
            dropped.append(key)
    return out, dropped


def vllm_to_sglang(args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    back = {v: k for k, v in _SAME.items()}
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for key, val in args.items():
        if val is None:
            continue
        if key in back:
            out[back[key]] = val
        elif key == "kv_cache_dtype" and val in ("auto", "bfloat16", "fp8_e4m3", "fp8_e5m2"):
            out["kv_cache_dtype"] = val
        elif key == "kv_cache_dtype" and val == "fp8":
            out["kv_cache_dtype"] = "fp8_e4m3"  # vLLM's "fp8" is e4m3 (STR_DTYPE_TO_TORCH_DTYPE)
        elif key == "enable_prefix_caching":
            if val is False:
                out["disable_radix_cache"] = True
        elif key == "enable_expert_parallel":
            if val:
                out["ep_size"] = int(args.get("tensor_parallel_size") or 1) * int(
                    args.get("data_parallel_size") or 1
                )
        elif (
            key == "speculative_config"
            and isinstance(val, dict)
            and val.get("method")
            in (
                "mtp",
                "qwen3_next_mtp",
                "qwen3_5_mtp",
            )
        ):
            k = int(val.get("num_speculative_tokens") or 1)
            out.update(
                speculative_algorithm="NEXTN",
                speculative_num_steps=k,
                speculative_eagle_topk=1,
                speculative_num_draft_tokens=k + 1,
            )
        else:
            dropped.append(key)
    return out, dropped


def translate(args: dict[str, Any], source: str, target: str) -> tuple[dict[str, Any], list[str]]:
    """(args for `target`, source arg names not carried)."""
    if source == target:
        return dict(args), []
    if (source, target) == ("sglang", "vllm"):
        return sglang_to_vllm(args)
    if (source, target) == ("vllm", "sglang"):
        return vllm_to_sglang(args)
    return {}, sorted(args)
