"""vLLM 0.24.0 profile against hand arithmetic on its released rules.

The worked examples are tests/data/reference/vllm-memory.md §6 (Qwen3-Next-80B-A3B, bf16: 12 full
attention layers with 2 KV heads of dim 256, 36 GDN layers with 16 key / 32 value heads of dim
128, conv kernel 4); with --kv-cache-memory-bytes the engine skips profiling, so the block
arithmetic is checked without the fitted memory model."""

from __future__ import annotations

import pytest

from servefit.engines.vllm import common
from servefit.errors import ServefitError

from .helpers import GiB, qwen3_next, vplan

E = "vllm==0.24.0"


@pytest.fixture(scope="module")
def next80():
    return qwen3_next()


@pytest.mark.parametrize(
    ("tp", "block", "pad"),
    [
        # GDN page TP1: conv 3 x 8192 x 2 + temporal 32 x 128 x 128 x 2 = 1,097,728 B; attention
        # 2 heads x 512 x 2 = 2,048 B/token -> 16 x cdiv(1,097,728, 32,768) = 544, padding
        # 544 x 2048 / 1,097,728 - 1 = 1.49 % (the log of vllm_qwen3next_80b_instruct_2xh200_tp2_v0102)
        (1, 544, "1.49"),
        # TP4: page 274,432 B, attention 1 KV head (replicated) = 1,024 B/token -> 16 x 17 = 272
        (4, 272, "1.49"),
    ],
)
def test_attention_block_size_and_padding(next80, tp, block, pad):
    p = vplan(next80, "H200", E, tensor_parallel_size=tp, kv_cache_memory_bytes=50 * GiB)
    assert p.pools.block_size == block
    assert (
        f"Setting attention block size to {block} tokens to ensure that attention page size "
        "is >= mamba page size."
    ) in p.log_lines
    assert (
        f"Padding mamba page size by {pad}% to ensure that mamba page size and attention "
        "page size are exactly equal."
    ) in p.log_lines


def test_reference_worked_example_none_mode(next80):
    # reference §6.4, TP4, prefix caching off (the 0.24.0 default for hybrids), A = 50 GiB:
    # 4 groups x 12 layers -> bytes_per_block 12 x 278,528 = 3,342,336; 50 GiB // that = 16,062;
    # per request cdiv(262,144, 272) = 964 attention + 3 Mamba groups x 1 = 967 -> 16.61x,
    # int(16,062 / 967 x 262,144) = 4,354,247 tokens
    p = vplan(next80, "H200", E, tensor_parallel_size=4, kv_cache_memory_bytes=50 * GiB)
    assert p.resolved_args["enable_prefix_caching"] is False
    assert p.resolved_args["mamba_cache_mode"] == "none"
    assert p.pools.num_blocks == 16062 == p.pools.mamba_blocks
    assert p.pools.max_total_num_tokens == 4354247
    assert p.log_lines[-2:] == [
        "GPU KV cache size: 4,354,247 tokens",
        "Maximum concurrency for 262,144 tokens per request: 16.61x",
    ]


def test_mtp_draft_layer_joins_the_attention_group():
    # reference §4/§6.4: an MTP draft layer is one more full-attention layer: 13 attention vs
    # 36 GDN -> group size 13, cdiv(36, 13) = 3 GDN groups, "Add 3 padding layers" (3 / 36);
    # k = 1 adds one conv row (page 278,528 B at TP4 -> block 272, no padding) and one block
    # per Mamba group: bytes_per_block 13 x 278,528 = 3,620,864, 50 GiB -> 14,827 blocks,
    # 964 + 3 x 2 = 970 per request -> 15.29x. The bundled config has no MTP layer; the
    # reference example assumes one, so num_nextn_predict_layers: 1 is added here.
    model = qwen3_next(num_nextn_predict_layers=1)
    p = vplan(
        model,
        "H200",
        E,
        tensor_parallel_size=4,
        kv_cache_memory_bytes=50 * GiB,
        speculative_config={"method": "mtp", "num_speculative_tokens": 1},
    )
    assert "Add 3 padding layers, may waste at most 8.33% KV cache memory" in p.log_lines
    assert not any(line.startswith("Padding mamba page size") for line in p.log_lines)
    assert p.pools.block_size == 272
    assert p.pools.num_blocks == 14827
    assert round(p.pools.max_concurrency, 2) == 15.29


