"""What vLLM's profiling run measures, as a model fitted to real start-up logs.

vLLM does not compute its non-KV memory, it measures it (vllm/v1/worker/gpu_worker.py:
Worker.determine_available_memory): a dummy forward of `max_num_batched_tokens` tokens, the
multimodal encoder on its largest dummy item, and the sampler on `max_num_seqs` requests run
inside `memory_profiling`, whose torch peak is the "activation" term; the memory that appears
outside torch's allocator meanwhile is the "non-torch" term; since 0.21 the CUDA-graph memory
is estimated by capturing the two largest graphs per mode and subtracted too. None of this can
be read from the engine's code, so servefit models it with terms that follow what each phase
allocates, and constants fitted to the ground-truth logs (docs/engines/vllm-0.24.0.md
"Non-KV memory"):

    activation = max(encoder phase, forward phase, sampler phase)   (they run one after the other)
      sampler  = SAMPLER_BYTES_PER_LOGIT x max_num_seqs x vocab      (last PP rank)
      forward  = max_num_batched_tokens x 2 B x (4 x hidden + the layer's widest FFN tensors)
      encoder  = ENCODER_SCALE x patches x 2 B x (4 x vision hidden + 2 x vision intermediate),
                 patches = 16384 image tokens x spatial_merge_size^2 (Qwen-VL vision towers)
    non-torch = NON_TORCH_GIB
    CUDA-graph estimate = CUDAGRAPH_FIRST_GIB + 1 MiB x (graphs - modes)   (the engine's floor
                 of 1 MiB per graph after the first, gpu_model_runner.py:profile_cudagraph_memory)
"""

from __future__ import annotations

from servefit.frozen import frozen
from servefit.model.cache import by_identity
from servefit.model.layers import DenseMLP, MoE
from servefit.model.spec import ModelSpec
from servefit.units import GiB, MiB

# Fitted by tools/fit_vllm_profile.py (docs/engines/vllm-0.24.0.md, "Non-KV memory"):
# vllm_qwen3next_80b_instruct_2xh200_tp2_v0102 (1024 seqs x 151,936 vocab, no graph estimate) and
# vllm_qwen38_27b_offline_1xa100_v028 (256 seqs x 248,320 vocab) fix the sampler slope and the
# non-torch constant; vllm_qwen36_35b_a3b_nvfp4_1x5090_club612 (1 seq: the encoder dominates)
# fixes the encoder scale.
SAMPLER_BYTES_PER_LOGIT = 47.3
NON_TORCH_GIB = 0.094
ENCODER_SCALE = 1.393
# vllm_qwen36_35b_a3b_nvfp4_wsl_v020: "Estimated CUDA graph memory: 0.36 GiB total" for one
# PIECEWISE and one FULL graph of one token.
CUDAGRAPH_FIRST_GIB = 0.36

# Qwen2/2.5/3/3.5-VL image processors: max_pixels = 16384 x 32 x 32, i.e. 16384 tokens per image,
# which is the encoder budget vllm_qwen36_35b_a3b_nvfp4_wsl_v020 logs ("Encoder cache will be
# initialized with a budget of 16384 tokens, and profiled with 1 image items").
MAX_IMAGE_TOKENS = 16384


@frozen
class NonKV:
    """The non-KV memory of one rank, GiB, and its parts."""

    weights: float
    activation: float
    activation_phase: str  # "sampler" | "forward" | "encoder"
    sampler: float
    forward: float
    encoder: float
    non_torch: float
    cudagraph: float  # the estimate (whether or not the engine subtracts it)
    # a calibration's measured-minus-modelled non-KV memory (MemoryInputs.nonkv_correction_gib)
    correction: float = 0.0

    def total(self, cudagraph_applied: bool) -> float:
        return (
            self.weights
            + self.activation
            + self.non_torch
            + (self.cudagraph if cudagraph_applied else 0.0)
            + self.correction
        )


def sampler_bytes(max_num_seqs: int, vocab: int) -> float:
    return SAMPLER_BYTES_PER_LOGIT * max_num_seqs * vocab


def _ffn_elems(model: ModelSpec, tp: int) -> int:
    return by_identity(model, ("ffn_elems", tp), lambda: _widest_ffn(model, tp))


def _widest_ffn(model: ModelSpec, tp: int) -> int:
    widest = 0
    for layer in model.layers:
        ffn = layer.ffn
        if isinstance(ffn, DenseMLP):
            widest = max(widest, 3 * ffn.intermediate_size // tp + model.hidden_size)
        elif isinstance(ffn, MoE):
            n = ffn.expert_intermediate_size // tp
            widest = max(widest, ffn.experts_per_token * (3 * n + model.hidden_size))
    return widest


def forward_bytes(model: ModelSpec, tokens: int, tp: int) -> float:
    return tokens * 2.0 * (4 * model.hidden_size + _ffn_elems(model, tp))


def encoder_bytes(model: ModelSpec) -> float | None:
    """Peak of the dummy image through a Qwen-VL-style vision tower; None when the tower's shape
    is not one servefit models (then the phase is left out, with a warning)."""
    vc = model.vision_config or {}
    try:
        hidden, inter = int(vc["hidden_size"]), int(vc["intermediate_size"])
        merge = int(vc.get("spatial_merge_size", 2))
    except (KeyError, TypeError, ValueError):
        return None
    patches = MAX_IMAGE_TOKENS * merge * merge
    return ENCODER_SCALE * patches * 2.0 * (4 * hidden + 2 * inter)


def cudagraph_bytes(graphs_per_mode: dict[str, int]) -> float:
    graphs = sum(graphs_per_mode.values())
    if graphs == 0:
        return 0.0
    modes = sum(1 for n in graphs_per_mode.values() if n)
    return CUDAGRAPH_FIRST_GIB * GiB + MiB * (graphs - modes)


def estimate(
    model: ModelSpec,
    *,
    weights_gib: float,
    tp: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    encoder_profiled: bool,
    sampler_rank: bool,
    graphs_per_mode: dict[str, int],
    correction_gib: float = 0.0,
) -> tuple[NonKV, list[str]]:
    notes: list[str] = []
    sampler = sampler_bytes(max_num_seqs, model.vocab_size) if sampler_rank else 0.0
    forward = forward_bytes(model, max_num_batched_tokens, tp)
    encoder = 0.0
    if encoder_profiled:
        enc = encoder_bytes(model)
        if enc is None:
            notes.append(
                "the multimodal encoder's profiling peak is not modelled for this vision tower; "
                "the available KV memory may be overestimated"
            )
        else:
            encoder = enc
    phases = {"sampler": sampler, "forward": forward, "encoder": encoder}
    phase = max(phases, key=lambda k: phases[k])
    return (
        NonKV(
            weights=weights_gib,
            activation=phases[phase] / GiB,
            activation_phase=phase,
            sampler=sampler / GiB,
            forward=forward / GiB,
            encoder=encoder / GiB,
            non_torch=NON_TORCH_GIB,
            cudagraph=cudagraph_bytes(graphs_per_mode) / GiB,
            correction=correction_gib,
        ),
        notes,
    )
