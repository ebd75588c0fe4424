"""Preflight: the plan's verdict, GPUs through NVML (a fake NVML result here: this machine has
no GPU), CUDA_VISIBLE_DEVICES against the parallel size, and the port."""

from __future__ import annotations

import dataclasses
import os
import socket

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.hardware.nvml import GPUProcess, LocalGPU, LocalGPUs
from servefit.launch.command import parse_launch
from servefit.launch.preflight import minimal_fix, run_preflight
from tests.seedcase import HAND_TUNED, SEED

FIX_ARGS = {**SEED, **HAND_TUNED}
SEED_ERROR = (
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: self.server_args.mem_fraction_static=0.85"
)
A6000_MIB = 49140  # nvidia-smi total of an RTX A6000


def request(args: dict) -> PlanRequest:
    return PlanRequest(model="Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", args=args)


def launch(port: int, env: str = "") -> object:
    words = f"{env} python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp-size 2 --port {port}"
    return parse_launch([words.strip()])


def gpu(index: int, used_mib: int = 0, procs: tuple = ()) -> LocalGPU:
    return LocalGPU(
        index=index,
        name="NVIDIA RTX A6000",
        total_mib=A6000_MIB,
        free_mib=A6000_MIB - used_mib,
        used_mib=used_mib,
        processes=procs,
        uuid=f"GPU-{index}a6000-0000",
    )


def no_nvml() -> LocalGPUs:
    return LocalGPUs(reason="NVML library not found (no NVIDIA driver on this machine)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def by_name(pre, name):
    return next(c for c in pre.checks if c.name == name)


def test_a_launch_the_plan_predicts_to_fail_is_refused_with_the_engines_error():
    pre = run_preflight(
        launch(free_port()),
        request({**SEED, "mem_fraction_static": 0.85}),
        gpus_fn=no_nvml,
        with_fix=False,
    )
    check = by_name(pre, "plan")
    assert pre.refused and check.status == "fail"
    assert check.message == f"predicted to fail (sglang 0.5.9 rules): {SEED_ERROR}"
    assert check.detail[0].startswith("cause: speculative mamba state")


def test_the_seed_fix_passes_and_without_nvml_the_gpu_checks_say_what_was_skipped():
    pre = run_preflight(launch(free_port()), request(FIX_ARGS), gpus_fn=no_nvml, with_fix=False)
    assert not pre.refused
    # README: the fix starts with 337,294 KV tokens and 16 running requests
    assert by_name(pre, "plan").message.startswith(
        "starts (sglang 0.5.9 rules): 337,294 KV tokens, up to 16 running requests"
    )
    nvml = by_name(pre, "nvml")
    assert nvml.status == "skip" and nvml.message == (
        "GPU free memory and processes not checked: NVML library not found (no NVIDIA driver on "
        "this machine)"
    )


def test_minimal_fix_comes_from_explain_when_installed():
    pytest.importorskip("servefit._explain.analysis")
    flags = minimal_fix(request({**SEED, "mem_fraction_static": 0.85}))
    assert flags and flags.startswith("--")


def test_memory_held_by_another_process_is_replanned_and_refused():
    held = 20 * 1024  # MiB held on GPU 1 by someone else
    gpus = LocalGPUs(devices=(gpu(0), gpu(1, held, (GPUProcess(4242, "python3", held),))))
    req = request(FIX_ARGS)
    pre = run_preflight(launch(free_port()), req, gpus_fn=lambda: gpus, with_fix=False)
    mem = by_name(pre, "gpu-memory")
    # the engine sees 20 GiB less before its weights: modelled pre-load free - 20
    free_before = plan(req).per_rank.pre_load_free_gib - 20.0
    expected = plan(dataclasses.replace(req, free_gib=round(free_before, 3)))
    assert expected.verdict == "fail"  # 27.2 GiB before 25.5 GiB of weights leaves too little
    assert mem.status == "fail" and pre.refused
    assert mem.message == (
        f"20.00 GiB is already in use on a GPU the engine needs; with {free_before:.2f} GiB free "
        f"before the weights the launch fails: {expected.error}"
    )
    procs = by_name(pre, "gpu-processes")
    assert procs.status == "warn" and procs.detail == ["GPU 1: pid 4242 python3 (20480 MiB)"]


def test_a_little_memory_held_elsewhere_shrinks_the_kv_pool():
    held = 2 * 1024
    gpus = LocalGPUs(devices=(gpu(0, held, (GPUProcess(77, "Xorg", held),)), gpu(1)))
    pre = run_preflight(
        launch(free_port()), request(FIX_ARGS), gpus_fn=lambda: gpus, with_fix=False
    )
    mem = by_name(pre, "gpu-memory")
    assert mem.status == "warn" and not pre.refused
    assert mem.message.startswith(
        "2.00 GiB is already in use on a GPU the engine needs: it starts with "
    )
    assert mem.message.endswith(" KV tokens instead of 337,294")


def test_visible_devices_fewer_than_the_tp_size():
    gpus = LocalGPUs(devices=(gpu(0), gpu(1)))
    pre = run_preflight(launch(free_port(), "CUDA_VISIBLE_DEVICES=1"), None, gpus_fn=lambda: gpus)
    check = by_name(pre, "visible-devices")
    assert check.status == "fail" and check.message == (
        "CUDA_VISIBLE_DEVICES=1 gives the engine 1 GPU; it needs 2 GPUs (tp 2)"
    )
    # without NVML the count is still checked
    pre = run_preflight(launch(free_port(), "CUDA_VISIBLE_DEVICES=1"), None, gpus_fn=no_nvml)
    assert by_name(pre, "visible-devices").message == (
        "CUDA_VISIBLE_DEVICES=1 exposes 1 GPU; the engine needs 2 GPUs (tp 2)"
    )


def test_visible_devices_by_uuid_and_an_unknown_index():
    gpus = LocalGPUs(devices=(gpu(0), gpu(1), gpu(2)))
    ok = run_preflight(
        launch(free_port(), "CUDA_VISIBLE_DEVICES=GPU-2a6,0"), None, gpus_fn=lambda: gpus
    )
    assert by_name(ok, "visible-devices").message == "GPU 2, 0 (NVIDIA RTX A6000)"
    bad = run_preflight(launch(free_port(), "CUDA_VISIBLE_DEVICES=0,7"), None, gpus_fn=lambda: gpus)
    check = by_name(bad, "visible-devices")
    assert check.status == "fail" and "entry '7' names no GPU NVML sees" in check.message


def test_port_in_use_names_the_process_holding_it():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        pre = run_preflight(launch(port), None, gpus_fn=no_nvml)
    check = by_name(pre, "port")
    assert check.status == "fail" and pre.refused
    assert check.message.startswith(f"127.0.0.1:{port} is in use by pid {os.getpid()} (")
    assert check.message.endswith(
        "Address already in use; choose another --port or stop that server"
    )


def test_not_planned_is_a_skip_not_a_refusal():
    pre = run_preflight(
        launch(free_port()), None, plan_skip_reason="no --gpu given", gpus_fn=no_nvml
    )
    assert by_name(pre, "plan").message == "not planned: no --gpu given" and not pre.refused