def test_mtp_k3_conv_rows_raise_the_block(next80):
    model = qwen3_next(num_nextn_predict_layers=1)
    # TP1, k = 3: conv (3 + 3) x 8192 x 2 = 98,304 + 1,048,576 = 1,146,880 B -> 16 x 35 = 560
    p = vplan(
        model,
        "H200",
        E,
        tensor_parallel_size=1,
        kv_cache_memory_bytes=50 * GiB,
        speculative_config={"method": "mtp", "num_speculative_tokens": 3},
    )
    assert p.pools.block_size == 560


def test_prefix_caching_on_gives_align_mode_and_two_blocks_per_group(next80):
    # MambaModelConfig.verify_and_update_config: Qwen3-Next does not declare
    # SupportsMambaPrefixCaching -> 'align'; MambaSpec.max_memory_usage_bytes: 2 + k pages
    p = vplan(
        next80,
        "H200",
        E,
        tensor_parallel_size=4,
        enable_prefix_caching=True,
        kv_cache_memory_bytes=50 * GiB,
    )
    assert p.resolved_args["mamba_cache_mode"] == "align"
    assert (
        "Mamba cache mode is set to 'align' for Qwen3NextForCausalLM by default when prefix "
        "caching is enabled"
    ) in p.log_lines
    assert p.pools.mamba_slots_per_request == 2
    # 964 + 3 x 2 = 970 blocks per request
    assert p.pools.max_concurrency == pytest.approx(16062 / 970)


def test_batch_defaults_follow_the_device():
    # get_batch_defaults (vllm serve): >= 70 GiB and not an A100 -> 8192 / 1024, else 2048 / 256
    m = qwen3_next()
    h = vplan(m, "H200", E, tensor_parallel_size=2, kv_cache_memory_bytes=50 * GiB)
    assert (h.resolved_args["max_num_batched_tokens"], h.resolved_args["max_num_seqs"]) == (
        8192,
        1024,
    )
    a = vplan(m, "A100 80GB", E, tensor_parallel_size=2, kv_cache_memory_bytes=30 * GiB)
    assert (a.resolved_args["max_num_batched_tokens"], a.resolved_args["max_num_seqs"]) == (
        2048,
        256,
    )


def test_max_seq_len_error_names_the_estimated_length(next80):
    # TP4 none mode: one 262,144-token request needs 967 blocks x 3,342,336 B = 3.01 GiB; with
    # 1,000 blocks' worth the check passes, with 900 it fails and the estimate is the longest
    # length whose cdiv(L, 272) + 3 blocks fit: 897 attention blocks -> 897 x 272 = 243,984.
    bpb = 12 * 278528
    ok = vplan(
        next80,
        "H200",
        E,
        tensor_parallel_size=4,
        kv_cache_memory_bytes=1000 * bpb,
        max_num_seqs=512,
    )
    assert ok.verdict == "ok"
    bad = vplan(next80, "H200", E, tensor_parallel_size=4, kv_cache_memory_bytes=900 * bpb)
    assert bad.verdict == "fail"
    assert bad.error == common.max_seq_len_error(262144, 967 * bpb, 900 * bpb, 243984)
    assert "the estimated maximum model length is 243984." in bad.error
    assert bad.error_consumer == "KV cache of one request at max_model_len"


def test_mamba_blocks_error_when_max_num_seqs_exceeds_blocks(next80):
    # compilation.py: FULL decode graphs + Mamba layers + max_num_seqs > num_blocks
    bpb = 12 * 278528
    p = vplan(next80, "H200", E, tensor_parallel_size=4, kv_cache_memory_bytes=1000 * bpb)
    assert p.error == (
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (1000). Each decode "
        "sequence requires one Mamba cache block, so CUDA graph capture cannot proceed. Please "
        "lower max_num_seqs to at most 1000 or increase gpu_memory_utilization."
    )
    # the capacity lines come first: the check runs when the KV cache is initialized
    assert p.log_lines[-3].startswith("GPU KV cache size:")
    assert (
        vplan(
            next80,
            "H200",
            E,
            tensor_parallel_size=4,
            kv_cache_memory_bytes=1000 * bpb,
            max_num_seqs=1000,
        ).verdict
        == "ok"
    )
    # no FULL graphs, no check
    assert (
        vplan(
            next80,
            "H200",
            E,
            tensor_parallel_size=4,
            kv_cache_memory_bytes=1000 * bpb,
            enforce_eager=True,
        ).verdict
        == "ok"
    )


