"""Where SGLang 0.5.16 ... 0.5.23 differ off the seed case: each test runs the two releases on
either side of one rule of flow/rules.py and checks both against the wheel's code, by hand
arithmetic or by the table the wheel holds (the seed case itself: test_golden_seed.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from servefit import catalog
from servefit.engines import registry
from servefit.engines.base import MemoryInputs, Profile
from servefit.errors import EngineRejection
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec
from servefit.model.spec import ModelSpec
from tests.engines.sglang.handbuilt import dense, gpus, qwen36_27b

GiB = 1 << 30
RTX4090, H100, A6000 = 24564, 81559, 49140


def _profile(release: str) -> Profile:
    return registry.profile("sglang", registry.RELEASES["sglang"][release])


def _resolve(release: str, model: ModelSpec, gpu: str, mib: int, args: dict[str, Any]):
    return _profile(release).resolve_args(model, gpus(gpu, mib, args.get("tp_size", 1)), args, {})


def _size(release: str, model: ModelSpec, mib: int, args: dict[str, Any], pre: float, w: float):
    prof = _profile(release)
    g = gpus("h100", mib, args.get("tp_size", 1))
    r = prof.resolve_args(model, g, args, {})
    mem = MemoryInputs(total_gib=mib / 1024, pre_load_free_gib=pre, weights_gib=w)
    return r, prof.size_pools(model, g, r, mem)


def _kimi_k3() -> ModelSpec:
    cfg = read_json(catalog.DATA / "moonshotai__Kimi-K3.json")
    return build_model_spec(cfg, name="moonshotai/Kimi-K3", source="t")


def test_kimi_k3_is_registered_from_0_5_17():
    """models/kimi_k3.py (EntryClass KimiK3ForConditionalGeneration) is new in 0.5.17. 0.5.16
    finds no native class (model_loader/utils.py:get_model_architecture) and would hand the
    checkpoint to resolve_transformers_arch, the Transformers backend servefit does not plan."""
    model = _kimi_k3()
    old, new = _profile("0.5.16"), _profile("0.5.17")
    sizes = old.parallel_sizes({"tp_size": 8})
    with pytest.raises(EngineRejection, match="SGLang 0.5.16 does not register KimiK3"):
        old.check_model(model, sizes)
    new.check_model(model, sizes)  # registered: no rejection
    r = _resolve("0.5.17", model, "h200", 143771, {"tp_size": 8})
    # arg_groups/overrides.py:_MAMBA_EXTRA_BUFFER_ARCHS holds Kimi-K3 from 0.5.17
    assert r.error is None and r["mamba_radix_cache_strategy"] == "extra_buffer"


def test_small_gpu_tier_changes_in_0_5_20():
    """arg_groups/memory_hook.py:handle_gpu_memory_settings, gpu_mem < 35 GiB: 0.5.19 chunk 2048,
    decode max_bs 24; 0.5.20 chunk 4096, max_bs 48. A dense model on an RTX 4090 (24564 MiB),
    TP 1: reserved = 512 + 2048 x 1.5 + 1/8 GiB + 24 x 2 + 42 prefill buckets x 8 = 4096 MiB."""
    model = dense("Qwen/Qwen2-7B", 28, 28, 4, 128)
    old = _resolve("0.5.19", model, "rtx-4090", RTX4090, {})
    new = _resolve("0.5.20", model, "rtx-4090", RTX4090, {})
    assert (old["chunked_prefill_size"], old["cuda_graph_max_bs_decode"]) == (2048, 24)
    assert (new["chunked_prefill_size"], new["cuda_graph_max_bs_decode"]) == (4096, 48)
    assert old["mem_fraction_static"] == round((RTX4090 - 4096) / RTX4090, 3) == 0.833
    # 512 + 4096 x 1.5 + 128 + 48 x 2 + 50 x 8 = 7280 MiB
    assert new["mem_fraction_static"] == round((RTX4090 - 7280) / RTX4090, 3) == 0.704


def test_decode_max_bs_clamped_to_explicit_mrr_from_0_5_22():
    """handle_gpu_memory_settings (0.5.22: decode_max_bs_is_default): an H100's default decode
    max_bs 256 is clamped to --max-running-requests 16; 0.5.21 keeps 256."""
    model = dense("Qwen/Qwen2-7B", 28, 28, 4, 128)
    args = {"max_running_requests": 16, "mem_fraction_static": 0.8}
    assert _resolve("0.5.21", model, "h100", H100, args)["cuda_graph_max_bs_decode"] == 256
    assert _resolve("0.5.22", model, "h100", H100, args)["cuda_graph_max_bs_decode"] == 16


def test_requests_per_attention_dp_worker_floor_in_0_5_23():
    """kv_cache_configurator.py:resolve_max_num_reqs: 2 requests over 4 attention-DP workers is
    2 // 4 = 0 on 0.5.22 (then managers/tp_worker.py asserts), max(1, 0) = 1 on 0.5.23."""
    model = dense("Qwen/Qwen2-7B", 28, 28, 4, 128)
    args = {"tp_size": 4, "attn_dp_size": 4, "max_running_requests": 2, "mem_fraction_static": 0.8}
    _, old = _size("0.5.22", model, H100, args, 79.0, 4.0)
    _, new = _size("0.5.23", model, H100, args, 79.0, 4.0)
    assert old.error == "AssertionError: max_running_request is zero"
    assert new.error is None and new.pools.effective_max_running_requests == 1


