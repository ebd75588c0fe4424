"""What vLLM 0.10.2 changed from 0.10.0 (also 0.11.0). Paths inside the
0.10.2 wheel."""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Change
from servefit.engines.vllm.v0_10_0 import rules as previous
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec
from servefit.units import GiB

PREFIX_CACHING_OFF = (
    "Hybrid or mamba-based model detected: disabling prefix caching since it is not yet supported."
)


class Rules(previous.Rules):
    VERSION = "0.10.2"

    # vllm/config/__init__.py:_FLOAT16_NOT_SUPPORTED_MODELS adds Gemma 3's text model
    FLOAT16_NOT_SUPPORTED = previous.Rules.FLOAT16_NOT_SUPPORTED | {"gemma3_text"}

    def check_engine(self, model: ModelSpec, gpus: GPUSet, env: dict[str, str]) -> None:
        """engine/arg_utils.py:_is_v1_supported_oracle no longer falls back to V0 for Mamba
        models or compute capability < 8.0: everything runs V1."""

    def hybrid_prefix_caching(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> bool:
        """model_executor/models/config.py:MambaModelConfig.verify_and_update_config turns
        prefix caching off for every hybrid, even when asked for, and says so every time."""
        logs.append(PREFIX_CACHING_OFF)
        if v["enable_prefix_caching"]:
            changes.append(
                Change(
                    arg="enable_prefix_caching",
                    old=True,
                    new=False,
                    log=PREFIX_CACHING_OFF,
                    reason="MambaModelConfig: no prefix caching for Mamba layers yet",
                )
            )
        return False

    def hybrid_config_logs(self, model: ModelSpec, v: dict[str, Any]) -> list[str]:
        """MambaModelConfig.verify_and_update_config: FULL_AND_PIECEWISE CUDA graphs by default
        except for FCG_NOT_SUPPORTED_MODELS."""
        if model.architecture in ("Lfm2ForCausalLM", "MiniMaxText01ForCausalLM"):
            return []
        if v.get("_cudagraph_mode_given"):
            return []
        return [
            "Hybrid or mamba-based model detected: setting cudagraph mode to FULL_AND_PIECEWISE "
            "in order to optimize performance."
        ]

    def kv_bytes_log(self, free: float, reserved: int) -> str | None:
        """v1/worker/gpu_worker.py:Worker.determine_available_memory with
        --kv-cache-memory-bytes (0.10.2 - 0.11.0: the free memory unrounded, "does does")."""
        return (
            f"Initial free memory {free / GiB} GiB, reserved {reserved / GiB:.2f}GiB memory for "
            "KV Cache as specified by kv_cache_memory_bytes config and skipped memory "
            "profiling. This does does not respect the gpu_memory_utilization config. Only use "
            "kv_cache_memory_bytes config when you want manual control of KV cache memory "
            "size. If OOM'ed, check the difference of initial free memory between the current "
            "run and the previous run where kv_cache_memory_bytes is suggested and update it "
            "correspondingly."
        )


RULES = Rules()
