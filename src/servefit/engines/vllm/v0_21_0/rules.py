"""What vLLM 0.21.0 changed from 0.20.1: FP8 KV cache on the CPU platform, and the `vllm serve`
flags (flags_0_21_0.json: 8 more, --safetensors-prefetch-num-threads among them). Paths inside
the 0.21.0 wheel."""

from __future__ import annotations

from servefit.engines.vllm.v0_20_1 import rules as previous


class Rules(previous.Rules):
    VERSION = "0.21.0"

    # vllm/platforms/cpu.py:CpuPlatform.check_and_update_config no longer refuses or drops FP8
    # KV; vllm/v1/attention/backends/cpu_attn.py:_get_attn_isa (CPUAttentionMetadataBuilder.__init__,
    # once the KV cache is sized) refuses it on a CPU with neither AMX tiles nor AVX-512, and
    # for a head size that is a multiple of 16 but not of 32
    CPU_FP8_KV = "isa"


RULES = Rules()
