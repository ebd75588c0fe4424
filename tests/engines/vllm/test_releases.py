"""What the vLLM releases decide differently, case by case, each against its own code (paths
inside the wheels; the block arithmetic of every release is in test_golden.py)."""

from __future__ import annotations

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.engines import registry
from servefit.errors import UnsupportedModelError
from servefit.model.inventory import build_model_spec

from .helpers import GiB, catalog_config, qwen3_next

SEED_MODEL = "Qwen/Qwen3.6-27B"
MTP = {"method": "mtp", "num_speculative_tokens": 3}


def seed(release: str, **args):
    base = {"tensor_parallel_size": 2, "max_model_len": 32768}
    return plan(
        PlanRequest(model=SEED_MODEL, gpu="A6000", engine=f"vllm=={release}", args=base | args)
    )


def test_every_release_of_the_range_has_its_own_line():
    # one registry line per PyPI release 0.10.0 ... 0.33.0 (no .postN in the range)
    assert len(registry.releases("vllm")) == 39
    for release in registry.releases("vllm"):
        _, ref = registry.select(f"vllm=={release}")
        assert ref.note is None and ref.version == release


@pytest.mark.parametrize("release", ["0.10.0", "0.13.0", "0.16.0"])
def test_qwen35_is_not_registered_before_017(release):
    # model_executor/models/registry.py:_raise_for_unsupported: Qwen3_5ForConditionalGeneration
    # joins the registry in 0.17.0
    p = seed(release, speculative_config=MTP)
    assert p.verdict == "fail"
    assert p.error.startswith(
        "ValueError: Model architectures ['Qwen3_5ForConditionalGeneration'] are not supported "
        "for now. Supported architectures: dict_keys(["
    )


@pytest.mark.parametrize("release", ["0.17.0", "0.24.0", "0.33.0"])
def test_qwen35_starts_from_017(release):
    assert seed(release, speculative_config=MTP).error is None


def test_010_runs_hybrids_on_v0_which_is_not_mirrored():
    # engine/arg_utils.py:_is_v1_supported_oracle (0.10.0 - 0.10.1.1): has_inner_state ->
    # "Mamba is experimental on VLLM_USE_V1=1. Falling back to V0 Engine."
    model = build_model_spec(
        catalog_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"),
        name="Nemotron-3-Nano (test)",
        source="test",
    )
    assert model.architecture == "NemotronHForCausalLM" and model.is_hybrid
    with pytest.raises(UnsupportedModelError, match="V0 engine"):
        plan(PlanRequest(model=model, gpu="H200", engine="vllm==0.10.1", args={}))


def test_010_runs_t4_on_v0():
    with pytest.raises(UnsupportedModelError, match="Compute Capability < 8.0"):
        plan(PlanRequest(model="Qwen/Qwen3-8B", gpu="T4", engine="vllm==0.10.0", args={}))


def test_010_dense_plans_with_the_old_capacity_figure():
    # kv_cache_utils.py:_get_kv_cache_config_uniform_type (0.10.0): "GPU KV cache size" is
    # num_blocks x block_size, once per worker (v1/engine/core.py calls get_kv_cache_config per
    # worker): Qwen3-8B, 36 layers x 8 KV heads x 128 x 2 x 2 B = 147,456 B per token, block 16
    # -> 2,359,296 B per block; 10 GiB // that = 4,551 blocks = 72,816 tokens
    p = plan(
        PlanRequest(
            model="Qwen/Qwen3-8B",
            gpu="A6000",
            engine="vllm==0.10.0",
            args={"max_model_len": 32768, "kv_cache_memory_bytes": 10 * GiB},
        )
    )
    assert p.pools.num_blocks == 4551
    assert p.log_lines[-2:] == [
        "GPU KV cache size: 72,816 tokens",
        "Maximum concurrency for 32,768 tokens per request: 2.22x",
    ]


