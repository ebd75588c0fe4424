"""The GPUs a launch's engine can see, and the engine's own refusal of a layout larger than that.

    visible({"CUDA_VISIBLE_DEVICES": "0"}) -> Visible(shown="CUDA_VISIBLE_DEVICES=0", entries=(0,))
    check_launch("vllm", "0.33.0", {"tensor_parallel_size": 2}, {"CUDA_VISIBLE_DEVICES": "0"})
        raises DeviceRejection("ValueError: World size (2) is larger than the number of
        available GPUs (1) in this node. ...")

Both engines count devices through torch, which reads the visibility variables itself
(torch/cuda/__init__.py:_parse_visible_devices, torch 2.13 as vLLM 0.32 installs it):
`CUDA_VISIBLE_DEVICES` on NVIDIA; on ROCm also `HIP_VISIBLE_DEVICES` (preferred when both are
set) and `ROCR_VISIBLE_DEVICES` (applied first by the runtime). An empty value hides every GPU;
a list stops at its first entry that is not a number (`0,-1,2` is one GPU) and a repeated
entry hides them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from servefit.errors import EngineRejection
from servefit.frozen import frozen

if TYPE_CHECKING:  # NVML's records only with --gpu local: a named GPU never imports them
    from servefit.hardware.nvml import LocalGPU

__all__ = [
    "DEVICE_VARS",
    "DeviceRejection",
    "Visible",
    "check_launch",
    "check_layout",
    "seen_local",
    "visible",
]

DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


class DeviceRejection(EngineRejection):
    """The engine stops because the launch needs GPUs it cannot see: a predicted failure,
    shown as the engine's verdict (like an argparse refusal, `hints` empty)."""

    hints: tuple[str, ...] = ()


@frozen
class Visible:
    """What torch makes of the visibility variables: `shown` is the deciding assignment as
    written, `entries` the ordinals (or UUID prefixes) it keeps, in order."""

    shown: str
    entries: tuple[int | str, ...]

    @property
    def count(self) -> int:
        return len(self.entries)

    def exposes(self) -> str:
        n = self.count
        return f"{self.shown} exposes {n} GPU{'s' if n != 1 else ''}"


def _strtoul(text: str) -> int:
    """torch's `_strtoul`: the integer the text starts with, -1 when none."""
    digits = ""
    for i, c in enumerate(text):
        if c.isdigit() or (i == 0 and c in "+-"):
            digits += c
            continue
        break
    try:
        return int(digits) if digits else -1
    except ValueError:  # a lone sign
        return -1


def _with_prefix(raw: str, prefix: str) -> tuple[str, ...]:
    """torch's `parse_list_with_prefix`: UUIDs up to the first other entry; a repeat hides all."""
    out: list[str] = []
    for elem in raw.split(","):
        if elem in out:
            return ()
        if not elem.startswith(prefix):
            break
        out.append(elem)
    return tuple(out)


def _parse(raw: str) -> tuple[int | str, ...]:
    # torch/cuda/__init__.py:_parse_visible_devices
    if raw.startswith("GPU-"):
        return _with_prefix(raw, "GPU-")
    if raw.startswith("MIG-"):
        return _with_prefix(raw, "MIG-")
    out: list[int] = []
    for elem in raw.split(","):
        x = _strtoul(elem.strip())
        if x in out:  # a repeated ordinal gives the empty set
            return ()
        if x < 0:  # a negative or non-numeric entry ends the list
            break
        out.append(x)
    return tuple(out)


def visible(env: Mapping[str, str], vendor: str = "nvidia") -> Visible | None:
    """The GPUs torch lets the engine see under `env`; None when no variable limits them.
    On ROCm (`vendor` "amd") ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES are read first, as
    torch/cuda/__init__.py:_parse_visible_devices does when `torch.version.hip` is set."""
    var = "CUDA_VISIBLE_DEVICES"
    raw = env.get(var)
    if vendor == "amd":
        hip, rocr = env.get("HIP_VISIBLE_DEVICES"), env.get("ROCR_VISIBLE_DEVICES")
        if rocr is not None:
            rocr_count = len(rocr.split(","))
            if hip is None:
                return Visible(f"ROCR_VISIBLE_DEVICES={rocr}", tuple(range(rocr_count)))
            if len(hip.split(",")) > rocr_count:
                raise DeviceRejection(
                    "RuntimeError: HIP_VISIBLE_DEVICES contains more devices than "
                    "ROCR_VISIBLE_DEVICES (torch/cuda/__init__.py:_parse_visible_devices)"
                )
            var, raw = "HIP_VISIBLE_DEVICES", hip
        elif hip is not None:
            var, raw = "HIP_VISIBLE_DEVICES", hip
    if raw is None:
        return None
    return Visible(f"{var}={raw}", _parse(raw))


