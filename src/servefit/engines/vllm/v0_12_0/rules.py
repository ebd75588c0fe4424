"""What vLLM 0.12.0 changed from 0.11.1. Paths inside the 0.12.0 wheel."""

from __future__ import annotations

from servefit.engines.vllm.v0_11_1 import rules as previous


class Rules(previous.Rules):
    VERSION = "0.12.0"

    # v1/core/kv_cache_utils.py:_get_kv_cache_groups_uniform_page_size: "if max_num_layers <
    # min_num_layers * 1.25", the largest bucket is the group size
    GROUP_MAX_RATIO = 1.25

    def capacity_logs(
        self, tokens: int, max_model_len: int, concurrency: float, device: str, workers: int
    ) -> list[str]:
        """kv_cache_utils.py:_report_kv_cache_config: both lines logger.info_once."""
        return [
            f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x",
        ]


RULES = Rules()
