"""SGLang 0.5.23 hybrid sliding-window pools against hand arithmetic from the 0.5.23 wheel.

Rules (paths inside the wheel): model_executor/pool_configurator.py:HybridSWAPoolConfigurator
(_cell_size = full_per_token x (n_full + draft_full) + swa_full_tokens_ratio x swa_per_token x
(n_swa + draft_swa); max_total = int(available // _cell_size); full = page-aligned max_total,
swa = page-aligned int(full x ratio); validate_swa_pool_size; the "Use sliding window memory
pool" line), SWARequestCapPoolConfigurator / compute_swa_request_cap,
mem_cache/kv_cache_configurator.py:config_from_budget (re-solve after --max-total-tokens),
mem_cache/swa_memory_pool.py:SWAKVPool + memory_pool.py:_finalize_allocation_log (the "Full" /
"SWA KV Cache is allocated" lines), load_model_utils.py:resolve_sliding_window_size and
models/gpt_oss.py (window = sliding_window - 1 = 127).

gpt-oss (the bundled openai__gpt-oss-{20b,120b}.json): 8 KV heads of head_dim 64,
bf16 KV, alternating sliding/full layers (20b: 12 + 12, 120b: 18 + 18). One layer per token:
8 x (64 + 64) x 2 B = 2,048 B at attention TP 1, 1,024 B at TP 2.

Every sizing test fixes pre-load free 80 GiB, weights 12 GiB and --mem-fraction-static 0.75, so
the KV budget is exactly 80 - 12 - 80 x 0.25 = 48 GiB = 51,539,607,552 B.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from servefit.engines.base import MemoryInputs
from servefit.engines.sglang import v0_5_23 as prof
from servefit.engines.sglang.flow import swa
from servefit.model.inventory import build_model_spec, load_model
from tests.engines.sglang.handbuilt import gpus

GiB = 2**30
H100, B200 = 81559, 183359
BUDGET = 48 * GiB  # 51,539,607,552 B
BASE = {"mem_fraction_static": 0.75}


@pytest.fixture(scope="module")
def oss20b():
    return load_model("openai/gpt-oss-20b")


@pytest.fixture(scope="module")
def oss120b():
    return load_model("openai/gpt-oss-120b")


def _size(model, args, key="h100-sxm", mib=H100, count=1, env=None):
    g = gpus(key, mib, count)
    r = prof.resolve_args(model, g, {**BASE, **args}, env or {})
    mem = MemoryInputs(total_gib=mib / 1024, pre_load_free_gib=80.0, weights_gib=12.0)
    return r, prof.size_pools(model, g, r, mem)


def test_ratio_split_gpt_oss_20b(oss20b):
    """cell = 2,048 x 12 + 0.8 x 2,048 x 12 = 44,236.8 B per full token.
    full = 51,539,607,552 // 44,236.8 = 1,165,084 (1,165,084.44); swa = int(0.8 x full) = 932,067."""
    r, s = _size(oss20b, {})
    assert r.error is None and r["disable_hybrid_swa_memory"] is False
    assert s.error is None
    assert s.pools.max_total_num_tokens == 1_165_084
    assert s.extra["swa_max_total_num_tokens"] == 932_067
    assert s.extra["sliding_window_size"] == 127  # sliding_window 128 - 1
    assert s.pools.kv_bytes_per_token == 44_236  # int(44,236.8)
    # K per pool = (tokens + page 1) x 1,024 B (8 heads x 64 x 2) x 12 layers; V the same.
    full_k = (1_165_084 + 1) * 1024 * 12  # 14,316,564,480 B = 13.33 GiB
    swa_k = (932_067 + 1) * 1024 * 12  # 11,453,251,584 B = 10.67 GiB
    assert s.per_rank.kv_cache_gib == pytest.approx(2 * (full_k + swa_k) / GiB)  # 48.00002
    lines = list(s.log_lines)
    i = lines.index(
        "Use sliding window memory pool. full_layer_tokens=1165084, swa_layer_tokens=932067"
    )
    assert lines[i + 1 : i + 4] == [
        "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1165084, K size: 13.33 GB, "
        "V size: 13.33 GB",
        "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 932067, K size: 10.67 GB, "
        "V size: 10.67 GB",
        "SWAKVPool mem usage: 48.00 GB, swa size: 932067, full size: 1165084",
    ]
    # resolve_max_num_reqs reads the full-layer tokens: clamp(int(1,165,084/131,072 x 512) =
    # 4,551, 2,048, 4,096) = 4,096.
    assert s.pools.effective_max_running_requests == 4096
    # Memory pool end = 68 GiB after weights - KV - req_to_token (4,097 x (131,072 + 4) x 4 B).
    r2t = 4097 * (131_072 + 4) * 4
    end = 68 - (2 * (full_k + swa_k) + r2t) / GiB  # 17.9995
    assert f"Memory pool end. avail mem={end:.2f} GB" == "Memory pool end. avail mem=18.00 GB"
    assert "Memory pool end. avail mem=18.00 GB" in lines