def seen_local(vis: Visible | None, devices: Sequence[LocalGPU]) -> list[LocalGPU]:
    """The NVML devices the engine sees, in its order: ordinals past the machine's count end
    the list, UUID prefixes match one device each (torch/cuda/__init__.py:_device_count_nvml,
    _transform_uuid_to_ordinals). NVML numbers GPUs in PCI bus order, as CUDA does with
    CUDA_DEVICE_ORDER=PCI_BUS_ID."""
    if vis is None:
        return list(devices)
    by_index = {d.index: d for d in devices}
    out: list[LocalGPU] = []
    for entry in vis.entries:
        if isinstance(entry, int):
            found = by_index.get(entry)
        elif entry.startswith("MIG-"):  # torch leaves MIG instances to the CUDA runtime
            return list(devices[: vis.count])
        else:
            hits = [d for d in devices if d.uuid and d.uuid.startswith(entry)]
            found = hits[0] if len(hits) == 1 else None
        if found is None or found in out:
            break
        out.append(found)
    return out


# --------------------------------------------------------------------------------------------
# The engines' refusals
# --------------------------------------------------------------------------------------------


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


def _size(values: Mapping[str, Any], key: str) -> int:
    val = values.get(key)
    return val if isinstance(val, int) and not isinstance(val, bool) and val > 0 else 1


def check_launch(
    engine: str,
    version: str,
    values: Mapping[str, Any],
    env: Mapping[str, str],
    vendor: str = "nvidia",
) -> Visible | None:
    """The GPUs the launch's engine sees under `env` (None: not limited), after raising the
    engine's own error (DeviceRejection) when its ranks need more than that. `values` are the
    engine's args by dest, `version` the profile's release."""
    if vendor == "cpu":
        return None
    if engine == "vllm" and vendor == "amd":
        _check_rocm_env(env)
    vis = visible(env, vendor)
    if vis is not None:
        check_layout(engine, version, values, vis, vendor)
    return vis


def check_layout(
    engine: str, version: str, values: Mapping[str, Any], vis: Visible, vendor: str = "nvidia"
) -> None:
    """Raise the engine's own error (DeviceRejection) when the launch's ranks need more GPUs
    than `vis` exposes."""
    if engine == "vllm":
        _check_vllm(_release(version), values, vis, vendor)
    elif engine == "sglang":
        _check_sglang(_release(version), values, vis, vendor)


def _check_rocm_env(env: Mapping[str, str]) -> None:
    # vllm/platforms/rocm.py:_sync_hip_cuda_env_vars, run when the platform is imported: both
    # set (an empty value counts as unset) and different stops the engine
    hip = env.get("HIP_VISIBLE_DEVICES") or None
    cuda = env.get("CUDA_VISIBLE_DEVICES") or None
    if hip is not None and cuda is not None and hip != cuda:
        raise DeviceRejection(
            f"ValueError: Inconsistent GPU visibility env vars: HIP_VISIBLE_DEVICES='{hip}' vs "
            f"CUDA_VISIBLE_DEVICES='{cuda}'. Please set only one, or ensure they match. "
            "(vllm/platforms/rocm.py:_sync_hip_cuda_env_vars)"
        )


def _layout_text(parts: Iterable[tuple[str, int]]) -> str:
    return " x ".join(f"{name} {n}" for name, n in parts if n > 1) or "tp 1"


def _check_vllm(
    release: tuple[int, ...], values: Mapping[str, Any], vis: Visible, vendor: str
) -> None:
    tp, pp = _size(values, "tensor_parallel_size"), _size(values, "pipeline_parallel_size")
    pcp, dp = _size(values, "prefill_context_parallel_size"), _size(values, "data_parallel_size")
    backend = values.get("distributed_executor_backend")
    if _size(values, "nnodes") > 1 or backend in ("ray", "external_launcher"):
        return  # ranks placed across nodes or by Ray: this node's count does not decide
    world, n = tp * pp * pcp, vis.count
    layout = (("tp", tp), ("pp", pp), ("pcp", pcp))
    if world > n and backend is None and world * dp > 1:
        if release >= (0, 20, 0) and vendor != "amd":
            # vllm/config/parallel.py:ParallelConfig.__post_init__ (0.20, 0.24, 0.32, 0.33):
            # with no executor backend given, a world (TP x PP x PCP) larger than
            # current_platform.device_count() (torch's count, under CUDA_VISIBLE_DEVICES)
            # stops the engine; it asks is_cuda(), which ROCm is not
            raise DeviceRejection(
                f"ValueError: World size ({world}) is larger than the number of available "
                f"GPUs ({n}) in this node. If this is intentional and you are using: - ray, "
                "set '--distributed-executor-backend ray'. - multiprocessing, set '--nnodes' "
                f"appropriately. ({vis.exposes()}; vllm/config/parallel.py:"
                "ParallelConfig.__post_init__)"
            )
        if release < (0, 20, 0):
            raise _unplaced(layout, world, vis)
    local_dp = 1 if _dp_placed_elsewhere(values) else dp
    if world * local_dp > n:
        if release < (0, 24, 0):
            raise _unplaced((*layout, ("dp", local_dp)), world * local_dp, vis)
        # vllm/v1/worker/gpu_worker.py:Worker.init_device (0.24, 0.32, 0.33): local rank + DP
        # local rank x world (ParallelConfig.get_local_gpu_index) must be below
        # torch.accelerator.device_count(); the first rank past the count is rank n
        raise DeviceRejection(
            f"AssertionError: DP adjusted local rank {n} is out of bounds for {n} devices. "
            f"({_layout_text((*layout, ('dp', local_dp)))} needs {world * local_dp} GPUs and "
            f"{vis.exposes()}; vllm/v1/worker/gpu_worker.py:Worker.init_device)"
        )


