"""The GPUs a launch command lets its engine see, and the engines' refusal of a larger layout.

Visibility follows torch/cuda/__init__.py:_parse_visible_devices (torch 2.13); the refusals are
the engines' own texts: vllm/config/parallel.py:ParallelConfig.__post_init__ and
vllm/v1/worker/gpu_worker.py:Worker.init_device (vLLM 0.24, 0.32, 0.33),
vllm/platforms/rocm.py:_sync_hip_cuda_env_vars; SGLang's per-rank gpu_id
(sglang/srt/entrypoints/engine.py, managers/data_parallel_controller.py) set by ModelRunner,
and sglang/srt/utils/common.py:get_device when no GPU is visible.
"""

from __future__ import annotations

import pytest

from servefit.engines.command import parse_launch_command
from servefit.engines.devices import (
    DeviceRejection,
    Visible,
    check_launch,
    seen_local,
    visible,
)
from servefit.hardware.nvml import LocalGPU

WORLD_2_OF_1 = (
    "ValueError: World size (2) is larger than the number of available GPUs (1) in this node. "
    "If this is intentional and you are using: - ray, set '--distributed-executor-backend "
    "ray'. - multiprocessing, set '--nnodes' appropriately."
)


def test_env_prefix_and_env_unset():
    cmd = parse_launch_command("CUDA_VISIBLE_DEVICES=0 vllm serve m -tp 2")
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "0"}
    # `env -u NAME` takes the variable out of what the engine inherits; `env -i` takes all
    cmd = parse_launch_command("env -u CUDA_VISIBLE_DEVICES python -m sglang.launch_server --tp 2")
    assert cmd.unset == ("CUDA_VISIBLE_DEVICES",)
    assert cmd.engine_env({"CUDA_VISIBLE_DEVICES": "0", "HOME": "/h"}) == {"HOME": "/h"}
    cmd = parse_launch_command("export A=1; env -i B=2 python -m sglang.launch_server --tp 2")
    assert not cmd.inherit_env and cmd.engine_env({"CUDA_VISIBLE_DEVICES": "0"}) == {"B": "2"}


@pytest.mark.parametrize(
    ("value", "entries"),
    [
        ("0,1", (0, 1)),
        ("", ()),  # an empty value hides every GPU
        ("0,-1,2", (0,)),  # a negative entry ends the list
        ("1gpu2,2", (1, 2)),  # strtoul: the number a word starts with
        ("0,0", ()),  # a repeated ordinal gives the empty set
        ("GPU-ab12,GPU-cd34,x", ("GPU-ab12", "GPU-cd34")),
    ],
)
def test_cuda_visible_devices_as_torch_reads_it(value, entries):
    vis = visible({"CUDA_VISIBLE_DEVICES": value})
    assert vis == Visible(f"CUDA_VISIBLE_DEVICES={value}", entries)


