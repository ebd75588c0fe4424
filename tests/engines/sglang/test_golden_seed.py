"""The seed case against golden values computed by each SGLang release's own code.

tests/data/golden/sglang_seed.json is the output of tools/golden_sglang.py, which runs the
released ServerArgs resolution (server_args.py:ServerArgs.__post_init__, 0.5.19+:
ServerArgs.resolve_once) and the release's own `_resolve_memory_pool_config` (0.5.16+:
mem_cache/kv_cache_configurator.py:KVCacheConfigurator; 0.5.10-0.5.15:
model_executor/model_runner_kv_cache_mixin.py) on CPU, with the GPU queries answered for an RTX
A6000 pair and the free memory fed from the same per-rank figures used here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servefit import catalog
from servefit.engines import registry
from servefit.engines.base import MemoryInputs
from servefit.engines.sglang import v0_5_9
from servefit.hardware.spec import GPUSet, GPUSpec
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec
from servefit.model.spec import ModelSpec

GOLDEN = json.loads(
    (Path(__file__).parents[2] / "data" / "golden" / "sglang_seed.json").read_text()
)
INPUTS = GOLDEN["inputs"]


@pytest.fixture(scope="module")
def model() -> ModelSpec:
    name = Path(INPUTS["config"]).name  # the config the golden run read
    return build_model_spec(read_json(catalog.DATA / name), name="Qwen/Qwen3.6-27B", source=name)


def _gpus() -> GPUSet:
    spec = GPUSpec(
        key="a6000",
        name="NVIDIA RTX A6000",
        memory_mib=INPUTS["gpu_mib"],
        bandwidth_gbs=768.0,
        bf16_tflops=155.0,
    )
    return GPUSet(gpu=spec, count=2)


def _args(scenario: str, profile: Any) -> dict[str, Any]:
    """The scenario's ServerArgs; "@strategy" is the mamba strategy under the release's name."""
    args = {"tp_size": INPUTS["tp_size"], "context_length": INPUTS["context_length"]}
    for key, value in INPUTS["scenarios"][scenario].items():
        if key == "@strategy":
            key = profile.renames.get("mamba_scheduler_strategy", "mamba_scheduler_strategy")
        args[key] = value
    return args


def _plan(profile: Any, model: ModelSpec, scenario: str) -> tuple[Any, Any]:
    gpus = _gpus()
    args = _args(scenario, profile)
    resolved = profile.resolve_args(model, gpus, args, {})
    if resolved.error is not None:  # the engine stops in ServerArgs: nothing is sized
        return resolved, None
    memory = MemoryInputs(
        total_gib=INPUTS["gpu_mib"] / 1024,
        pre_load_free_gib=INPUTS["pre_load_free_gib"],
        weights_gib=INPUTS["weights_gib"],
        draft_weights_gib=INPUTS["draft_weights_gib"] if "speculative_algorithm" in args else 0.0,
    )
    return resolved, profile.size_pools(model, gpus, resolved, memory)


# Every registered release on the shared flow (0.5.10 onward) against its own wheel's numbers.
FLOW_RELEASES = [r for r in registry.releases("sglang") if r in GOLDEN["releases"] and r != "0.5.9"]
CASES = [(r, s) for r in FLOW_RELEASES for s in sorted(INPUTS["scenarios"])]
# lines of the sizing pass the golden run logs too (kv_cache_configurator.py)
SIZING_LOGS = ("max_running_requests ", "Reserving ")


@pytest.mark.parametrize(("release", "scenario"), CASES)
def test_release_matches_its_wheel(model, release, scenario):
    """0.5.10-0.5.13 also: server_args.py:_handle_mamba_radix_cache (auto -> no_buffer; spec +
    no_buffer + radix is a ValueError), _handle_speculative_decoding (SGLANG_ENABLE_SPEC_V2 off in
    0.5.10), _handle_gpu_memory_settings (4 GiB EAGLE reserve); model_runner_kv_cache_mixin.py:
    handle_max_mamba_cache (upfront reserve up to 0.5.12, joint from 0.5.13),
    _profile_available_bytes (weights ValueError from 0.5.14), MemoryPoolConfig's "Not enough
    memory" (0.5.10 names the fraction)."""
    golden = GOLDEN["releases"][release][scenario]
    prof = registry.profile("sglang", registry.RELEASES["sglang"][release])
    resolved, sized = _plan(prof, model, scenario)
    if "resolved" not in golden:  # ServerArgs itself raised: the engine's own text
        assert resolved.error == golden["error"]
        return
    assert resolved.error is None
    # arg_groups/memory_hook.py:handle_gpu_memory_settings (+ adjust_mem_fraction_for_vlm);
    # arg_groups/overrides.py:_mamba_radix_cache_resolution (0.5.14-0.5.18: the ServerArgs methods)
    want_args = golden["resolved"]
    assert resolved["mem_fraction_static"] == pytest.approx(
        want_args["mem_fraction_static"], abs=1e-12
    )
    strategy = prof.renames.get("mamba_scheduler_strategy", "mamba_scheduler_strategy")
    assert resolved[strategy] == want_args[strategy]
    assert resolved["disable_radix_cache"] == want_args["disable_radix_cache"]
    assert resolved["disable_overlap_schedule"] == want_args["disable_overlap_schedule"]
    assert resolved["max_running_requests"] == want_args["max_running_requests"]
    if "error" in golden:  # the engine's own exception text
        assert sized.error == golden["error"]
        return
    # kv_cache_configurator.py:_handle_max_mamba_cache, _calculate_mamba_ratio,
    # resolve_max_num_reqs; pool_configurator.py:DefaultPoolConfigurator.calculate_pool_sizes
    want = golden["sizing"]
    assert sized.error is None
    assert sized.pools.max_total_num_tokens == want["max_total_num_tokens"]
    assert sized.pools.max_mamba_cache_size == want["max_mamba_cache_size"]
    assert sized.pools.mamba_slots_per_request == want["mamba_ratio"]
    assert sized.pools.effective_max_running_requests == want["max_running_requests"]
    assert sized.pools.mamba_state_bytes_per_request == want["mamba_cache_per_req"]
    # the warnings the sizing pass prints (mamba cap from 0.5.17, multimodal reservation 0.5.18+)
    ours = [line for line in sized.log_lines if line.startswith(SIZING_LOGS)]
    assert ours == [line for line in golden["log"] if line.startswith(SIZING_LOGS)]


