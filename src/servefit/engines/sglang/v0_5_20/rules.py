"""What SGLang 0.5.20 decides differently from 0.5.21 (paths inside the 0.5.20 wheel); every
other table and variant is 0.5.21's (v0_5_21/rules.py). docs/engines/sglang-0.5.20.md."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.sglang.flow.rules import Rules
from servefit.engines.sglang.v0_5_21 import rules as newer

VERSION = "0.5.20"

_NOT_YET = {"BailingMoeV3VLForConditionalGeneration"}  # registered from 0.5.21 (archs_0_5_21.txt)

RULES: Rules = replace(
    newer.RULES,
    version=VERSION,
    # arg_groups/validation_hook.py:check_server_args (non-NPU): `assert
    # cfg.disable_overlap_schedule and cfg.speculative_algorithm is None` with PP
    pp_spec="refused",
    # arg_groups/overrides.py:_MAMBA_RADIX_CACHE_ARCHS, _MAMBA_EXTRA_BUFFER_ARCHS (no Inkling)
    mamba_radix_archs=newer.RULES.mamba_radix_archs - _NOT_YET,
    extra_buffer_archs=newer.RULES.extra_buffer_archs
    - _NOT_YET
    - {"InklingForConditionalGeneration", "InklingForConditionalGenerationMTP"},
)