def test_rocm_variables():
    assert visible({}) is None
    # NVIDIA: only CUDA_VISIBLE_DEVICES counts
    assert visible({"HIP_VISIBLE_DEVICES": "0"}) is None
    # ROCm: ROCR first (CUDA_VISIBLE_DEVICES then ignored), HIP preferred when both are set
    assert visible({"ROCR_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "0"}, "amd").count == 2
    hip = visible({"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "1"}, "amd")
    assert hip == Visible("HIP_VISIBLE_DEVICES=1", (1,))
    with pytest.raises(DeviceRejection, match="HIP_VISIBLE_DEVICES contains more devices than"):
        visible({"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0,1"}, "amd")
    with pytest.raises(DeviceRejection, match="Inconsistent GPU visibility env vars"):
        env = {"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}
        check_launch("vllm", "0.33.0", {}, env, "amd")


def _refusal(engine, version, values, env, vendor="nvidia"):
    with pytest.raises(DeviceRejection) as exc:
        check_launch(engine, version, values, env, vendor)
    return str(exc.value)


def test_vllm_world_larger_than_the_visible_gpus():
    text = _refusal("vllm", "0.33.0", {"tensor_parallel_size": 2}, {"CUDA_VISIBLE_DEVICES": "0"})
    assert text.startswith(WORLD_2_OF_1 + " (CUDA_VISIBLE_DEVICES=0 exposes 1 GPU;")
    two = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert check_launch("vllm", "0.33.0", {"tensor_parallel_size": 2}, two).count == 2
    # PP and PCP count in the world; an explicit Ray backend places workers itself
    text = _refusal(
        "vllm", "0.24.0", {"pipeline_parallel_size": 2, "prefill_context_parallel_size": 2}, two
    )
    assert text.startswith(
        "ValueError: World size (4) is larger than the number of available GPUs (2)"
    )
    ray = {"tensor_parallel_size": 2, "distributed_executor_backend": "ray"}
    assert check_launch("vllm", "0.33.0", ray, {"CUDA_VISIBLE_DEVICES": "0"}) is not None


def test_vllm_dp_ranks_and_no_gpu():
    # DP ranks of one node take GPUs local_rank + dp_rank x world: rank 1 is past 1 GPU
    text = _refusal("vllm", "0.33.0", {"data_parallel_size": 2}, {"CUDA_VISIBLE_DEVICES": "0"})
    assert text.startswith(
        "AssertionError: DP adjusted local rank 1 is out of bounds for 1 devices."
    )
    text = _refusal("vllm", "0.32.0", {}, {"CUDA_VISIBLE_DEVICES": ""})
    assert text.startswith(
        "AssertionError: DP adjusted local rank 0 is out of bounds for 0 devices."
    )
    # ROCm is not is_cuda(): the config check is skipped, the worker's assert stops it
    text = _refusal(
        "vllm", "0.33.0", {"tensor_parallel_size": 2}, {"HIP_VISIBLE_DEVICES": "0"}, "amd"
    )
    assert text.startswith(
        "AssertionError: DP adjusted local rank 1 is out of bounds for 1 devices."
    )


def test_sglang_rank_on_a_gpu_it_cannot_see():
    text = _refusal("sglang", "0.5.23", {"tp_size": 2}, {"CUDA_VISIBLE_DEVICES": "0"})
    assert text.startswith("CUDA error: invalid device ordinal (the TP rank 1 runs on GPU 1 and ")
    # DP without DP attention: each DP group starts tp x pp GPUs further
    text = _refusal("sglang", "0.5.9", {"dp_size": 2}, {"CUDA_VISIBLE_DEVICES": "0"})
    assert "(the TP rank 0, DP rank 1 runs on GPU 1 and" in text
    two = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert check_launch(
        "sglang", "0.5.9", {"tp_size": 2, "dp_size": 2, "enable_dp_attention": True}, two
    )
    text = _refusal("sglang", "0.5.9", {"tp_size": 2, "base_gpu_id": 1}, two)
    assert "(the TP rank 1 runs on GPU 2 and CUDA_VISIBLE_DEVICES=0,1 exposes 2 GPUs" in text


@pytest.mark.parametrize(
    ("version", "words"),
    [
        ("0.5.9", "No accelerator (CUDA, XPU, HPU, NPU, MUSA) is available."),
        ("0.5.10", "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available."),
        (
            "0.5.23",
            "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.",
        ),
    ],
)
def test_sglang_without_a_visible_gpu(version, words):
    text = _refusal("sglang", version, {}, {"CUDA_VISIBLE_DEVICES": ""})
    assert text.startswith(f"RuntimeError: {words} (CUDA_VISIBLE_DEVICES= exposes 0 GPUs;")


def test_the_local_gpus_the_engine_sees():
    gpus = [LocalGPU(i, "NVIDIA H100", 81559, 81000, 500, uuid=f"GPU-{i}aa{i}") for i in range(2)]
    assert seen_local(visible({"CUDA_VISIBLE_DEVICES": "1"}), gpus) == [gpus[1]]
    assert seen_local(visible({"CUDA_VISIBLE_DEVICES": "0,5,1"}), gpus) == [gpus[0]]
    assert seen_local(visible({"CUDA_VISIBLE_DEVICES": "GPU-1a"}), gpus) == [gpus[1]]
    assert seen_local(None, gpus) == gpus