def test_disabled_plans_every_layer_as_full(oss20b):
    """--disable-hybrid-swa-memory: DefaultPoolConfigurator over all 24 layers,
    cell = 2,048 x 24 = 49,152 B; tokens = 48 GiB // 49,152 = 1,048,576 exactly."""
    _, s = _size(oss20b, {"disable_hybrid_swa_memory": True})
    assert s.error is None
    assert s.pools.max_total_num_tokens == 1_048_576
    assert s.pools.kv_bytes_per_token == 49_152
    assert "swa_max_total_num_tokens" not in s.extra
    assert not any(line.startswith("Use sliding window") for line in s.log_lines)
    # K = (1,048,576 + 1) x 1,024 B x 24 layers = 24.00002 GiB
    assert (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1048576, K size: 24.00 GB, "
        "V size: 24.00 GB"
    ) in s.log_lines


def test_sm100_keeps_the_split_on_trtllm_mha(oss20b):
    """Δ 0.5.9: model_overrides/gpt_oss.py still picks trtllm_mha on SM100 but no longer turns
    hybrid SWA memory off (0.5.9's _handle_model_specific_adjustments did)."""
    r, s = _size(oss20b, {}, key="b200", mib=B200)
    assert r["attention_backend"] == "trtllm_mha"
    assert r["disable_hybrid_swa_memory"] is False
    assert s.pools.max_total_num_tokens == 1_165_084  # same budget, same split
    assert s.extra["swa_sizing"] == "ratio"


def test_ratio_flag_and_max_total_tokens_re_solve(oss120b):
    """gpt-oss-120b at TP 2 (1,024 B a layer), --swa-full-tokens-ratio 0.5:
    cell = 1,024 x 18 + 0.5 x 1,024 x 18 = 27,648 -> full = 48 GiB // 27,648 = 1,864,135,
    swa = int(0.5 x 1,864,135) = 932,067. --max-total-tokens 1,000,000 then re-solves
    (calculate_pool_sizes_from_max_tokens): full 1,000,000, swa 500,000, logged a second time."""
    args = {"tp_size": 2, "swa_full_tokens_ratio": 0.5, "max_total_tokens": 1_000_000}
    _, s = _size(oss120b, args, count=2)
    assert s.error is None
    use = [line for line in s.log_lines if line.startswith("Use sliding window")]
    assert use == [
        "Use sliding window memory pool. full_layer_tokens=1864135, swa_layer_tokens=932067",
        "Use sliding window memory pool. full_layer_tokens=1000000, swa_layer_tokens=500000",
    ]
    assert s.pools.max_total_num_tokens == 1_000_000
    assert s.extra["swa_max_total_num_tokens"] == 500_000
    # No "larger than the profiled value" warning: the cap is below the profiled 1,864,135.
    assert not any("is larger than the profiled value" in line for line in s.log_lines)
    # KV = 2 x ((1,000,001 + 500,001) x 512 B x 18 layers) = 25.75 GiB (4 heads x 64 x 2 B)
    assert s.per_rank.kv_cache_gib == pytest.approx(2 * 1_500_002 * 512 * 18 / GiB)


def test_swa_pool_below_the_window_is_the_engine_value_error(oss20b):
    """validate_swa_pool_size: --max-total-tokens 150 -> full 150, swa int(0.8 x 150) = 120;
    sliding_window_size 127 + page 1 >= 120 raises before anything is allocated."""
    _, s = _size(oss20b, {"max_total_tokens": 150})
    assert s.error == (
        "ValueError: SWA pool (120 tokens) cannot hold even one request: the prefill admission "
        "floor is sliding_window_size (127) + page_size (1). Increase --swa-full-tokens-ratio or "
        "the total KV budget."
    )
    assert s.error_consumer == "kv cache"
    assert s.per_rank.kv_cache_gib == 0
    # The profiled split was logged; the re-solve raised before its own line.
    use = [line for line in s.log_lines if line.startswith("Use sliding window")]
    assert use == [
        "Use sliding window memory pool. full_layer_tokens=1165084, swa_layer_tokens=932067"
    ]


