"""vLLM 0.33.0 profile against hand arithmetic on its released rules (tests/data/reference/
vllm-memory.md §2.4, §3.2, §6; Qwen3-Next-80B-A3B bf16 shapes as in test_v0_24_0.py)."""

from __future__ import annotations

import pytest

from .helpers import GiB, qwen3_next, vplan

E = "vllm==0.33.0"


@pytest.fixture(scope="module")
def next80():
    return qwen3_next()


@pytest.mark.parametrize(
    ("gpu", "tp", "block"),
    [
        # SM90: prefix caching on (default) -> align; FlashInfer GDN prefill exports checkpoints
        # on a 64-token grid -> alignment lcm(16, 64) = 64: TP1 64 x cdiv(1,097,728, 131,072) = 576,
        # TP4 64 x cdiv(274,432, 65,536) = 320
        ("H200", 1, 576),
        ("H200", 4, 320),
        # SM86 (A6000): Triton/FLA GDN prefill, no checkpoint grid -> alignment 16: 544 / 272
        ("A6000", 1, 544),
        ("A6000", 4, 272),
    ],
)
def test_block_size_depends_on_the_gdn_prefill_backend(next80, gpu, tp, block):
    p = vplan(
        next80, gpu, E, tensor_parallel_size=tp, kv_cache_memory_bytes=20 * GiB, max_num_seqs=64
    )
    assert p.resolved_args["mamba_cache_mode"] == "align"
    assert p.pools.block_size == block


def test_blackwell_gdn_with_128_key_dim_uses_the_checkpoint_grid(next80):
    # SM12x with linear_key_head_dim 128 and CUDA runtime >= 13 (the wheel's cu13 deps)
    p = vplan(
        next80,
        "RTX PRO 6000",
        E,
        tensor_parallel_size=4,
        kv_cache_memory_bytes=20 * GiB,
        max_num_seqs=64,
    )
    assert p.pools.block_size == 320


def test_reference_worked_example_hopper_default(next80):
    # reference §6.4, "TP=4, 0.33.0 default on Hopper": block 320, page 320 x 1,024 = 327,680 B,
    # bytes_per_block 12 x 327,680 = 3,932,160; 50 GiB -> 13,653 blocks; per request
    # cdiv(262,144, 320) = 820 + 3 groups x (2 + 0 + 1 checkpoint) = 829 -> 16.47x,
    # int(13,653 / 829 x 262,144) = 4,317,312, logged on one line since 0.29
    p = vplan(next80, "H200", E, tensor_parallel_size=4, kv_cache_memory_bytes=50 * GiB)
    assert p.pools.num_blocks == 13653
    assert p.pools.mamba_slots_per_request == 3
    # kv_cache_utils.py:update_kv_cache_capacity, then resolve_kv_cache_block_sizes: the four
    # groups' block sizes (all 320 in align mode) and their lcm
    assert p.log_lines[-3:] == [
        "GPU KV cache size: 4,317,312 tokens, Maximum concurrency for 262,144 tokens per "
        "request: 16.47x",
        "kv cache group sizes (320, 320, 320, 320)",
        "kv lcm block sizes 320",
    ]
    assert (
        "Padding mamba page size by 19.40% to ensure that mamba page size and attention page size are exactly equal."
        in p.log_lines
    )


def test_prefix_caching_off_is_none_mode(next80):
    p = vplan(
        next80,
        "H200",
        E,
        tensor_parallel_size=4,
        enable_prefix_caching=False,
        kv_cache_memory_bytes=50 * GiB,
    )
    assert p.resolved_args["mamba_cache_mode"] == "none"
    assert p.pools.block_size == 272  # no checkpoint grid outside align mode
    assert p.pools.num_blocks == 16062


def test_deprecated_mamba_cache_mode_flag_is_ignored(next80):
    p = vplan(
        next80,
        "H200",
        E,
        tensor_parallel_size=4,
        mamba_cache_mode="none",
        kv_cache_memory_bytes=50 * GiB,
    )
    assert p.resolved_args["mamba_cache_mode"] == "align"
    assert (
        "--mamba-cache-mode is deprecated and will be removed in v0.33.0. It has no effect: "
        "Mamba prefix caching follows --enable-prefix-caching."
    ) in p.log_lines


def test_null_block_is_held_back_in_the_memory_check(next80):
    # kv_cache_planning.py:get_kv_cache_configs checks available - bytes_per_block: exactly one
    # request's blocks (829) pass in 0.24-style accounting but fail here
    bpb = 12 * 327680
    p = vplan(
        next80, "H200", E, tensor_parallel_size=4, kv_cache_memory_bytes=829 * bpb, max_num_seqs=64
    )
    assert p.verdict == "fail" and p.error.startswith("ValueError: To serve at least one request")
    assert (
        vplan(
            next80,
            "H200",
            E,
            tensor_parallel_size=4,
            kv_cache_memory_bytes=830 * bpb,
            max_num_seqs=64,
        ).verdict
        == "ok"
    )


def test_mamba2_checkpoint_block_in_align_mode():
    # mamba_mixer2.py:get_kv_cache_spec -> num_prefill_checkpoint_blocks=1 (0.32+): 2 + 0 + 1
    from servefit.model.inventory import load_model

    m = load_model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    p = vplan(m, "H100", E, kv_cache_memory_bytes=20 * GiB, max_num_seqs=64)
    assert p.resolved_args["mamba_cache_mode"] == "align"
    assert p.pools.mamba_slots_per_request == 3


def test_batch_default_tiers():
    m = qwen3_next()
    # >= 160 GiB (B200): 16384 tokens / 1024 seqs
    b = vplan(m, "B200", E, tensor_parallel_size=2, kv_cache_memory_bytes=50 * GiB)
    assert (b.resolved_args["max_num_batched_tokens"], b.resolved_args["max_num_seqs"]) == (
        16384,
        1024,
    )
    h = vplan(m, "H200", E, tensor_parallel_size=2, kv_cache_memory_bytes=50 * GiB)
    assert (h.resolved_args["max_num_batched_tokens"], h.resolved_args["max_num_seqs"]) == (
        8192,
        1024,
    )
