"""What vLLM 0.20.1 changed from 0.20.0 (also 0.20.2): the "GPU KV cache size" figure. Paths inside
the 0.20.1 wheel."""

from __future__ import annotations

from servefit.engines.vllm.v0_20_0 import rules as previous


class Rules(previous.Rules):
    VERSION = "0.20.1"

    def capacity_tokens(
        self, num_blocks: int, num_groups: int, min_block: int, concurrency: float, mml: int
    ) -> int:
        """v1/core/kv_cache_utils.py:_report_kv_cache_config: "GPU KV cache size in tokens =
        max_concurrency * max_model_len" (issue #40691, the Qwen3.5 report)."""
        return int(concurrency * mml)


RULES = Rules()
