"""What SGLang 0.5.10 (and 0.5.10.post1) decide otherwise than 0.5.11 (paths inside the 0.5.10
wheel). Everything not named here is the 0.5.11 rule (v0_5_11/rules.py)."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.v0_5_11 import rules as newer

VERSION = "0.5.10"

# server_args.py:_handle_speculative_decoding: the draft path defaults to the model path
DRAFT_IN_TARGET_ARCHS = frozenset({
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
})  # fmt: skip

RULES = replace(
    newer.RULES,
    version=VERSION,
    # Requires-Dist: transformers==5.3.0
    transformers="5.3.0",
    # server_args.py:ServerArgs.check_server_args: PP also refuses --enable-mixed-chunk, and
    # says so ("..., speculative decoding, mixed chunked prefill.")
    pp_spec="refused_mixed_chunk",
    draft_in_target_archs=DRAFT_IN_TARGET_ARCHS,
    # server_args.py:_handle_mamba_radix_cache: spec + no_buffer + radix is a ValueError on
    # every platform; no page_size=1 override; FlashInfer GDN decode refuses no_buffer
    spec_no_buffer_radix="error",
    no_buffer_page_one=False,
    flashinfer_gdn_no_buffer_error=True,
    # environ.py:Envs.SGLANG_ENABLE_SPEC_V2 = EnvBool(False): EAGLE turns the overlap schedule off
    spec_v2_default=False,
    # server_args.py:_handle_piecewise_cuda_graph: "2. Speculative decoding" turns it off too
    prefill_graph="piecewise_no_spec",
    # model_runner_kv_cache_mixin.py:MemoryPoolConfig.__post_init__ gets mem_fraction_static
    not_enough_names_fraction=True,
    # memory_pool.py:ReqToTokenPool.__init__: (size, max_context_len) rows
    req_to_token_extra_row=False,
)
