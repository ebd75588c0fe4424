"""What vLLM 0.30.0 changed from 0.29.0. Paths inside the 0.30.0 wheel."""

from __future__ import annotations

import math
from typing import Any

from servefit.engines.vllm import common
from servefit.engines.vllm.common import StateTensor
from servefit.engines.vllm.v0_29_0 import rules as previous
from servefit.errors import EngineRejection
from servefit.model.layers import KDA
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.30.0"

    def derived_max_model_len(self, model: ModelSpec) -> tuple[int, str | None]:
        """config/model.py:_get_and_verify_max_len: YaRN variants (yarn, deepseek_yarn,
        deepseek_llama_scaling) leave max_position_embeddings unscaled."""
        derived, key = common.derive_max_model_len_and_key(model)
        cfg = model.text_config or model.raw_config
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
        unscaled = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
        if isinstance(rope, dict) and rope and "gemma3" not in model.model_type:
            nested = all(isinstance(x, dict) for x in rope.values())
            factor = 1.0
            for rp in rope.values() if nested else [rope]:
                if rp.get("rope_type", rp.get("type", "default")) not in unscaled:
                    factor = rp.get("factor", factor) or 1.0
            derived *= factor
        return int(derived), key

    def kda_state(
        self, layer: KDA, tp: int, num_spec: int, conv_dtype: str, ssm_dtype: str
    ) -> tuple[StateTensor, ...]:
        """mamba_utils.py:kda_state_dtype: the recurrent state is float32 unless
        --mamba-ssm-cache-dtype says bfloat16 / float32."""
        if ssm_dtype not in ("auto", "float32", "bfloat16"):
            raise EngineRejection(
                "ValueError: KDA recurrent state supports only auto, float32, and bfloat16; "
                f"got {ssm_dtype}"
            )
        conv, rec = super().kda_state(layer, tp, num_spec, conv_dtype, ssm_dtype)
        return conv, StateTensor(rec.shape, "float32" if ssm_dtype == "auto" else ssm_dtype)

    def draft_group_log(self, model: ModelSpec, v: dict[str, Any]) -> str | None:
        """v1/core/kv_cache_utils.py:_warn_if_unannotated_eagle_mamba (0.30.0): with an
        eagle-family drafter (MTP) on a model with Mamba groups, no group is marked as the
        draft's (only non-causal multi-token specs and DeepSeek-V4's last layer are), so the
        engine warns; 0.31.0 marks the trailing draft layers' group."""
        if v.get("_spec_method") == "mtp" and layout_has_mamba(model):
            return (
                "Speculative decoding (method=mtp) is enabled but no KV cache group could be "
                "identified as the draft model's."
            )
        return None

    def group_block_logs(self, block_sizes: list[int]) -> list[str]:
        """v1/core/kv_cache_utils.py:resolve_kv_cache_block_sizes, several groups: each group's
        block size and their lcm (the scheduler block), info_once."""
        if len(block_sizes) <= 1:
            return []
        return [
            f"kv cache group sizes {tuple(block_sizes)}",
            f"kv lcm block sizes {math.lcm(*block_sizes)}",
        ]

    def capacity_logs(
        self, tokens: int, max_model_len: int, concurrency: float, device: str, workers: int
    ) -> list[str]:
        """kv_cache_utils.py:update_kv_cache_capacity: "%s KV cache size", "GPU" on CUDA, the
        device type upper-cased elsewhere ("CPU")."""
        return [
            f"{device} KV cache size: {tokens:,} tokens, Maximum concurrency for "
            f"{max_model_len:,} tokens per request: {concurrency:.2f}x"
        ]


RULES = Rules()


def layout_has_mamba(model: ModelSpec) -> bool:
    return bool(model.recurrent_layer_ids)