def test_ratio_out_of_range_is_rejected(oss20b):
    r = prof.resolve_args(oss20b, gpus("h100-sxm", H100, 1), {"swa_full_tokens_ratio": 1.5}, {})
    assert r.error == "ValueError: --swa-full-tokens-ratio should be in range (0, 1.0]."


def test_request_cap_with_radix_off(oss20b):
    """SWARequestCapPoolConfigurator (radix off + --max-running-requests + chunked prefill):
    per request = window 127 + eviction interval 128 x 1 draft token + page 1, + page 1 decode
    = 257; cap = 257 x 8 + 2 chunks x 8,192 (H100 tier) + page 1 = 18,441 SWA tokens.
    full = (48 GiB - 18,441 x 24,576) // 24,576 = 2,097,152 - 18,441 = 2,078,711."""
    args = {"disable_radix_cache": True, "max_running_requests": 8}
    _, s = _size(oss20b, args)
    assert s.error is None
    assert s.extra["swa_sizing"] == "request cap"
    assert s.extra["swa_max_total_num_tokens"] == 18_441
    assert s.pools.max_total_num_tokens == 2_078_711
    assert s.pools.effective_max_running_requests == 8
    # This configurator prints no "Use sliding window memory pool" line.
    assert not any(line.startswith("Use sliding window") for line in s.log_lines)
    # A longer eviction interval widens every request's tail: (127 + 256 + 1 + 1) x 8 + 16,385.
    _, s = _size(oss20b, args, env={"SGLANG_SWA_EVICTION_INTERVAL": "256"})
    assert s.extra["swa_max_total_num_tokens"] == 385 * 8 + 16_385


def test_eagle3_draft_layer_priced_on_the_full_side(oss20b):
    """EAGLE3 with a draft path: eagle_draft_num_layers 1 (servefit does not read the draft
    config: non-SWA), so _full_cell_bytes = 2,048 x (12 + 1):
    cell = 26,624 + 0.8 x 24,576 = 46,284.8 -> full = 1,113,532, swa = int(0.8 x full) = 890,825.
    The draft's own MHA pool holds (full + 1) x 2,048 B."""
    args = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "some/eagle3-draft"}
    _, s = _size(oss20b, args)
    assert s.error is None
    assert s.pools.max_total_num_tokens == 1_113_532
    assert s.extra["swa_max_total_num_tokens"] == 890_825
    assert s.per_rank.draft_kv_gib == pytest.approx((1_113_532 + 1) * 2048 / GiB)
    assert s.pools.effective_max_running_requests == 48  # the speculative reset


def test_pipeline_stage_counts(oss20b):
    """--pp-size 2: each stage owns 12 layers, 6 full + 6 sliding (get_pp_indices), so
    cell = 2,048 x 6 x 1.8 = 22,118.4 -> full = 48 GiB // 22,118.4 = 2,330,168;
    swa = int(0.8 x 2,330,168) = 1,864,134; K full = (2,330,169) x 1,024 x 6 per stage."""
    _, s = _size(oss20b, {"pp_size": 2}, count=2)
    assert s.error is None
    assert s.pools.max_total_num_tokens == 2_330_168
    assert s.extra["swa_max_total_num_tokens"] == 1_864_134
    assert s.per_rank.kv_cache_gib == pytest.approx(2 * (2_330_169 + 1_864_135) * 1024 * 6 / GiB)


# --- geometry of the other mirrored families (config fields the wheel reads; values are
# illustrative, written here, since no checkpoint config of these families is in the repo) ---


def test_mimo_v2_compress_geometry():
    """configs/model_config.py: hybrid_layer_pattern (1 = SWA), swa_num_key_value_heads,
    swa_head_dim / swa_v_head_dim; MiMoV2 is is_hybrid_swa_compress, so its pools get those
    dims (kv_cache_configurator.py:_build_hybrid_swa_kv_pool). TP 2, bf16:
    full = 4 // 2 x (192 + 128) x 2 = 1,280 B; SWA = 8 // 2 x (192 + 128) x 2 = 2,560 B."""
    cfg = {
        "architectures": ["MiMoV2FlashForCausalLM"],
        "model_type": "mimo_v2_flash",
        "hidden_size": 4096,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 192,
        "v_head_dim": 128,
        "swa_num_key_value_heads": 8,
        "swa_head_dim": 192,
        "swa_v_head_dim": 128,
        "sliding_window_size": 128,
        "hybrid_layer_pattern": [0, 1, 1, 1, 1, 0, 1, 1],
        "num_hidden_layers": 8,
        "vocab_size": 1000,
        "intermediate_size": 1024,
        "max_position_embeddings": 32768,
    }
    geo = swa.geometry(build_model_spec(cfg, name="mimo", source="test"), 2, "bfloat16")
    assert geo is not None
    assert geo.full_ids == (0, 5) and geo.swa_ids == (1, 2, 3, 4, 6, 7)
    assert (geo.full_per_token, geo.swa_per_token) == (1280, 2560)
    assert (geo.full_k, geo.full_v, geo.swa_k, geo.swa_v) == (768, 512, 1536, 1024)
    assert geo.window == 128  # ModelConfig.sliding_window_size


