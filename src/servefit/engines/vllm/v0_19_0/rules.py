"""What vLLM 0.19.0 changed from 0.18.0 (also 0.19.1). Paths inside the 0.19.0 wheel."""

from __future__ import annotations

from servefit.engines.vllm.v0_18_0 import rules as previous


class Rules(previous.Rules):
    VERSION = "0.19.0"

    # v1/core/kv_cache_utils.py:_max_memory_usage_bytes_from_groups sums every group's
    # blocks: the one-request check sees the attention blocks of a hybrid again
    ONE_REQUEST_NEED = "groups"


RULES = Rules()
