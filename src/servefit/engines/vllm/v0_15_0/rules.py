"""What vLLM 0.15.0 changed from 0.14.0 (also 0.15.1 and 0.16.0): Mamba cache modes. Paths inside the
0.15.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Change
from servefit.engines.vllm.v0_14_0 import rules as previous
from servefit.errors import EngineRejection
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.15.0"

    def hybrid_prefix_caching(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> bool:
        """MambaModelConfig.verify_and_update_config no longer turns asked-for prefix caching
        off: a model without SupportsMambaPrefixCaching gets mode "align"."""
        return bool(v["enable_prefix_caching"])

    def default_mamba_mode(self, model: ModelSpec, v: dict[str, Any]) -> tuple[str, str]:
        """The mode "none" becomes with prefix caching, and the log line saying so."""
        mode = "all" if model.architecture in self.MAMBA_PREFIX_CACHING else "align"
        return mode, (
            f"Mamba cache mode is set to '{mode}' for {model.architecture} by default when "
            "prefix caching is enabled"
        )

    def mamba_cache_mode(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> str:
        """model_executor/models/config.py:MambaModelConfig.verify_and_update_config with
        config/cache.py:MambaCacheMode ("all" | "align" | "none")."""
        mode = v.get("mamba_cache_mode") or "none"
        if not v["enable_prefix_caching"]:
            if mode != "none":
                logs.append("Mamba cache mode is set to 'none' when prefix caching is disabled")
            return "none"
        if mode == "none":
            mode, log = self.default_mamba_mode(model, v)
            logs.append(log)
            changes.append(
                Change(
                    arg="mamba_cache_mode", old="none", new=mode, log=log,
                    reason="prefix caching is on",
                )
            )  # fmt: skip
        if mode == "all" and model.architecture not in self.MAMBA_PREFIX_CACHING:
            mode = "align"
            logs.append(
                "Hybrid or mamba-based model detected without support for prefix caching "
                "with Mamba cache 'all' mode: falling back to 'align' mode."
            )
        if mode == "align":
            self.check_align(v)
        experimental = self.experimental_log(mode)
        if experimental:
            logs.append(experimental)
        return mode

    def check_align(self, v: dict[str, Any]) -> None:
        """MambaModelConfig (0.15.0 - 0.16.0): align mode needs chunked prefill and no
        speculative decoding."""
        if not v["enable_chunked_prefill"]:
            raise EngineRejection(
                "AssertionError: Chunked prefill is required for mamba cache mode 'align'."
            )
        if v["num_speculative_tokens"]:
            raise EngineRejection(
                "AssertionError: Mamba cache mode 'align' is currently not compatible with "
                "speculative decoding."
            )

    def experimental_log(self, mode: str) -> str | None:
        return (
            f"Warning: Prefix caching in Mamba cache '{mode}' mode is currently enabled. Its "
            "support for Mamba layers is experimental. Please report any issues you may "
            "observe."
        )

    def mamba_blocks_per_request(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> int:
        """v1/kv_cache_interface.py:MambaSpec.max_memory_usage_bytes / page: none 1 + k, align
        2 + k ("all": cdiv(max_model_len, block), planning.py)."""
        k = v["num_speculative_tokens"]
        return (2 if v["mamba_cache_mode"] == "align" else 1) + k


RULES = Rules()