def test_llama4_and_step3p5_geometry():
    """Llama 4: SWA = (i + 1) % 4 != 0, window = attention_chunk_size (resolve_sliding_window_size).
    Step3p5: layer_types below num_hidden_layers; SWA KV heads from
    attention_other_setting.num_attention_groups (get_swa_num_kv_heads); its pools are not
    'compress', so both allocate get_num_kv_heads x head_dim for K and for V."""
    llama4 = {
        "architectures": ["Llama4ForConditionalGeneration"],
        "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text",
            "hidden_size": 5120,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_hidden_layers": 8,
            "attention_chunk_size": 8192,
            "vocab_size": 1000,
            "intermediate_size": 1024,
            "max_position_embeddings": 1048576,
        },
    }
    geo = swa.geometry(build_model_spec(llama4, name="llama4", source="test"), 1, "bfloat16")
    assert geo is not None
    assert geo.full_ids == (3, 7) and geo.swa_ids == (0, 1, 2, 4, 5, 6)
    assert geo.full_per_token == geo.swa_per_token == 8 * 256 * 2
    assert geo.window == 8192

    step = {
        "architectures": ["Step3p5ForCausalLM"],
        "model_type": "step3p5",
        "hidden_size": 4096,
        "num_attention_heads": 64,
        "num_attention_groups": 8,
        "head_dim": 128,
        "num_hidden_layers": 4,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                        "sliding_attention"],
        "attention_other_setting": {"num_attention_heads": 96, "num_attention_groups": 4},
        "sliding_window": 512,
        "vocab_size": 1000,
        "intermediate_size": 1024,
        "max_position_embeddings": 65536,
    }  # fmt: skip
    model = build_model_spec(step, name="step", source="test")
    # Step3p5 configs may list more layer_types than num_hidden_layers (configs/step3p5.py
    # tolerates it); get_hybrid_layer_ids drops the extra ids. servefit's config parser refuses
    # such a config, so the extra entry is put on the text config directly.
    text = {**model.text_config, "layer_types": [*step["layer_types"], "sliding_attention"]}
    model = replace(model, text_config=text)
    geo = swa.geometry(model, 1, "fp8_e4m3")
    assert geo is not None
    assert geo.full_ids == (0,) and geo.swa_ids == (1, 2, 3)  # layer 4 >= num_hidden_layers
    assert (geo.full_per_token, geo.swa_per_token) == (8 * 256, 4 * 256)
    assert geo.swa_k == geo.full_k == 8 * 128  # pool allocates the full heads
    assert geo.window == 512
    # overrides.py:_step3p_overrides: hierarchical cache -> ratio 1.0 and hybrid SWA off.
    r = prof.resolve_args(model, gpus("h100-sxm", H100, 1), {"enable_hierarchical_cache": True}, {})
    assert r["swa_full_tokens_ratio"] == 1.0 and r["disable_hybrid_swa_memory"] is True
    assert not swa.is_hybrid_swa(model, r.values)


def test_unmirrored_hybrid_swa_arch_warns(oss20b):
    """Gemma4 is in is_hybrid_swa_model; servefit does not mirror its pool and says so."""
    model = replace(oss20b, architecture="Gemma4ForCausalLM", raw_config={})
    _, s = _size(model, {})
    assert any("does not mirror its geometry" in w for w in s.warnings)
    assert s.pools.max_total_num_tokens == 1_048_576  # planned as 24 full-attention layers


def test_malformed_layer_pattern_is_one_config_error():
    """A hybrid_layer_pattern shorter than num_hidden_layers: ConfigError, not an IndexError."""
    from servefit.errors import ConfigError

    cfg = {
        "architectures": ["MiMoV2FlashForCausalLM"],
        "model_type": "mimo_v2_flash",
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "hybrid_layer_pattern": [0, 1],
        "num_hidden_layers": 4,
        "vocab_size": 1000,
        "intermediate_size": 1024,
        "max_position_embeddings": 4096,
    }
    model = build_model_spec(cfg, name="mimo", source="test")
    with pytest.raises(ConfigError, match="sliding-window layout of MiMoV2FlashForCausalLM"):
        swa.geometry(model, 1, "bfloat16")
