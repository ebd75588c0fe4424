"""Every vLLM release against what its own code computes (tests/data/golden/vllm_kv.json).

The golden file is the output of tools/golden_vllm.py, which ran each release's released Python
(MambaModelConfig / HybridAttentionMambaModelConfig.verify_and_update_config, from 0.20.0
Platform._align_hybrid_block_size with the FLASH_ATTN backend, MambaBase.get_kv_cache_spec,
kv_cache_utils.get_kv_cache_configs / get_max_concurrency_for_kv_cache_config /
update_kv_cache_capacity, as v1/engine/core.py calls them) on the CPU, on an RTX A6000's
choices (SM 8.6: FLASH_ATTN, no FlashInfer GDN prefill), with the KV memory given. The cases:
the seed (Qwen3.6-27B, TP 2, 32K) without and with MTP (3 speculative tokens), with the
release's default prefix caching and with it forced on / off, the one-request check at 262,144
tokens on 1 GiB; Qwen3-Next-80B (TP 2) from 0.10.2; dense Qwen3-8B on every release.

servefit plans each case with --kv-cache-memory-bytes (the engine returns it as is from
Worker.determine_available_memory; passed as an engine arg here even for 0.10.x, which has no
such flag, to compare the block arithmetic alone) and must agree on the block size, the number
of blocks, the concurrency, every engine line the code logged, and the error text.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.engines import registry
from servefit.hardware.catalog import get_gpu, with_memory_mib
from servefit.model.inventory import build_model_spec

from .helpers import catalog_config

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "golden" / "vllm_kv.json"
DATA = json.loads(GOLDEN.read_text(encoding="utf-8"))
CASES = DATA["cases"]
# a case with no KV memory is vLLM's "no memory" path, which --kv-cache-memory-bytes cannot
# reach (0 means unset); its text is compared on its own below
NO_MEMORY_CASES = {name for name, c in CASES.items() if not c["mem"]}
PAIRS = [
    (release, name)
    for release, cases in DATA["releases"].items()
    for name in cases
    if name not in NO_MEMORY_CASES
]


A6000 = get_gpu("A6000")
# Qwen3-Next-80B's weights (~74 GiB per rank at TP 2) do not load on a 48 GiB A6000; the golden
# run gave its KV memory directly, so that case gets the A6000's choices (SM 8.6) with room for
# the weights. The others keep the A6000's 48 GiB: its size picks the default max_num_seqs
# (arg_utils.py:EngineArgs.get_batch_defaults).
BIG_A6000 = with_memory_mib(A6000, 192 * 1024)


def _plan(release: str, name: str):
    case = CASES[name]
    model = build_model_spec(catalog_config(case["cfg"]), name=case["cfg"], source="test")
    args: dict = {
        "tensor_parallel_size": case["tp"],
        "max_model_len": case["mml"],
        "kv_cache_memory_bytes": case["mem"],
    }
    if case["k"]:
        args["speculative_config"] = {"method": "mtp", "num_speculative_tokens": case["k"]}
    if case["pc"] is not None:
        args["enable_prefix_caching"] = case["pc"]
    return plan(
        PlanRequest(
            model=model,
            gpu=BIG_A6000 if CASES[name]["cfg"].startswith("Qwen__Qwen3-Next") else A6000,
            engine=f"vllm=={release}",
            args=args,
        )
    )


def in_order(lines: list[str], within: list[str]) -> bool:
    """`lines` appear in `within`, in that order (other lines may sit between them)."""
    it = iter(within)
    return all(any(line == other for other in it) for line in lines)


@pytest.mark.parametrize(("release", "name"), PAIRS)
def test_release_matches_its_own_code(release, name):
    want = DATA["releases"][release][name]
    p = _plan(release, name)
    if "error" in want:
        assert p.error == want["error"]
        return
    assert p.error is None
    assert p.resolved_args["enable_prefix_caching"] is want["prefix_caching"]
    assert p.pools.block_size == want["block_size"]
    assert p.pools.num_blocks == want["num_blocks"]
    assert p.pools.max_concurrency == pytest.approx(want["max_concurrency"], rel=1e-12)
    assert in_order(want["config_logs"], p.log_lines), (want["config_logs"], p.log_lines)
    assert in_order(want["kv_logs"], p.log_lines), (want["kv_logs"], p.log_lines)


@pytest.mark.parametrize("release", list(DATA["releases"]))
def test_no_memory_text(release):
    """kv_cache_utils.py:check_enough_kv_cache_memory / _check_enough_kv_cache_memory with
    available <= 0, as the release words it."""
    prof, _ = registry.select(f"vllm=={release}")
    package = "v" + prof.version.replace(".", "_")
    rules = importlib.import_module(f"servefit.engines.vllm.{package}.rules").RULES
    assert rules.no_memory_error() == DATA["releases"][release]["dense-none"]["error"]
