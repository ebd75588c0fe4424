"""The dtype SGLang loads a model in: sglang/srt/configs/model_config.py:_get_and_verify_dtype
(the same code 0.5.9-0.5.23), called with the text config (ModelConfig.__init__:
`self.dtype = _get_and_verify_dtype(self.hf_text_config, dtype)`).

* `--dtype` half / float16 / float / float32 / bfloat16 is taken as given (the flag's choices
  refuse anything else);
* "auto" keeps the checkpoint's dtype, except float32, which becomes float16 ("Following the
  common practice") or bfloat16 for Gemma model types;
* the cast is logged (engines/dtypes.py:cast_log) at INFO / WARNING in 0.5.9-0.5.12 and at
  DEBUG from 0.5.13, which the default log level does not print.

The weights, the KV cache at --kv-cache-dtype auto (sglang/srt/model_executor/model_runner.py:
ModelRunner.configure_kv_cache_dtype:
`self.kv_cache_dtype = self.dtype`) and the "Load weight end" line's dtype take it.
"""

from __future__ import annotations

from typing import Any

from servefit.engines.dtypes import FLAG_DTYPES, cast_log
from servefit.model.spec import ModelSpec


def resolve_dtype(model: ModelSpec, user_args: dict[str, Any]) -> tuple[str, str | None]:
    """(ModelConfig.dtype, the cast line _get_and_verify_dtype logs or None)."""
    asked = str(user_args.get("dtype") or "auto").lower()
    if asked == "auto":
        if model.dtype == "float32":
            dtype = "bfloat16" if model.model_type.startswith("gemma") else "float16"
        else:
            dtype = model.dtype
    else:
        dtype = FLAG_DTYPES[asked]
    return dtype, cast_log(model.dtype, dtype)
