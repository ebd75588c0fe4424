"""SGLang's error messages that name their own fix (engines/remedy.py). The texts are those the
profiles reproduce from the engine (engines/sglang/common.py), the same in 0.5.9 and 0.5.23."""

from __future__ import annotations

import re

from servefit.engines.remedy import Remedy

REMEDIES: tuple[Remedy, ...] = (
    Remedy(
        "context beyond the model",
        re.compile(
            r"User-specified context_length \((\d+)\) is greater than the derived "
            r"context_length \((\d+)\)"
        ),
        lambda m: {"context_length": int(m.group(2))},
        "sglang/srt/configs/model_config.py:ModelConfig._derive_context_length",
    ),
    Remedy(
        # the message's other way, extra_buffer, also needs SGLANG_ENABLE_SPEC_V2=1 in the
        # environment; turning the radix cache off is the flag that removes the conflict
        "speculative decoding with the radix cache",
        re.compile(r"Speculative decoding for \S+ is not compatible with radix cache"),
        lambda m: {"disable_radix_cache": True},
        "sglang/srt/server_args.py:ServerArgs._handle_mamba_radix_cache",
    ),
)
