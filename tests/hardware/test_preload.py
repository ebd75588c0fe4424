"""Pre-load free memory vs every ground-truth log that shows it (docs/gpus.md, fit table).

Logged values are SGLang "GB" (= GiB), rounded to 2 decimals. Where a case only prints the
"Load weight end" line, free-before = its avail mem + its mem usage.
"""

from __future__ import annotations

import pytest

from servefit.errors import ArgumentError, EngineVersionError, HardwareError
from servefit.hardware.catalog import generic_gpu, get_gpu, with_memory_mib
from servefit.hardware.preload import (
    breakdown,
    custom_all_reduce_on,
    describe,
    pre_load_free_gib,
    pre_load_free_gib_for,
)
from servefit.hardware.spec import GPUSet
from tests.groundtruth import GT

FIT_TOL_GIB = 0.05  # the fitted points (residuals <= 0.02 GiB, docs/gpus.md)
SANITY_TOL_GIB = 0.3  # cases not used for fitting (boot-to-boot spread, README "Tolerance")

# (case id, verbatim line(s) in <case>.txt, gpu, world, tp, engine, logged free GiB)
FITTED = [
    (
        "sgl_qwq32b_4xL4_tp4_g6_12xlarge",
        ["Load weight begin. avail mem=21.63 GB"],
        "l4", 4, 4, "sglang", 21.63,
    ),
    (
        "sgl_qwen38_27b_fp8_1xh100_v0518",
        ["avail mem=50.01 GB, mem usage=28.47 GB."],
        "h100-sxm", 1, 1, "sglang", 50.01 + 28.47,
    ),
    (
        "sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm",
        ["avail mem=258.78 GB, mem usage=28.49 GB."],
        "mi355x", 1, 1, "sglang", 258.78 + 28.49,
    ),
    (
        "sgl_qwen38_27b_fp8_2xmi355x_tp2_v0517rocm",
        ["avail mem=264.75 GB, mem usage=14.49 GB."],
        "mi355x", 2, 2, "sglang", 264.75 + 14.49,
    ),
    (
        "sgl_qwen35_35b_a3b_int4_dflash_1xgb10_extra_buffer",
        ["avail mem=92.51 GB, mem usage=20.44 GB"],
        "gb10", 1, 1, "sglang", 92.51 + 20.44,
    ),
    (
        # vLLM V0: CUDA total 23.58 GiB minus what was used before weights
        # (initial_memory_usage 15.34 GiB − weights 14.9888 GiB).
        "vllm_v0_llama31_8b_1x3090_maxlen20k_v10517",
        ["total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB", "Loading model weights took 14.9888 GB"],
        "rtx-3090", 1, 1, "vllm", 23.58 - (15.34 - 14.9888),
    ),
]  # fmt: skip

# 16 GB-class GPU never named: sanity only, against a 16380 MiB card (RTX 4060 Ti 16 GB class).
SANITY = [
    (
        "sgl_granite40_h_micro_bench1batch_16gb_pr18040",
        "Load weight begin. avail mem=15.24 GB",
        15.24,
    ),
    (
        "sgl_lfm2_700m_bench1batch_16gb_blazingbhavneek",
        "Load weight begin. avail mem=15.33 GB",
        15.33,
    ),
]


@pytest.mark.parametrize(
    "case, lines, gpu, world, tp, engine, logged", FITTED, ids=[c[0] for c in FITTED]
)
def test_fitted_logs(case, lines, gpu, world, tp, engine, logged):
    text = (GT / f"{case}.txt").read_text(encoding="utf-8")
    for line in lines:
        assert line in text
    got = pre_load_free_gib(get_gpu(gpu), world_size=world, tp=tp, engine=engine)
    assert got == pytest.approx(logged, abs=FIT_TOL_GIB)


@pytest.mark.parametrize("case, line, logged", SANITY, ids=[c[0] for c in SANITY])
def test_16gb_class_sanity(case, line, logged):
    assert line in (GT / f"{case}.txt").read_text(encoding="utf-8")
    gpu = generic_gpu("16 GB-class NVIDIA card", 16380)
    assert pre_load_free_gib(gpu, world_size=1, tp=1) == pytest.approx(logged, abs=SANITY_TOL_GIB)


def test_l4_nccl_matches_logged_dist_init():
    # sgl_qwq32b_4xL4_tp4_g6_12xlarge: "Init torch distributed ends. mem usage=0.13 GB"
    b = breakdown(get_gpu("l4"), world_size=4, tp=4)
    assert (b.nccl_mib + b.custom_ar_mib) / 1024 == pytest.approx(0.13, abs=0.01)
    assert b.custom_ar_mib == 0 and "PCIe" in b.custom_ar_note  # "more than two PCIe-only GPUs"


def test_custom_all_reduce_rules():
    h100, l4, r4090 = get_gpu("h100"), get_gpu("l4"), get_gpu("4090")
    assert custom_all_reduce_on(h100, 8)[0]
    assert custom_all_reduce_on(l4, 2)[0]  # two PCIe GPUs are fine
    assert not custom_all_reduce_on(l4, 4)[0]
    assert not custom_all_reduce_on(h100, 3)[0]  # world sizes 2/4/6/8 only
    assert custom_all_reduce_on(r4090, 2)[0]  # SGLang assumes P2P without --enable-p2p-check
    assert not custom_all_reduce_on(r4090, 2, enable_p2p_check=True)[0]
    assert not custom_all_reduce_on(r4090, 2, engine="vllm")[0]
    assert not custom_all_reduce_on(get_gpu("gb10"), 2)[0]
    on = breakdown(h100, world_size=8, tp=8)
    off = breakdown(h100, world_size=8, tp=8, custom_all_reduce=False)
    assert on.free_mib - off.free_mib == -24.0


def test_tp_and_world_size_scaling():
    g = get_gpu("a6000")
    one = pre_load_free_gib(g, world_size=1, tp=1)
    two = pre_load_free_gib(g, world_size=2, tp=2)
    pp2 = pre_load_free_gib(g, world_size=4, tp=2)  # TP2 x PP2: one more NCCL peer
    assert one > two > pp2
    assert one == pytest.approx((49140 - 771) / 1024)


def test_validation():
    g = get_gpu("h100")
    with pytest.raises(ArgumentError):
        pre_load_free_gib(g, world_size=3, tp=2)
    with pytest.raises(ArgumentError):
        pre_load_free_gib(g, world_size=1, tp=0)
    with pytest.raises(EngineVersionError):
        pre_load_free_gib(g, world_size=1, tp=1, engine="tgi")
    with pytest.raises(HardwareError):
        pre_load_free_gib(with_memory_mib(g, 500), world_size=1, tp=1)


def test_gpuset_override_wins():
    g = get_gpu("h200")
    assert pre_load_free_gib_for(GPUSet(g, 2, free_gib_override=130.0), tp=2) == 130.0
    assert pre_load_free_gib_for(GPUSet(g, 2), tp=2) == pre_load_free_gib(g, world_size=2, tp=2)
    with pytest.raises(HardwareError):
        pre_load_free_gib_for(GPUSet(g, 1, free_gib_override=0.0), tp=1)


def test_describe_lists_components():
    text = describe(get_gpu("l4"), world_size=4, tp=4)
    assert "Load weight begin" in text and "23034 MiB" in text
    assert "NCCL buffers (3 peers)" in text and "21.61 GiB" in text
    assert "rocm-smi" in describe(get_gpu("mi355x"), world_size=2, tp=2)
    assert "unified" in describe(get_gpu("spark"), world_size=1, tp=1, engine="vllm")