@pytest.mark.parametrize("scenario", ["plain", "mtp", "mtp_f085_mrr16"])
def test_v0_5_9_resolution_matches_the_wheel(model, scenario):
    """server_args.py:_handle_gpu_memory_settings (the 2 GiB EAGLE reserve) and
    _handle_mamba_radix_cache (speculative decoding turns the radix cache off) in 0.5.9."""
    golden = GOLDEN["releases"]["0.5.9"][scenario]["resolved"]
    resolved = v0_5_9.resolve_args(model, _gpus(), _args(scenario, v0_5_9.PROFILE), {})
    assert resolved["mem_fraction_static"] == pytest.approx(
        golden["mem_fraction_static"], abs=1e-12
    )
    assert resolved["disable_radix_cache"] == golden["disable_radix_cache"]
    assert resolved["disable_overlap_schedule"] == golden["disable_overlap_schedule"]
    assert resolved["mamba_scheduler_strategy"] == golden["mamba_scheduler_strategy"]


def test_golden_file_covers_every_release_without_harness_failures():
    """Each release and scenario holds either the engine's sizing or the engine's own error."""
    releases = GOLDEN["releases"]
    assert len(releases) == 19 and {"0.5.9", "0.5.15.post1", "0.5.23"} <= set(releases)
    for version, rows in releases.items():
        assert set(rows) == set(INPUTS["scenarios"]), version
        for name, row in rows.items():
            assert "harness_error" not in row, (version, name)
            assert ("error" in row) != ("sizing" in row) or version == "0.5.9", (version, name)
