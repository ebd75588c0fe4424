"""How far servefit's models of the engines' measured terms are from real starts.

Each term an engine measures at start-up and servefit models cold has its residual here,
logged minus modelled, on every real log that prints it (tests/data/ground-truth; the seed
case's tests/doctor/logs/sglang_0_5_9_seed_085_fail.log). A log the term's constants were fitted
on is marked: its residual is ~0 by construction and says nothing about other machines. The
band of a cold plan (_plan/band.py) is the largest residual of each term, fitted or not.
tests/engines/test_residuals.py recomputes every value from the logs: a model change that moves
one fails there by name.
"""

from __future__ import annotations

from servefit.frozen import frozen


@frozen
class Residual:
    """logged - modelled, per log; `relative`: as a fraction of the modelled term."""

    term: str
    values: dict[str, float]
    fitted_on: frozenset[str]
    relative: bool = False

    @property
    def bound(self) -> float:
        return max(abs(v) for v in self.values.values())

    @property
    def held_out(self) -> dict[str, float]:
        return {k: v for k, v in self.values.items() if k not in self.fitted_on}


# SGLang "Load weight begin. avail mem" vs hardware/preload.py (CUDA context, NCCL, custom
# all-reduce). The H100 and MI355X logs fixed those constants; the A6000 pair of the seed did not.
SGLANG_FREE_BEFORE_WEIGHTS_GIB = Residual(
    term="free memory before the weights (GiB)",
    values={
        "sgl_qwen38_27b_fp8_1xh100_v0518": 0.0,
        "sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm": 0.0,
        "sgl_qwen38_27b_fp8_2xmi355x_tp2_v0517rocm": 0.0,
        "sglang_0_5_9_seed_085_fail": -0.239,  # TP 2 on 2x RTX A6000: min(46.93, 47.05) vs 47.169
    },
    fitted_on=frozenset(
        {
            "sgl_qwen38_27b_fp8_1xh100_v0518",
            "sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm",
            "sgl_qwen38_27b_fp8_2xmi355x_tp2_v0517rocm",
        }
    ),
)

# The weights as the engine reported them ("Load weight end ... mem usage", "Model loading
# took") vs model/weights.py, from the checkpoint's config: nothing fitted.
WEIGHTS_FRACTION = Residual(
    term="weights (fraction of the modelled weights)",
    values={
        "sgl_qwen38_27b_fp8_1xh100_v0518": 0.0058,  # 28.47 vs 28.305
        "sgl_qwen38_27b_fp8_1xmi355x_tp1_v0517rocm": 0.0065,  # 28.49 vs 28.305
        "sgl_qwen38_27b_fp8_2xmi355x_tp2_v0517rocm": 0.0237,  # 14.49 vs 14.155 (ROCm, TP 2)
        "sglang_0_5_9_seed_085_fail": 0.0004,  # 25.49 vs 25.480
        "vllm_qwen3next_80b_instruct_2xh200_tp2_v0102": 0.0017,  # 74.2812 vs 74.156
        "vllm_qwen38_27b_offline_1xa100_v028": 0.0028,  # 51.1 vs 50.956
    },
    fitted_on=frozenset(),
    relative=True,
)

# vLLM's profiling run (activation peak + memory outside torch + CUDA-graph estimate) vs
# engines/vllm/profiling.py, as a fraction of the modelled activation peak: the doctor's
# correction (calibration/apply.py) over that peak. Three of the four logs fixed the constants.
VLLM_NONKV_FRACTION = Residual(
    term="vLLM profiling run (fraction of the modelled activation peak)",
    values={
        "vllm_qwen36_35b_a3b_nvfp4_1x5090_club612": 0.0,
        "vllm_qwen3next_80b_instruct_2xh200_tp2_v0102": 0.0001,
        "vllm_qwen38_27b_offline_1xa100_v028": 0.0001,
        "vllm_qwen3coder480b_fp8_8xh20_dp8ep_util090_recipes12": 0.3891,  # +2.667 GiB of 6.85
    },
    fitted_on=frozenset(
        {
            "vllm_qwen36_35b_a3b_nvfp4_1x5090_club612",
            "vllm_qwen3next_80b_instruct_2xh200_tp2_v0102",
            "vllm_qwen38_27b_offline_1xa100_v028",
        }
    ),
    relative=True,
)
