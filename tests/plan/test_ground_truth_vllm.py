"""Accuracy of the vLLM profiles on the vLLM ground-truth logs (tests/data/ground-truth).

Each expected number is parsed from the case's own `observed` log lines in cases.jsonl; the
inputs are the case's GPU, flags and engine version (each release planned with its own
profile: 0.10.2, 0.20.0, 0.24.0, 0.28.0). Tolerances (issue "vLLM exact memory plan"): attention block
size exact, "Available KV cache memory" within 3 %, blocks and maximum concurrency within 2 %.

Three of these logs also fit the constants of the non-KV memory model (tools/
fit_vllm_profile.py; servefit/engines/vllm/profiling.py): the Qwen3-Next H200 and Qwen3.8-27B
A100 cases fix the sampler slope and the non-torch constant, the RTX 5090 case the encoder scale.
Their available-memory checks therefore hold by construction; the checks that are not fitted are
the block sizes, the block and concurrency arithmetic on each case's own logged memory, the
modelled-weights variants, and the Qwen3.5-0.8B case (test_fitted_model_transfers_to_qwen35_0p8b).

Cases not used, and why:
  vllm_qwen3_235b_fp8_4xh100_v21348, vllm_qwen3coder480b_fp8_8xh20_dp8ep_util{090,095}_recipes12,
  vllm_qwen3coder30b_fp8_pp2_5070ti_5090d_v34076: no config.json for these checkpoints in
      the bundled catalog (the recipes12 pair fixes the HBM CUDA-total constant instead,
      servefit/engines/vllm/device.py);
  vllm_v0_llama31_8b_1x3090_maxlen{20k,29k_fail}_v10517, vllm_v0_r1_distill_qwen14b_2x4090_v13061:
      the legacy V0 engine ("Memory profiling results", "# GPU blocks"), not mirrored (the 20k
      log fixes the GDDR CUDA-total constant);
  vllm_v1_llama31_70b_w8a8_1gpu_pr12569: V1 alpha of January 2025, GPU not stated, no config for
      the w8a8 checkpoint;
  vllm_qwen36_27b_int4_2x3090_mtp_club{294,295}, _dflash_noviz_club{95,76}: AutoRound INT4
      checkpoint without a config (weights unknown); 294/295 print no available memory, 95/76
      add a DFlash draft whose config is not given;
  vllm_qwen35_27b_1xh20_dummy_v40691: model ambiguous (27B command, 35B-A3B environment), H20
      variant unknown, no available-memory line;
  vllm_kimi_linear_48b_awq_2x3090_v28228: no config for the Kimi-Linear checkpoint (the bundled
      kimi_linear file holds transformers defaults), gpu_memory_utilization ambiguous;
  vllm_nemotron3_nano_4b_fp8_1xgb10_util015_nv2601: no config for Nemotron-3-Nano-4B;
  vllm_minimax_m27_awq_2xdgxspark_tp2_spark396: no config for MiniMax-M2.7;
  vllm_nim_nemotron120b_2xh100_maxseqs_FAIL_retail95: NIM's TP, max_model_len, utilization and
      checkpoint are hidden (and the bundled Nemotron-3-Super FP8 config has no
      quantization_config, so its weights read as bf16).
"""

from __future__ import annotations

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.engines.vllm import device, profiling
from servefit.engines.vllm.common import cdiv
from servefit.hardware.catalog import get_gpu
from servefit.model.inventory import load_model
from tests.groundtruth import observed

GiB = 1 << 30


def number(text: str) -> float:
    return float(text.replace(",", ""))


AVAIL = r"Available KV cache memory: (?P<gib>[\d.]+) GiB"
CONC = r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x"
CONC_028 = r"concurrency: (?P<x>[\d.]+)x"
TOKENS = r"GPU KV cache size: (?P<tok>[\d,]+) tokens"
BLOCK = r"Setting attention block size to (?P<block>\d+) tokens"
LOADED = r"Model loading took (?P<w>[\d.]+) GiB"


# --------------------------------------------------------------------------------------------
# vllm_qwen36_35b_a3b_nvfp4_1x5090_club612 -- v0.24.0, the mirrored release itself
# --------------------------------------------------------------------------------------------

CLUB612 = "vllm_qwen36_35b_a3b_nvfp4_1x5090_club612"


@pytest.fixture(scope="module")
def club612():
    # non-default args of the case: max_model_len 131072, kv_cache_dtype fp8, prefix caching on,
    # max_num_batched_tokens 8192, max_num_seqs 1, chunked prefill on, quantization modelopt
    # (the bundled nvidia/Qwen3.6-35B-A3B-NVFP4 config), limit_mm_per_prompt image 2 / audio 0
    return plan(
        PlanRequest(
            model="nvidia/Qwen3.6-35B-A3B-NVFP4",
            gpu="RTX 5090",
            engine="vllm==0.24.0",
            args={
                "max_model_len": 131072,
                "kv_cache_dtype": "fp8",
                "enable_prefix_caching": True,
                "max_num_batched_tokens": 8192,
                "max_num_seqs": 1,
                "enable_chunked_prefill": True,
                "limit_mm_per_prompt": {"image": 2, "audio": 0},
            },
        )
    )