def _unplaced(layout: Iterable[tuple[str, int]], need: int, vis: Visible) -> DeviceRejection:
    """Releases before 0.20 (0.24 for DP) whose words servefit has not read: vLLM 0.10
    switches to the Ray executor when the world is larger than the node's GPUs
    (vllm/config.py:ParallelConfig.__post_init__), which has none to place the workers on."""
    return DeviceRejection(
        f"{_layout_text(layout)} needs {need} GPUs and {vis.exposes()}: vLLM cannot place its "
        "workers on this node (0.10 falls back to the Ray executor here: vllm/config.py:"
        "ParallelConfig.__post_init__)"
    )


def _dp_placed_elsewhere(values: Mapping[str, Any]) -> bool:
    """DP ranks this process does not put on its own GPUs from index 0: an explicit rank or
    local count, external / hybrid load balancing, --device-ids, a Ray DP backend."""
    keys = (
        "data_parallel_rank",
        "data_parallel_start_rank",
        "data_parallel_size_local",
        "device_ids",
    )
    return (
        any(values.get(k) is not None for k in keys)
        or bool(values.get("data_parallel_external_lb"))
        or bool(values.get("data_parallel_hybrid_lb"))
        or bool(values.get("headless"))
        or values.get("data_parallel_backend") == "ray"
    )


# SGLang's ServerArgs picks the device before anything else when --device is not given
# (sglang/srt/utils/common.py:get_device, from ServerArgs' default-value handling): with no GPU
# visible torch.cuda.is_available() is False and it raises, in each release's words.
_NO_ACCELERATOR = (
    (
        (0, 5, 13),
        "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.",
    ),
    ((0, 5, 10), "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available."),
    ((0, 0, 0), "No accelerator (CUDA, XPU, HPU, NPU, MUSA) is available."),
)


def _check_sglang(
    release: tuple[int, ...], values: Mapping[str, Any], vis: Visible, vendor: str
) -> None:
    if _size(values, "nnodes") > 1:
        return  # each node places its own share of the ranks
    n, api = vis.count, "HIP" if vendor == "amd" else "CUDA"
    if n == 0:
        if values.get("device") is None:
            text = next(t for since, t in _NO_ACCELERATOR if release >= since)
            raise DeviceRejection(
                f"RuntimeError: {text} ({vis.exposes()}; sglang/srt/utils/common.py:get_device)"
            )
        raise DeviceRejection(
            f"RuntimeError: No {api} GPUs are available ({vis.exposes()}; torch set_device in "
            "sglang/srt/model_executor/model_runner.py:ModelRunner)"
        )
    found = _first_unseen_rank(values, n)
    if found is not None:
        gpu_id, rank = found
        # sglang/srt/entrypoints/engine.py (and managers/data_parallel_controller.py for DP
        # without DP attention) give each rank gpu_id = base_gpu_id + DP offset +
        # pp_rank x tp + tp_rank x gpu_id_step; ModelRunner (init_torch_distributed in 0.5.9,
        # __init__ from 0.5.17) calls torch set_device(gpu_id), which fails past the count
        raise DeviceRejection(
            f"{api} error: invalid device ordinal (the {rank} runs on GPU {gpu_id} and "
            f"{vis.exposes()}; sglang/srt/model_executor/model_runner.py:ModelRunner)"
        )


def _first_unseen_rank(values: Mapping[str, Any], n: int) -> tuple[int, str] | None:
    """(gpu_id, rank) of the first rank, in launch order, whose GPU index is n or more."""
    tp, pp, dp = (_size(values, k) for k in ("tp_size", "pp_size", "dp_size"))
    base = values.get("base_gpu_id") or 0
    step = values.get("gpu_id_step") or 1
    dp_groups = 1 if values.get("enable_dp_attention") else dp
    for dp_rank in range(dp_groups):
        for pp_rank in range(pp):
            for tp_rank in range(tp):
                gpu_id = base + dp_rank * tp * pp * step + pp_rank * tp + tp_rank * step
                if gpu_id >= n:
                    where = [f"TP rank {tp_rank}"]
                    if pp > 1:
                        where.append(f"PP rank {pp_rank}")
                    if dp_groups > 1:
                        where.append(f"DP rank {dp_rank}")
                    return gpu_id, ", ".join(where)
    return None