def test_014_to_018_check_one_request_on_the_first_group_only():
    # kv_cache_utils.py:_max_memory_usage_bytes_from_groups (0.14.0 - 0.18.1): group_size x
    # page x the blocks of kv_cache_groups[0], the GDN group for Qwen3.5 (layer 0 is linear
    # attention): one block, so 262,144 tokens on 1 GiB starts; 0.19.0 sums the groups and
    # refuses (8.09 GiB needed)
    small = {"max_model_len": 262144, "kv_cache_memory_bytes": GiB}
    assert seed("0.18.1", **small).error is None
    assert seed("0.19.0", **small).error.startswith(
        "ValueError: To serve at least one request with the models's max seq len (262144), "
        "(8.09 GiB KV cache is needed"
    )


def test_capacity_figure_changes_in_0201():
    # _report_kv_cache_config: num_blocks // groups x min block up to 0.20.0, then
    # int(concurrency x max_model_len): 585 // 4 x 784 = 114,464 vs int(13.0 x 32,768)
    kv = {"kv_cache_memory_bytes": 14 * GiB}
    assert "GPU KV cache size: 114,464 tokens" in seed("0.20.0", **kv).log_lines
    assert "GPU KV cache size: 425,984 tokens" in seed("0.20.1", **kv).log_lines


def test_prefix_caching_is_on_for_hybrids_from_028():
    # engine/arg_utils.py:_set_default_chunked_prefill_and_prefix_caching_args (0.28.0 drops
    # `and not model_config.is_hybrid`): align mode, 2 + k Mamba blocks per request
    kv = {"kv_cache_memory_bytes": 14 * GiB}
    assert seed("0.27.1", **kv).resolved_args["enable_prefix_caching"] is False
    on = seed("0.28.0", **kv, speculative_config=MTP)
    assert on.resolved_args["mamba_cache_mode"] == "align"
    assert on.pools.mamba_slots_per_request == 2 + 3


def test_gdn_checkpoints_only_from_033_on_hopper():
    # 0.29 - 0.32 have no GDN prefill checkpoints; 0.33.0 on SM90 (FlashInfer GDN prefill)
    # aligns to lcm(16, 64) and adds a checkpoint block per Mamba group
    def on_h100(release):
        return plan(
            PlanRequest(
                model=SEED_MODEL,
                gpu="H100",
                engine=f"vllm=={release}",
                args={"max_model_len": 32768, "kv_cache_memory_bytes": 40 * GiB},
            )
        )

    before, after = on_h100("0.32.0"), on_h100("0.33.0")
    assert before.pools.block_size % 64 and before.pools.mamba_slots_per_request == 2
    assert after.pools.block_size % 64 == 0 and after.pools.mamba_slots_per_request == 3


def test_max_num_seqs_above_the_mamba_blocks():
    # 0.18.x caps the capture sizes (a warning, compilation.py:adjust_cudagraph_sizes_for_
    # mamba_cache); 0.20.0 on refuses (resolve_cudagraph_mode_and_sizes)
    args = {"kv_cache_memory_bytes": 2 * GiB, "max_num_seqs": 256}
    capped = seed("0.18.0", **args)
    assert capped.error is None
    assert any(line.startswith("Capping cudagraph capture sizes") for line in capped.log_lines)
    assert seed("0.20.0", **args).error.startswith("ValueError: max_num_seqs (256) exceeds")


def test_015_refuses_align_mode_with_speculative_decoding():
    # MambaModelConfig.verify_and_update_config (0.15.0 - 0.16.0)
    p = plan(
        PlanRequest(
            model=qwen3_next(num_nextn_predict_layers=1),
            gpu="H200",
            engine="vllm==0.16.0",
            args={
                "tensor_parallel_size": 4,
                "enable_prefix_caching": True,
                "kv_cache_memory_bytes": 50 * GiB,
                "speculative_config": {"method": "mtp", "num_speculative_tokens": 1},
            },
        )
    )
    assert p.error == (
        "AssertionError: Mamba cache mode 'align' is currently not compatible with speculative "
        "decoding."
    )
