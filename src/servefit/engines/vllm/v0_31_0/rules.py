"""What vLLM 0.31.0 changed from 0.30.0. Paths inside the 0.31.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit.engines.vllm.v0_30_0 import rules as previous
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.31.0"

    # config/vllm.py:VllmConfig._set_cudagraph_sizes: one-token decode captures max_num_seqs
    # too when it is <= the largest capture size
    CAPTURE_MAX_NUM_SEQS = True

    def draft_group_log(self, model: ModelSpec, v: dict[str, Any]) -> str | None:
        """kv_cache_utils.py:_annotate_eagle_groups flags the group of the trailing MTP layers:
        no warning."""
        return None


RULES = Rules()