def test_no_memory_error(next80):
    p = vplan(next80, "H200", E, tensor_parallel_size=2, gpu_memory_utilization=0.3)
    # 0.3 x 139.8 GiB cannot hold the 74 GiB of weights per rank that TP 2 loads
    assert p.error == common.NO_MEMORY
    assert p.error_consumer == "weights"


def test_weights_larger_than_the_gpu_fail_while_loading(next80):
    # TP 1: 148 GiB of weights on a 139.8 GiB H200 -- the load itself runs out of memory,
    # before vLLM compares anything with gpu_memory_utilization
    p = vplan(next80, "H200", E, tensor_parallel_size=1, gpu_memory_utilization=0.3)
    assert p.error == "torch.OutOfMemoryError: CUDA out of memory while loading the weights"
    assert p.error_consumer == "weights"
    assert p.per_rank.kv_cache_gib == p.per_rank.mamba_state_gib == 0.0


def test_free_memory_below_the_request_fails_at_start():
    # request_memory: free at the init snapshot < ceil(total x utilization)
    p = vplan(qwen3_next(), "H200", E, tensor_parallel_size=2, gpu_memory_utilization=1.0)
    assert p.verdict == "fail"
    assert p.error.startswith("ValueError: Free memory on device cuda:0 (")
    assert "is less than desired GPU memory utilization (1.0, " in p.error


def test_nemotron_h_ssm_dtype_and_all_mode():
    from servefit.model.inventory import load_model

    m = load_model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    p = vplan(m, "H100", E, enable_prefix_caching=True, kv_cache_memory_bytes=20 * GiB)
    # NemotronHForCausalLMConfig: mamba_ssm_cache_dtype from the config, else float32
    assert "Updating mamba_ssm_cache_dtype to 'float32' for NemotronH model" in p.log_lines
    # NemotronH declares SupportsMambaPrefixCaching in 0.24.0 -> mode "all"
    assert p.resolved_args["mamba_cache_mode"] == "all"
    # "all": attn block = lcm(chunk_size, 16) x cdiv(cdiv(page, attn bytes/token), chunk) and
    # the Mamba block size follows it
    assert p.resolved_args["mamba_block_size"] == p.pools.block_size
    assert p.pools.block_size % 16 == 0


def test_removed_architectures_and_bad_flags():
    from servefit.model.inventory import load_model

    # what vLLM itself raises is a predicted failure, in its own words
    p = vplan(load_model("MiniMaxAI/MiniMax-M1"), "H200", E, tensor_parallel_size=8)
    assert p.verdict == "fail" and p.error.startswith(
        "ValueError: Model architecture MiniMaxM1ForCausalLM was supported in vLLM until v0.23.0"
    )
    p = vplan(qwen3_next(), "H200", E, max_model_len=300000)
    assert p.verdict == "fail" and p.error.startswith(
        "ValueError: User-specified max_model_len (300000) is greater"
    )
    # servefit's own range check stays bad input
    with pytest.raises(ServefitError, match="gpu-memory-utilization must be in"):
        vplan(qwen3_next(), "H200", E, gpu_memory_utilization=1.5)


def test_pipeline_parallel_halves_the_block_bytes(next80):
    # get_kv_cache_configs projects the groups per PP worker: PP2 splits the 48 layers 24 / 24,
    # every group (attention: layers 3, 7, ..., 47; GDN: every 3rd GDN layer) keeps 6 of its 12
    # layers on each stage -> 6 x 278,528 B per block at TP4: 50 GiB // 1,671,168 = 32,125
    p = vplan(
        next80,
        "H200",
        E,
        tensor_parallel_size=4,
        pipeline_parallel_size=2,
        kv_cache_memory_bytes=50 * GiB,
    )
    assert p.pools.num_blocks == 50 * GiB // (6 * 278528) == 32125