def test_prefill_graph_clamped_to_context_length_only_in_0_5_16():
    """server_args.py:ServerArgs._handle_gpu_memory_settings (0.5.16): "Clamp to context_length
    if explicitly set" -- the prefill graph max_bs 4096 (A6000 chunk) becomes 2048."""
    model = qwen36_27b()
    args = {"tp_size": 2, "context_length": 2048}
    assert _resolve("0.5.16", model, "a6000", A6000, args)["cuda_graph_max_bs_prefill"] == 2048
    assert _resolve("0.5.17", model, "a6000", A6000, args)["cuda_graph_max_bs_prefill"] == 4096


def test_text_only_qwen3_5_takes_extra_buffer_from_0_5_19():
    """arg_groups/overrides.py:_MAMBA_RADIX_CACHE_ARCHS / _MAMBA_EXTRA_BUFFER_ARCHS gain
    Qwen3_5ForCausalLM in 0.5.19; 0.5.18 registers the class (models/qwen3_5.py) without it."""
    model = dataclasses.replace(
        qwen36_27b(), architecture="Qwen3_5ForCausalLM", is_multimodal=False
    )
    assert _resolve("0.5.18", model, "h100", H100, {})["mamba_radix_cache_strategy"] == "auto"
    new = _resolve("0.5.19", model, "h100", H100, {})
    assert new["mamba_radix_cache_strategy"] == "extra_buffer"


def test_pathless_draft_layers_counted_from_0_5_20():
    """spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state: without a draft path, 0.5.19
    leaves eagle_draft_num_layers None (the cell is the target's); 0.5.20 takes the target
    config's num_nextn_predict_layers (DeepSeek-V3: 1 of 61 layers) into the cell:
    cell + int(cell x 1 / 61)."""
    model = build_model_spec(
        read_json(catalog.DATA / "deepseek-ai__DeepSeek-V3.json"), name="ds", source="t"
    )
    args = {"tp_size": 8, "speculative_algorithm": "EAGLE", "mem_fraction_static": 0.85}
    _, old = _size("0.5.19", model, 143771, args, 139.5, 85.0)
    _, new = _size("0.5.20", model, 143771, args, 139.5, 85.0)
    cell = old.pools.kv_bytes_per_token
    assert model.mtp_layers == 1 and model.num_layers == 61
    assert new.pools.kv_bytes_per_token == cell + int(cell * 1 / 61)


# --- the breakable prefill CUDA graph's compatibility checks (Rules.breakable_checks) ---------


def _deepseek_v3() -> ModelSpec:
    cfg = read_json(catalog.DATA / "deepseek-ai__DeepSeek-V3.json")
    return build_model_spec(cfg, name="deepseek-ai/DeepSeek-V3", source="t")


