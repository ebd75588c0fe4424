"""The mamba radix-cache pass of the releases that resolve it per architecture
(rules.mamba_radix_cache == "handler").

Mirrors server_args.py:_handle_missing_default_values ("auto" becomes "no_buffer" for every
model) and server_args.py:_handle_mamba_radix_cache(model_arch, support_mamba_cache,
support_mamba_cache_extra_buffer), which _handle_model_specific_adjustments calls for the
recurrent architectures (rules.mamba_radix_archs; rules.radix_unsupported_archs are passed
support_mamba_cache=False, rules.extra_buffer_archs support_mamba_cache_extra_buffer=True).
Speculative decoding is resolved after this pass (args.py:_speculative).
"""

from __future__ import annotations

from typing import Any

from servefit.engines.recorder import Recorder
from servefit.engines.sglang import common
from servefit.engines.sglang.flow.rules import Rules
from servefit.hardware.spec import GPUSpec
from servefit.model.spec import ModelSpec

STRATEGY = "mamba_radix_cache_strategy"  # the flow's name (mamba_scheduler_strategy there)
SPEC_RADIX = (
    "ValueError: Speculative decoding for {arch} is not compatible with radix cache when using "
    "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please "
    "use --mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
)  # two string literals in the engine, joined without a space


def handle(model: ModelSpec, gpu: GPUSpec, v: dict[str, Any], r: Recorder, rules: Rules) -> None:
    if v[STRATEGY] == "auto":  # _handle_missing_default_values
        r.set(STRATEGY, "no_buffer", "auto means no_buffer in this release")
    arch = model.architecture
    if arch == "GraniteMoeHybridForCausalLM" and not model.is_hybrid:
        return
    if arch in rules.radix_unsupported_archs:
        r.set(
            "disable_radix_cache",
            True,
            f"{arch} has no mamba radix cache in this release",
            f"Disabling Radix Cache for {arch} as it is not yet supported.",
        )
        return
    if arch not in rules.mamba_radix_archs:
        return
    extra = v[STRATEGY] in ("extra_buffer", "extra_buffer_lazy")
    if extra and arch not in rules.extra_buffer_archs:
        raise common.EngineError(
            f"AssertionError: mamba extra_buffer is not supported for {arch} model"
        )
    if (
        rules.flashinfer_gdn_no_buffer_error
        and v.get("linear_attn_decode_backend") == "flashinfer"
        and v[STRATEGY] == "no_buffer"
    ):
        raise common.EngineError(
            "ValueError: FlashInfer GDN decode (--linear-attn-decode-backend flashinfer) is not "
            "compatible with --mamba-scheduler-strategy no_buffer. Please use "
            "--mamba-scheduler-strategy extra_buffer instead. See "
            "https://github.com/sgl-project/sglang/issues/20791"
        )
    if extra:
        _extra_buffer(gpu, v, rules)
    elif not v["disable_radix_cache"]:
        _no_buffer(arch, gpu, v, r, rules)


def _extra_buffer(gpu: GPUSpec, v: dict[str, Any], rules: Rules) -> None:
    if v["disable_radix_cache"]:
        raise common.EngineError(f"ValueError: {rules.extra_buffer_no_radix}")
    if gpu.vendor == "amd":
        raise common.EngineError(
            "AssertionError: Mamba extra_buffer is only supported on CUDA devices with FLA backend"
        )
    draft = v["speculative_num_draft_tokens"]
    if draft is not None and v["mamba_track_interval"] < draft:
        raise common.EngineError(
            f"AssertionError: mamba_track_interval {v['mamba_track_interval']} must be greater "
            f"than or equal to speculative_num_draft_tokens {draft}"
        )
    page = v["page_size"]
    if page is not None and v["mamba_track_interval"] % page != 0:
        raise common.EngineError(
            f"AssertionError: mamba_track_interval {v['mamba_track_interval']} must be "
            f"divisible by page_size {page}"
        )


def _no_buffer(arch: str, gpu: GPUSpec, v: dict[str, Any], r: Recorder, rules: Rules) -> None:
    if rules.no_buffer_page_one and v["page_size"] not in (None, 1):
        r.set(
            "page_size",
            1,
            "no_buffer with the radix cache needs page size 1",
            f"{arch} with radix cache requires page_size=1 in the current Mamba scheduling mode "
            f"(no_buffer), but got {v['page_size']}. Automatically setting page_size=1.",
        )
    if v["speculative_algorithm"] is None:
        r.set(
            "disable_overlap_schedule",
            True,
            "mamba no_buffer does not support the overlap schedule",
            "Disabling overlap schedule since mamba no_buffer is not compatible with overlap "
            "schedule, try to use --disable-radix-cache if overlap schedule is necessary",
        )
        if v["attention_backend"] == "trtllm_mha":
            r.set(
                "disable_radix_cache",
                True,
                "trtllm_mha needs page size > 1",
                "Disabling radix cache since trtllm_mha does not support page_size = 1, which is "
                "required by MambaRadixCache. Try to use --attention-backend triton if radix "
                "cache is necessary.",
            )
            r.set("disable_overlap_schedule", False, "radix cache off")
        return
    if rules.spec_no_buffer_radix == "error_cuda" and gpu.vendor == "amd":
        r.set(
            "disable_radix_cache",
            True,
            "speculative decoding with no_buffer on ROCm",
            f"Speculative decoding for {arch} is not compatible with radix cache on ROCm "
            "devices. Automatically disabling radix cache.",
        )
        return
    raise common.EngineError(SPEC_RADIX.format(arch=arch))