def test_club612_available_memory_and_concurrency(club612):
    p = club612
    assert p.engine.profile == "0.24.0" and p.engine.note is None and p.verdict == "ok"
    assert p.pools.budget_gib == pytest.approx(float(observed(CLUB612, AVAIL)["gib"]), rel=0.03)
    conc = observed(CLUB612, CONC)
    assert p.pools.context_len == number(conc["len"])
    assert p.pools.max_concurrency == pytest.approx(float(conc["x"]), rel=0.02)
    # blocks implied by the log: concurrency x blocks per request. 10 attention + 30 GDN layers
    # -> 1 attention + 3 Mamba groups; fp8 KV: 2 heads x 512 x 1 B = 1,024 B/token; GDN page
    # 3 x 8192 x 2 + 32 x 128 x 128 x 4 (mamba_ssm_dtype float32) = 2,146,304 B -> block
    # 16 x cdiv(2,146,304, 16,384) = 2,096; per request cdiv(131,072, 2,096) + 3 x 2 (align) = 69
    assert p.pools.block_size == 2096
    implied = float(conc["x"]) * (cdiv(131072, 2096) + 3 * 2)
    assert p.pools.num_blocks == pytest.approx(implied, rel=0.02)
    assert p.pools.mamba_blocks == p.pools.num_blocks
    # 0.24.0 logs tokens = int(concurrency x max_model_len) on its own line
    assert p.pools.max_total_num_tokens == pytest.approx(
        number(observed(CLUB612, TOKENS)["tok"]), rel=0.02
    )
    assert f"GPU KV cache size: {p.pools.max_total_num_tokens:,} tokens" in p.log_lines


# --------------------------------------------------------------------------------------------
# vllm_qwen3next_80b_instruct_2xh200_tp2_v0102 -- v0.10.2
# --------------------------------------------------------------------------------------------

NEXT = "vllm_qwen3next_80b_instruct_2xh200_tp2_v0102"


def _next80(calibrated: bool):
    # The Instruct and Thinking checkpoints share every config field that sizes memory; the
    # bundled config is the Thinking one. Flags: TP2 only; the 0.10.2 profile's own defaults
    # (utilization 0.9, no CUDA-graph estimate, prefix caching off for hybrids) do the rest.
    kw = {"measured_weights_gib": float(observed(NEXT, LOADED)["w"])} if calibrated else {}
    return plan(
        PlanRequest(
            model="Qwen/Qwen3-Next-80B-A3B-Thinking",
            gpu="H200",
            engine="vllm==0.10.2",
            args={"tensor_parallel_size": 2},
            **kw,
        )
    )


@pytest.mark.parametrize("calibrated", [False, True])
def test_qwen3next_h200(calibrated):
    p = _next80(calibrated)
    assert p.engine.profile == "0.10.2" and p.engine.note is None
    assert p.pools.block_size == int(observed(NEXT, BLOCK)["block"])  # 544
    assert observed(NEXT, r"Padding mamba page size by [\d.]+%")[0] in " ".join(p.log_lines)
    assert p.pools.budget_gib == pytest.approx(float(observed(NEXT, AVAIL)["gib"]), rel=0.03)
    conc = observed(NEXT, CONC)
    assert p.pools.max_concurrency == pytest.approx(float(conc["x"]), rel=0.02)
    # 0.10.2 logs the old token figure num_blocks // len(groups) x block_size
    # (reference §1.6): 973,760 = 1,790 x 544 -> num_blocks in [7,160, 7,163]
    logged = number(observed(NEXT, TOKENS)["tok"])
    assert p.pools.num_blocks // 4 * 544 == pytest.approx(logged, rel=0.02)
    assert p.pools.num_blocks == pytest.approx(logged / 544 * 4, rel=0.02)


# --------------------------------------------------------------------------------------------
# vllm_qwen38_27b_offline_1xa100_v028 -- v0.28.0
# --------------------------------------------------------------------------------------------

A100 = "vllm_qwen38_27b_offline_1xa100_v028"