def test_mla_turns_the_breakable_prefill_graph_off_until_0_5_18():
    """server_args.py:ServerArgs._disable_breakable_cudagraph_if_incompatible: 0.5.16 "MLA
    attention", 0.5.17 "MLA attention (non-DSA)" (DeepSeek-V3 has no index_topk, so not DSA:
    configs/model_config.py:is_deepseek_dsa); 0.5.18 drops the check and the MLA prefill graph
    reserve (1.5 GiB, memory_hook.py:reserve_for_graph_mb) joins the heuristic. H200 at TP 8:
    512 + 8192 x 1.5 + 8/8 GiB + decode 512 x 2 = 14848 MiB, + 1536 with the prefill graph."""
    model, H200 = _deepseek_v3(), 143771
    for release, backend, reserved in (
        ("0.5.16", "disabled", 14848),
        ("0.5.17", "disabled", 14848),
        ("0.5.18", "breakable", 14848 + 1536),
    ):
        r = _resolve(release, model, "h200", H200, {"tp_size": 8})
        assert r["cuda_graph_backend_prefill"] == backend, release
        assert r["mem_fraction_static"] == round((H200 - reserved) / H200, 3), release
    r = _resolve("0.5.16", model, "h200", H200, {"tp_size": 8})
    assert (
        "Breakable CUDA graph is incompatible with MLA attention; disabling prefill CUDA graph."
        in r.log_lines
    )


def test_dp_attention_turns_it_off_only_in_0_5_16():
    """0.5.16's list has "DP attention" (self._resolved().enable_dp_attention); 0.5.17 has not."""
    model = dense("Qwen/Qwen2-7B", 28, 28, 4, 128)
    args = {"tp_size": 2, "dp_size": 2, "enable_dp_attention": True}
    assert _resolve("0.5.16", model, "h100", H100, args)["cuda_graph_backend_prefill"] == "disabled"
    assert (
        _resolve("0.5.17", model, "h100", H100, args)["cuda_graph_backend_prefill"] == "breakable"
    )


def test_pipeline_parallelism_turns_it_off_from_0_5_19():
    """arg_groups/cuda_graph_hook.py:apply_cuda_graph_compatibility (0.5.19): PP disables the
    breakable prefill graph by default; 0.5.18 has no PP check."""
    model = dense("Qwen/Qwen2-7B", 28, 28, 4, 128)
    args = {"pp_size": 2}
    assert (
        _resolve("0.5.18", model, "h100", H100, args)["cuda_graph_backend_prefill"] == "breakable"
    )
    assert _resolve("0.5.19", model, "h100", H100, args)["cuda_graph_backend_prefill"] == "disabled"


def test_kda_turns_it_off_from_0_5_20():
    """cuda_graph_hook.py:disable_breakable_cudagraph_if_incompatible gains "KDA hybrid linear
    attention" in 0.5.20; on 0.5.19 Kimi-K3 (KDA, and on the multimodal breakable allowlist
    since 0.5.18) keeps the breakable prefill graph."""
    model = _kimi_k3()
    args = {"tp_size": 8}
    assert (
        _resolve("0.5.19", model, "h200", 143771, args)["cuda_graph_backend_prefill"] == "breakable"
    )
    r = _resolve("0.5.20", model, "h200", 143771, args)
    assert r["cuda_graph_backend_prefill"] == "disabled"
    assert (
        "Breakable CUDA graph is incompatible with KDA hybrid linear attention; disabling "
        "prefill CUDA graph." in r.log_lines
    )


@pytest.mark.parametrize(
    ("release", "want"),
    [
        # 0.5.21 and earlier: no attn_dp_size field; --enable-dp-attention --dp-size 2 keeps both
        # (server_args.py: attn_dp_size = dp_size if enable_dp_attention else 1)
        ("0.5.16", {"enable_dp_attention": True, "dp_size": 2}),
        ("0.5.21", {"enable_dp_attention": True, "dp_size": 2}),
        # 0.5.22: arg_groups/parallel_hook.py:handle_deprecated_dp_attention moves the width to
        # --attn-dp-size and --dp-size counts replicas
        ("0.5.22", {"enable_dp_attention": False, "dp_size": 1, "attn_dp_size": 2}),
    ],
)
def test_dp_attention_is_a_flag_before_0_5_22(release, want):
    resolved = _resolve(
        release, qwen36_27b(), "H100", 81559,
        {"tp_size": 2, "dp_size": 2, "enable_dp_attention": True},
    )  # fmt: skip
    assert resolved.error is None
    assert {k: resolved.values.get(k) for k in want} == want
