"""What vLLM 0.32.0 changed from 0.31.0: no Mamba cache mode "all", prefill checkpoints for
Mamba2, num_spec for every Mamba2 family. Paths inside the 0.32.0 wheel."""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Change
from servefit.engines.vllm.v0_31_0 import rules as previous
from servefit.errors import EngineRejection
from servefit.hardware.spec import GPUSet
from servefit.model.layers import GatedDeltaNet, Mamba2
from servefit.model.spec import ModelSpec


class Rules(previous.Rules):
    VERSION = "0.32.0"

    def cpu_conv_pack_error(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> str | None:
        """model_executor/layers/utils.py:dispatch_cpu_unquantized_gemm: only a bfloat16
        (dim, 1, 4) weight is packed (is_causal_conv1d_weight); any other keeps torch's conv."""
        return None

    def mamba2_num_spec(self, model: ModelSpec, num_spec: int) -> int:
        """falcon_h1.py, granitemoehybrid.py and zamba2.py pass num_spec too."""
        return num_spec

    def mamba_cache_mode(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> str:
        """config/cache.py:MambaCacheMode = Literal["align", "none"]; MambaModelConfig sets
        "align" with prefix caching and asserts chunked prefill."""
        if v.get("mamba_cache_mode") == "all":
            raise EngineRejection(
                "argument --mamba-cache-mode: invalid choice: 'all' (choose from 'align', 'none')"
            )
        if not v["enable_prefix_caching"]:
            if (v.get("mamba_cache_mode") or "none") != "none":
                logs.append("Mamba cache mode is set to 'none' when prefix caching is disabled")
            return "none"
        if (v.get("mamba_cache_mode") or "none") == "none":
            mode, log = self.default_mamba_mode(model, v)
            logs.append(log)
            changes.append(
                Change(
                    arg="mamba_cache_mode", old="none", new=mode, log=log,
                    reason="prefix caching is on",
                )
            )  # fmt: skip
        self.check_align(v)
        return "align"

    def checkpoint_blocks(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> int:
        """Prefill-checkpoint blocks in align mode: mamba_mixer2.py (MambaMixer2.
        get_kv_cache_spec) always sets num_prefill_checkpoint_blocks=1."""
        layer = model.first_recurrent()  # GatedDeltaNet subclasses Mamba2 in servefit's layers
        if not isinstance(layer, Mamba2) or isinstance(layer, GatedDeltaNet):
            return 0
        return int(layer.n_groups != 0)

    def mamba_blocks_per_request(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> int:
        """MambaSpec.max_memory_usage_bytes / page: none 1 + k; align 2 + k + the prefill
        checkpoint blocks."""
        k = v["num_speculative_tokens"]
        if v["mamba_cache_mode"] != "align":
            return 1 + k
        return 2 + k + self.checkpoint_blocks(model, gpus, v)


RULES = Rules()
