#!/usr/bin/env python3
"""Fit the constants of servefit/engines/vllm/profiling.py to the vLLM ground-truth logs.

    python tools/fit_vllm_profile.py          # prints the three constants and the residuals

vLLM measures its non-KV memory at start-up; servefit models it as
    weights + max(sampler, forward, encoder) + non-torch [+ CUDA-graph estimate]
(profiling.py). Three logs pin the three unknowns, each case's "Available KV cache memory" line
giving one equation  requested - available - weights - graphs = activation + non-torch:

  (a) vllm_qwen3next_80b_instruct_2xh200_tp2_v0102 -- 1024 seqs x 151,936 vocab, the sampler
      phase; 0.10.2 subtracts no graph estimate; weights from its "Model loading took" line.
  (c) vllm_qwen38_27b_offline_1xa100_v028 -- 256 seqs x 248,320 vocab (offline LLM defaults on
      an A100), weights from its log; (a) - (c) gives the sampler slope, then the constant.
  (b) vllm_qwen36_35b_a3b_nvfp4_1x5090_club612 -- one sequence, so the image-encoder phase is
      the peak; weights modelled from the bundled nvidia/Qwen3.6-35B-A3B-NVFP4 config.

Requested memory is ceil(CUDA total x utilization), the CUDA total from
servefit/engines/vllm/device.py. Run from the repository root with the package installed.
"""

from __future__ import annotations

import math

from servefit.engines.vllm import device, profiling
from servefit.hardware.catalog import get_gpu
from servefit.model.inventory import load_model
from servefit.model.weights import weights_per_rank

GiB = 1 << 30


def requested(gpu: str, util: float) -> float:
    return math.ceil(device.cuda_total_gib(get_gpu(gpu)) * GiB * util) / GiB


def main() -> int:
    next80 = load_model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    q27 = load_model("Qwen/Qwen3.5-27B")
    nv35 = load_model("nvidia/Qwen3.6-35B-A3B-NVFP4")

    # (a) H200, TP2, util 0.9 (0.10.2 default), available 44.59, weights 74.2812 (logged)
    rest_a = requested("H200", 0.9) - 44.59 - 74.2812
    n_a = 1024 * next80.vocab_size
    # (c) A100 80GB, util 0.92, available 18.61, weights 51.1 (logged); graphs as the 0.28 log
    # prints them (PIECEWISE=51, FULL=35), first capture from the WSL log
    cg_c = profiling.cudagraph_bytes({"PIECEWISE": 51, "FULL": 35}) / GiB
    rest_c = requested("A100 80GB", 0.92) - 18.61 - 51.1 - cg_c
    n_c = 256 * q27.vocab_size
    slope = (rest_a - rest_c) * GiB / (n_a - n_c)
    non_torch = rest_a - slope * n_a / GiB
    # (b) RTX 5090, util 0.92, available 5.98, one PIECEWISE(2) + FULL(1) graph set
    w_b = weights_per_rank(nv35, tp=1, pp=1, ep=1).target_gib
    cg_b = profiling.cudagraph_bytes({"PIECEWISE": 2, "FULL": 1}) / GiB
    enc_b = requested("RTX 5090", 0.92) - 5.98 - w_b - cg_b - non_torch
    unit = profiling.encoder_bytes(nv35) / profiling.ENCODER_SCALE / GiB
    print(f"SAMPLER_BYTES_PER_LOGIT = {slope:.1f}")
    print(f"NON_TORCH_GIB           = {non_torch:.3f}")
    print(f"ENCODER_SCALE           = {enc_b / unit:.3f}   (encoder phase {enc_b:.2f} GiB)")
    print(
        f"current: {profiling.SAMPLER_BYTES_PER_LOGIT}, {profiling.NON_TORCH_GIB}, "
        f"{profiling.ENCODER_SCALE}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
