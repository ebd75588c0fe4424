"""SGLang 0.5.9 profile (pip download --no-deps sglang==0.5.9); docs/engines/sglang-0.5.9.md."""

from __future__ import annotations

from servefit.engines.base import LogFeature
from servefit.engines.sglang.layout import LayoutRules
from servefit.engines.sglang.profile import config_readers, declare
from servefit.engines.sglang.v0_5_9.args import check_nemotron_h_layout, resolve_args
from servefit.engines.sglang.v0_5_9.pools import size_pools
from servefit.model import readers

ENGINE = "sglang"
VERSION = "0.5.9"

PROFILE = declare(
    VERSION,
    resolve_args=resolve_args,
    size_pools=size_pools,
    log_format=frozenset({LogFeature.ARGS_MAMBA_SCHEDULER_STRATEGY, LogFeature.LOAD_END_DTYPE}),
    check_config=check_nemotron_h_layout,
    # layers/vocab_parallel_embedding.py:VocabParallelEmbedding.__init__ pads to 64 x tp only
    # on CPU; models/kimi_linear.py:KimiDeltaAttention.__init__ bare-asserts the KDA heads
    layout=LayoutRules(vocab_pads_to_tp=False, kda_value_error=False),
    # configs/model_config.py:_get_and_verify_dtype logs its cast at INFO / WARNING
    dtype_cast_logged=True,
    # the code that reads its configs: Requires-Dist transformers==4.57.1, 0.5.9's own config
    # classes (configs/), ModelOptFp8Config's "static FP8" text, and
    # model_runner_kv_cache_mixin.py:ModelRunnerKVCacheMixin.profile_max_num_token dividing by
    # the KV bytes per token
    config_readers=config_readers(
        "4.57.1",
        modelopt_fp8_text="static",
        kv_divides_by_cell=True,
        own_configs=readers.SGLANG_0_5_9_CONFIGS,
    ),
)
FLAGS = PROFILE.flags

__all__ = ["ENGINE", "FLAGS", "PROFILE", "VERSION", "resolve_args", "size_pools"]
