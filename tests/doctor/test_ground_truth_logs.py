"""Every log in tests/data/ground-truth, parsed: the facts equal the numbers of that case's `observed` lines.

Expected values are copied from the `observed` strings of cases.jsonl (the test also checks that
each copied string is really in them). A ground-truth file is an excerpt: several cases share one
file (two launches in it), and some files show lines out of order, which splits them into
launches as a real log would not; `launch` names the launch (1-based) that holds the case.
"""

from __future__ import annotations

import pytest

from servefit.doctor.launches import read_log
from tests.groundtruth import CASES, GT

# case id -> (launch, {dotted fact path: value}, [substrings of observed lines the values come from])
EXPECTED: dict[str, tuple[int, dict, list[str]]] = {
    "sgl_granite40_h_micro_bench1batch_16gb_pr18040": (
        1,
        {
            "ranks.0.free_before_weights_gib": 15.24,
            "ranks.0.weights_gib": 5.98,
            "ranks.0.free_after_weights_gib": 9.26,
            "pools.max_mamba_cache_size": 38,
            "pools.conv_state_gib": 0.03,
            "pools.ssm_state_gib": 2.74,
            "pools.kv_tokens": 399740,
            "pools.k_size_gib": 1.52,
            "pools.v_size_gib": 1.52,
            "pools.kv_dtype": "bfloat16",
            "ranks.0.free_after_pools_gib": 3.42,
            "ranks.0.graph_mem_gib": 0.09,
            "ranks.0.free_after_graphs_gib": 2.89,
            "graphs.batch_sizes": [1, 2, 4, 8],
            "pools.max_total_num_tokens": 399740,
            "architecture": "GraniteMoeHybridForCausalLM",
            "ranks.0.rank": "TP0",
        },
        [
            "avail mem=15.24 GB",
            "mem usage=5.98 GB",
            "max_mamba_cache_size: 38",
            "#tokens: 399740",
            "avail mem=3.42 GB",
            "mem usage=0.09 GB. avail mem=2.89 GB",
            "bs [1, 2, 4, 8]",
            "max_total_num_tokens=399740",
        ],
    ),
    "sgl_lfm2_700m_bench1batch_16gb_blazingbhavneek": (
        1,
        {
            "ranks.0.free_before_weights_gib": 15.33,
            "ranks.0.weights_gib": 1.52,
            "pools.max_mamba_cache_size": 85292,
            "pools.conv_state_gib": 4.88,
            "pools.ssm_state_gib": 0.0,
            "pools.kv_tokens": 473854,
            "pools.k_size_gib": 2.71,
            "ranks.0.free_after_pools_gib": 2.43,
            "ranks.0.graph_mem_gib": 0.03,
            "pools.max_total_num_tokens": 473854,
            "architecture": "Lfm2ForCausalLM",
        },
        [
            "avail mem=15.33 GB",
            "mem usage=1.52 GB",
            "max_mamba_cache_size: 85292, conv_state size: 4.88GB",
            "#tokens: 473854, K size: 2.71 GB",
            "avail mem=2.43 GB",
            "mem usage=0.03 GB",
        ],
    ),
    "sgl_qwen38_27b_fp8_1xh100_v0518": (
        1,
        {
            "ranks.0.free_after_weights_gib": 50.01,
            "ranks.0.weights_gib": 28.47,
            "pools.max_mamba_cache_size": 124,
            "pools.conv_state_gib": 0.34,
            "pools.ssm_state_gib": 17.58,
            "pools.kv_tokens": 330323,
            "pools.kv_dtype": "bfloat16",
            "pools.k_size_gib": 10.08,
            "ranks.0.graph_mem_gib": 0.10,
            "ranks.0.free_after_graphs_gib": 8.90,
            "changes.0.new": 24,
            "ready": True,
            "engine.format_family": "sglang-0.5.23",
        },
        [
            "avail mem=50.01 GB, mem usage=28.47 GB",
            "max_mamba_cache_size: 124",
            "ssm_state size: 17.58GB",
            "dtype: torch.bfloat16, #tokens: 330323, K size: 10.08 GB",
            "mem usage=0.10 GB, avail mem=8.90 GB",
            "capped to 24",
        ],
    ),
    "sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm": (
        1,
        {
            "ranks.0.free_after_weights_gib": 258.78,
            "ranks.0.weights_gib": 28.49,
            "pools.max_total_num_tokens": 1543256,
            "pools.chunked_prefill_size": 16384,
            "pools.max_running_requests": 32,
            "pools.context_len": 262144,
            "pools.available_gpu_mem_gib": 77.76,
            "args.mem_fraction_static": 0.85,
            "args.max_running_requests": 32,
        },
        [
            "avail mem=258.78 GB, mem usage=28.49 GB",
            "max_total_num_tokens=1543256",
            "max_running_requests=32",
            "available_gpu_mem=77.76 GB",
        ],
    ),
    "sgl_qwen38_27b_fp8_2xmi355x_tp2_v0517rocm": (
        2,
        {
            "ranks.0.rank": "TP0",
            "ranks.0.free_after_weights_gib": 264.75,
            "ranks.0.weights_gib": 14.49,
            "pools.max_total_num_tokens": 3228418,
            "pools.available_gpu_mem_gib": 75.82,
            "args.tp_size": 2,
        },
        [
            "avail mem=264.75 GB, mem usage=14.49 GB",
            "max_total_num_tokens=3228418",
            "available_gpu_mem=75.82 GB",
        ],
    ),
    "sgl_qwen3_235b_fp8_4xh100_v21348": (
        2,
        {
            "engine.name": "sglang",
            "pools.kv_tokens": 367404,
            "pools.k_size_gib": 8.23,
            "pools.v_size_gib": 8.23,
        },
        ["#tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"],
    ),
    "sgl_qwen3next_80b_thinking_tp4_v10407": (
        1,
        {
            "pools.kv_tokens": 2896645,
            "pools.k_size_gib": 16.57,
            "ranks.0.rank": "TP0",
            "ranks.0.free_after_pools_gib": 13.12,
            "graphs.batch_sizes.34": 256,
        },
        ["#tokens: 2896645, K size: 16.57 GB", "Memory pool end. avail mem=13.12 GB", "248, 256]"],
    ),
    "sgl_qwq32b_4xL4_tp4_g6_12xlarge": (
        1,
        {
            "ranks.0.init_mem_usage_gib": 0.13,
            "ranks.0.free_before_weights_gib": 21.63,
            "ranks.0.weights_gib": 15.54,
            "ranks.0.free_after_weights_gib": 6.09,
            "pools.kv_tokens": 46611,
            "pools.k_size_gib": 1.42,
            "ranks.0.free_after_pools_gib": 2.09,
            "ranks.0.graph_mem_gib": 0.93,
            "ranks.0.free_after_graphs_gib": 0.53,
            "pools.max_total_num_tokens": 46611,
            "pools.chunked_prefill_size": 2048,
            "pools.max_running_requests": 2049,
            "pools.context_len": 131072,
            "engine.format_family": "sglang-before-0.5.9",
            "args.mem_fraction_static": 0.85,
        },
        [
            "mem usage=0.13 GB",
            "avail mem=21.63 GB",
            "avail mem=6.09 GB, mem usage=15.54 GB",
            "#tokens: 46611, K size: 1.42 GB",
            "avail mem=2.09 GB",
            "avail mem=0.53 GB. mem usage=0.93 GB",
            "max_running_requests=2049, context_len=131072",
        ],
    ),
    "sgl_qwen35_35b_a3b_int4_dflash_1xgb10_extra_buffer": (
        1,
        {
            "ranks.0.free_after_weights_gib": 92.51,
            "ranks.0.weights_gib": 20.44,
            "architecture": "Qwen3_5MoeForConditionalGeneration",
        },
        ["avail mem=92.51 GB, mem usage=20.44 GB"],
    ),
    "vllm_qwen3_235b_fp8_4xh100_v21348": (
        1,
        {
            "engine.name": "vllm",
            "ranks.0.kv_available_gib": 8.11,
            "pools.gpu_kv_cache_tokens": 178880,
        },
        ["Available KV cache memory: 8.11 GiB", "GPU KV cache size: 178,880 tokens"],
    ),
    "vllm_qwen36_35b_a3b_nvfp4_1x5090_club612": (
        1,
        {
            "ranks.0.kv_available_gib": 5.98,
            "pools.gpu_kv_cache_tokens": 567978,
            "pools.max_concurrency": 4.33,
            "pools.concurrency_len": 131072,
        },
        [
            "Available KV cache memory: 5.98 GiB",
            "567,978 tokens",
            "131,072 tokens per request: 4.33x",
        ],
    ),
    "vllm_qwen36_27b_int4_2x3090_mtp_club295": (
        1,
        {
            "pools.gpu_kv_cache_tokens": 620944,
            "pools.max_concurrency": 2.37,
            "pools.concurrency_len": 262144,
        },
        ["620,944 tokens", "262,144 tokens per request: 2.37x"],
    ),
    "vllm_qwen36_27b_int4_2x3090_mtp_club294": (
        1,
        {"pools.gpu_kv_cache_tokens": 622408, "pools.max_concurrency": 2.37},
        ["622,408 tokens", "2.37x"],
    ),
    "vllm_qwen36_35b_a3b_nvfp4_wsl_v020": (
        1,
        {
            "ranks.0.weights_gib": 21.86,
            "pools.attention_block_size": 2096,
            "pools.cudagraph_estimate_gib": 0.36,
            "ranks.0.kv_available_gib": 2.95,
            "pools.gpu_kv_cache_tokens": 75456,
            "pools.max_concurrency": 3.87,
            "pools.concurrency_len": 65536,
            "ranks.0.graph_mem_gib": 0.73,
            "engine.version": "0.20.0",
            "args.gpu_memory_utilization": 0.9,
        },
        [
            "Model loading took 21.86 GiB",
            "block size to 2096 tokens",
            "Estimated CUDA graph memory: 0.36 GiB",
            "Available KV cache memory: 2.95 GiB",
            "75,456 tokens",
            "65,536 tokens per request: 3.87x",
            "took 0.73 GiB",
        ],
    ),
    "vllm_v0_r1_distill_qwen14b_2x4090_v13061": (
        1,
        {
            "outcome": "failed",
            "errors.0.kind": "startup_memory",
            "errors.0.numbers.max_model_len": 131072,
            "errors.0.numbers.kv_tokens": 81536,
        },
        ["max seq len (131072)", "stored in KV cache (81536)"],
    ),
    "vllm_qwen3coder480b_fp8_8xh20_dp8ep_util090_recipes12": (
        1,
        {
            "outcome": "failed",
            "errors.0.numbers.max_model_len": 262144,
            "errors.0.numbers.needed_gib": 62.0,
            "errors.0.numbers.available_gib": 48.66,
            "errors.0.numbers.estimated_max_len": 205728,
        },
        [
            "max seq len (262144)",
            "(62.00 GiB KV cache is needed",
            "memory (48.66 GiB)",
            "length is 205728",
        ],
    ),
    "vllm_qwen3coder480b_fp8_8xh20_dp8ep_util095_recipes12": (
        2,
        {
            "outcome": "failed",
            "errors.0.numbers.available_gib": 55.65,
            "errors.0.numbers.estimated_max_len": 235296,
        },
        ["memory (55.65 GiB)", "length is 235296"],
    ),
    "vllm_kimi_linear_48b_awq_2x3090_v28228": (
        1,
        {
            "ranks.0.rank": "TP0",
            "ranks.0.kv_available_gib": 2.30,
            "pools.padding_layers": 1,
            "pools.gpu_kv_cache_tokens": 75840,
            "pools.max_concurrency": 2.48,
            "pools.concurrency_len": 120000,
        },
        [
            "Available KV cache memory: 2.30 GiB",
            "Add 1 padding layers",
            "75,840 tokens",
            "120,000 tokens per request: 2.48x",
        ],
    ),
    "vllm_v0_llama31_8b_1x3090_maxlen20k_v10517": (
        1,
        {
            "ranks.0.weights_gib": 14.9888,
            "pools.profile_total_gpu_gib": 23.58,
            "pools.profile_kv_cache_gib": 3.81,
            "pools.gpu_memory_utilization": 0.90,
            "pools.num_gpu_blocks": 1952,
            "pools.max_concurrency": 1.56,
            "pools.concurrency_len": 20000,
        },
        [
            "took 14.9888 GB",
            "total_gpu_memory=23.58GiB",
            "kv_cache_size=3.81GiB",
            "GPU blocks: 1952",
            "20000 tokens per request: 1.56x",
        ],
    ),
    "vllm_v0_llama31_8b_1x3090_maxlen29k_fail_v10517": (
        2,
        {
            "pools.profile_kv_cache_gib": 2.89,
            "pools.num_gpu_blocks": 1478,
            "pools.max_concurrency": 0.82,
            "outcome": "failed",
            "errors.0.numbers.max_model_len": 29000,
            "errors.0.numbers.kv_tokens": 23648,
        },
        [
            "kv_cache_size=2.89GiB",
            "GPU blocks: 1478",
            "0.82x",
            "max seq len (29000)",
            "KV cache (23648)",
        ],
    ),
    "vllm_v1_llama31_70b_w8a8_1gpu_pr12569": (
        1,
        {
            "ranks.0.weights_gib": 67.7229,
            "pools.num_gpu_blocks": 1381,
            "pools.max_concurrency": 10.79,
            "pools.concurrency_len": 2048,
        },
        ["took 67.7229 GB", "GPU blocks: 1381", "2048 tokens per request: 10.79x"],
    ),
    "vllm_qwen35_0p8b_offline_1xa100_v028": (
        1,
        {
            "ranks.0.weights_gib": 1.72,
            "pools.attention_block_size": 544,
            "ranks.0.kv_available_gib": 67.08,
            "pools.gpu_kv_cache_tokens": 5788118,
            "pools.max_concurrency": 22.08,
            "engine.version": "0.28.0",
        },
        [
            "Model loading took 1.72 GiB",
            "block size to 544",
            "67.08 GiB",
            "5,788,118 tokens",
            "22.08x",
        ],
    ),
    "vllm_qwen38_27b_offline_1xa100_v028": (
        2,
        {
            "ranks.0.weights_gib": 51.1,
            "ranks.0.kv_available_gib": 18.61,
            "pools.gpu_kv_cache_tokens": 298275,
        },
        ["Model loading took 51.1 GiB", "18.61 GiB", "298,275 tokens"],
    ),
    "vllm_qwen36_27b_int4_2x3090_dflash_noviz_club95": (
        1,
        {
            "ranks.0.kv_available_gib": 10.16,
            "pools.gpu_kv_cache_tokens": 200769,
            "pools.max_concurrency": 1.00,
        },
        ["10.16 GiB", "200,769 tokens", "1.00x"],
    ),
    "vllm_qwen36_27b_int4_2x3090_dflash_noviz_club76": (
        1,
        {
            "ranks.0.kv_available_gib": 10.36,
            "pools.gpu_kv_cache_tokens": 204615,
            "pools.max_concurrency": 1.02,
        },
        ["10.36 GiB", "204,615 tokens", "1.02x"],
    ),
    "vllm_qwen35_27b_1xh20_dummy_v40691": (
        1,
        {
            "pools.gpu_kv_cache_tokens": 290864,
            "pools.max_concurrency": 33.04,
            "pools.concurrency_len": 32768,
        },
        ["290,864 tokens", "32,768 tokens per request: 33.04x"],
    ),
    "vllm_qwen3coder30b_fp8_pp2_5070ti_5090d_v34076": (
        1,
        {
            "errors.0.kind": "startup_memory",
            "errors.0.at.rank": "DP0",
            "errors.0.numbers.needed_gib": 24.0,
            "errors.0.numbers.available_gib": 3.18,
            "errors.0.numbers.estimated_max_len": 34736,
        },
        ["(24.0 GiB KV cache is needed", "memory (3.18 GiB)", "length is 34736"],
    ),
    "vllm_nim_nemotron120b_2xh100_maxseqs_FAIL_retail95": (
        1,
        {"errors.0.numbers.max_num_seqs": 1024, "errors.0.numbers.blocks": 524},
        ["max_num_seqs (1024) exceeds available Mamba cache blocks (524)"],
    ),
    "vllm_minimax_m27_awq_2xdgxspark_tp2_spark396": (
        1,
        {
            "ranks.0.kv_available_gib": 22.5,
            "errors.0.numbers.max_model_len": 196608,
            "errors.0.numbers.needed_gib": 23.25,
            "errors.0.numbers.available_gib": 22.5,
            "errors.0.numbers.estimated_max_len": 190272,
        },
        [
            "Available KV cache memory: 22.5 GiB",
            "max seq len (196608)",
            "23.25 GiB KV cache is needed",
            "memory (22.5 GiB)",
            "length is 190272",
        ],
    ),
    "vllm_qwen3next_80b_instruct_2xh200_tp2_v0102": (
        1,
        {
            "pools.attention_block_size": 544,
            "pools.mamba_page_padding_pct": 1.49,
            "ranks.0.rank": "TP0",
            "ranks.0.weights_gib": 74.2812,
            "ranks.0.kv_available_gib": 44.59,
            "pools.gpu_kv_cache_tokens": 973760,
            "pools.max_concurrency": 14.77,
            "ranks.1.graph_mem_gib": 2.37,
            "engine.version": "0.10.2",
            "changes.0.arg": "enable_prefix_caching",
        },
        [
            "block size to 544",
            "by 1.49%",
            "took 74.2812 GiB",
            "44.59 GiB",
            "973,760 tokens",
            "14.77x",
            "took 2.37 GiB",
        ],
    ),
    "vllm_nemotron3_nano_4b_fp8_1xgb10_util015_nv2601": (
        1,
        {
            "changes.0.new": "float16",
            "pools.attention_block_size": 992,
            "pools.mamba_page_padding_pct": 0.35,
            "ranks.0.weights_gib": 4.9054,
            "ranks.0.kv_available_gib": 11.15,
            "pools.padding_layers": 3,
            "pools.gpu_kv_cache_tokens": 208320,
            "pools.max_concurrency": 98.20,
            "ranks.0.graph_mem_gib": 1.00,
            "args.gpu_memory_utilization": 0.15,
            "architecture": "NemotronHForCausalLM",
        },
        [
            "'float16'",
            "block size to 992",
            "by 0.35%",
            "took 4.9054 GiB",
            "11.15 GiB",
            "Add 3 padding layers",
            "208,320 tokens",
            "98.20x",
            "took 1.00 GiB",
        ],
    ),
}

# The one observed line of a case that is the author's paraphrase, not an engine line.
NOT_A_LOG_LINE = {"vllm_qwen38_27b_offline_1xa100_v028": "`attention block size 784`"}


def _get(obj, path: str):
    for part in path.split("."):
        obj = (
            obj[int(part)]
            if isinstance(obj, list)
            else obj[part]
            if isinstance(obj, dict)
            else getattr(obj, part)
        )
    return obj


def test_every_ground_truth_case_is_covered():
    assert set(EXPECTED) == set(CASES)


@pytest.mark.parametrize("case_id", sorted(EXPECTED))
def test_facts_equal_the_observed_lines(case_id):
    launch_no, facts, sources = EXPECTED[case_id]
    observed = " ".join(CASES[case_id]["observed"])
    for s in sources:  # the expected numbers are the observed ones
        assert s in observed, f"{case_id}: {s!r} is not in the observed lines"
    log = read_log(GT / f"{case_id}.txt")
    launch = next(x for x in log.launches if x.index == launch_no)
    for path, want in facts.items():
        got = _get(launch, path)
        if isinstance(want, float):
            assert got == pytest.approx(want, abs=1e-9), f"{case_id}: {path}"
        else:
            assert got == want, f"{case_id}: {path}"
