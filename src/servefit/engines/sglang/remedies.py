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
)