@pytest.mark.parametrize("calibrated", [False, True])
def test_qwen38_27b_a100(calibrated):
    # "Qwen3.8-27B" is the Qwen3_5ForConditionalGeneration architecture (case notes); the
    # Qwen3.5-27B config is used for its shapes (assumed, as in test_ground_truth_sglang.py).
    # Offline LLM(...) defaults on an A100: get_batch_defaults LLM_CLASS -> 8192 tokens, 256
    # seqs; 0.28.0 has prefix caching on for hybrids (PR #50991), which the logged 1.14x needs
    # (align mode, 2 blocks per Mamba group).
    kw = {"measured_weights_gib": float(observed(A100, LOADED)["w"])} if calibrated else {}
    p = plan(
        PlanRequest(
            model="Qwen/Qwen3.5-27B",
            gpu="A100 80GB",
            engine="vllm==0.28.0",
            args={
                "max_num_batched_tokens": 8192,
                "max_num_seqs": 256,
                "enable_prefix_caching": True,
            },
            **kw,
        )
    )
    assert p.engine.profile == "0.28.0"
    # the case quotes "`attention block size 784`(pad 0.13%)"
    assert p.pools.block_size == int(observed(A100, r"attention block size (?P<b>\d+)")["b"])
    assert "Padding mamba page size by 0.13%" in " ".join(p.log_lines)
    assert p.pools.budget_gib == pytest.approx(float(observed(A100, AVAIL)["gib"]), rel=0.03)
    x = float(observed(A100, CONC_028)["x"])
    assert p.pools.max_concurrency == pytest.approx(x, rel=0.02)
    assert p.pools.max_total_num_tokens == pytest.approx(
        number(observed(A100, TOKENS)["tok"]), rel=0.02
    )


# --------------------------------------------------------------------------------------------
# vllm_qwen36_35b_a3b_nvfp4_wsl_v020 -- v0.20.0, WSL (GPU not stated)
# --------------------------------------------------------------------------------------------

WSL = "vllm_qwen36_35b_a3b_nvfp4_wsl_v020"


def test_wsl_block_size_and_pool_arithmetic_on_the_logged_memory():
    # The GPU (and so the budget) is unknown; the block arithmetic is checked on the log's own
    # "Available KV cache memory" (passed as --kv-cache-memory-bytes). The RedHatAI NVFP4
    # checkpoint has no bundled config; nvidia/Qwen3.6-35B-A3B-NVFP4 has the same layer shapes
    # and NVFP4 weights (bf16 weights, 65 GiB, would not even load on a 32 GB card).
    avail = float(observed(WSL, AVAIL)["gib"])
    p = plan(
        PlanRequest(
            model="nvidia/Qwen3.6-35B-A3B-NVFP4",
            gpu="RTX 5090",
            engine="vllm==0.20.0",
            args={
                "max_model_len": 65536,
                "kv_cache_dtype": "fp8_e4m3",
                "enable_prefix_caching": True,
                "max_num_batched_tokens": 8192,
                "max_num_seqs": 1,
                "max_cudagraph_capture_size": 1,
                "kv_cache_memory_bytes": int(avail * GiB),
            },
        )
    )
    assert p.pools.block_size == int(observed(WSL, BLOCK)["block"])  # 2096
    assert observed(WSL, BLOCK)[0] in " ".join(p.log_lines)
    # GDN page == 2096 x 1,024 exactly: the log has no "Padding mamba page size" line either
    assert not any(line.startswith("Padding mamba page size") for line in p.log_lines)
    assert p.pools.max_concurrency == pytest.approx(float(observed(WSL, CONC)["x"]), rel=0.02)
    # 0.20.0 still logs num_blocks // 4 groups x block: 147 // 4 x 2,096 = 75,456
    logged = number(observed(WSL, TOKENS)["tok"])
    assert p.pools.num_blocks // 4 * 2096 == pytest.approx(logged, rel=0.02)


def test_fitted_model_transfers_to_qwen35_0p8b():
    """vllm_qwen35_0p8b_offline_1xa100_v028 was not used in the fit. Its config is not bundled,
    so the non-KV model is applied by hand: the Qwen3.5 vocabulary (248,320, every Qwen3.5 config
    in the catalog), 256 seqs (offline defaults on an A100), the logged weights and graph counts;
    the sampler is taken as the largest phase, as it is for the 27B's larger vision tower."""
    case = "vllm_qwen35_0p8b_offline_1xa100_v028"
    weights = float(observed(case, r"Model loading took (?P<w>[\d.]+) GiB")["w"])
    graphs = observed(case, r"PIECEWISE=(?P<p>\d+) \(largest=\d+\), FULL=(?P<f>\d+)")
    requested = device.cuda_total_gib(get_gpu("A100 80GB")) * 0.92
    vocab = load_model("Qwen/Qwen3.5-9B").vocab_size
    predicted = (
        requested
        - weights
        - profiling.sampler_bytes(256, vocab) / GiB
        - profiling.NON_TORCH_GIB
        - profiling.cudagraph_bytes({"PIECEWISE": int(graphs["p"]), "FULL": int(graphs["f"])}) / GiB
    )
    assert predicted == pytest.approx(float(observed(case, AVAIL)["gib"]), rel=0.03)
