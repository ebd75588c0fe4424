"""What one SGLang release (0.5.10 onward) decides its own way: the record each release's rules
module declares (engines/sglang/v<version>/rules.py: RULES), and the only thing the shared flow
asks about a release.

A field is either a table read from the wheel (defaults, architecture lists, memory tiers) or a
switch naming which of the known variants of an engine function the release runs. Each field
says which function it stands for; the release's rules module cites the file in its wheel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servefit.engines.base import LogFeature


@dataclass(frozen=True)
class Rules:
    """One SGLang release's answers to the shared flow (see the module docstring)."""

    version: str
    # ServerArgs field defaults for the args servefit mirrors (this release's attribute names)
    defaults: Mapping[str, Any]
    # attributes the flag table spells differently from the engine's canonical (0.5.9) name
    renames: Mapping[str, str]
    # the line formats the release prints (doctor tells releases apart by them)
    log_format: frozenset[LogFeature]
    # environment variables the release reads that change memory sizing
    env_vars: tuple[str, ...]
    # --mamba-full-memory-ratio / --swa-full-tokens-ratio when the user gives none
    mamba_full_memory_ratio: float
    swa_full_tokens_ratio: float
    # handle_gpu_memory_settings: (upper bound MiB, chunked_prefill_size, decode max_bs at
    # TP < 4, decode max_bs at TP >= 4), first bound above the GPU's memory wins
    tiers: tuple[tuple[float, int, int, int], ...]
    # configs/hybrid_arch.py:mambaish_config: architectures given a recurrent-state pool
    state_pool_archs: frozenset[str]
    # the mamba radix-cache resolution: architectures it applies to / that support extra_buffer
    mamba_radix_archs: frozenset[str]
    extra_buffer_archs: frozenset[str]
    # the Qwen3.5-hybrid SM100 override (attention backend and page size)
    qwen3_5_hybrid_archs: frozenset[str]
    # speculative decoding: architectures whose draft path defaults to the model path
    draft_in_target_archs: frozenset[str]
    # multimodal architectures that keep the breakable prefill CUDA graph
    breakable_mm_archs: frozenset[str]
    # ModelConfig: architectures whose enable_multimodal None means False
    mm_disabled_archs: frozenset[str]
