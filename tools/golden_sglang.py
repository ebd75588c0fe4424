"""Golden values for the seed case, computed by each SGLang release's own code.

Runs the released `ServerArgs` resolution (0.5.9..0.5.18: `ServerArgs.__post_init__`; 0.5.19+:
`ServerArgs.resolve_once` -> `arg_groups/pipeline.py:run_resolution_pipeline`) and, when the
arguments resolve, the release's own pool sizing entry point
(`ModelRunnerKVCacheMixin._resolve_memory_pool_config`, 0.5.10..0.5.15;
`KVCacheConfigurator._resolve_memory_pool_config`, 0.5.16+) on a CPU-only machine. What the
engine would ask the GPU (device capacity, SM version, free memory) is stubbed with the inputs
below; compiled kernels (sgl_kernel, flashinfer, ...) are stubbed modules, never called.

The memory figures are inputs, not engine output: free memory before the weights load and the
weight bytes are what servefit estimates for this checkpoint (per rank, GiB), so a profile fed
the same `MemoryInputs` must reproduce these numbers exactly.

Usage (needs a venv with torch CPU, transformers 5.8 and the engine's pure-Python deps; see
tests/data/golden/README.md):
    python tools/golden_sglang.py --wheels /work/cache/wheels/sglang --out tests/data/golden/sglang_seed.json
    python tools/golden_sglang.py --release 0.5.14 --wheels ...   # one release, printed
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import json
import logging
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

RELEASES = [
    "0.5.9",
    "0.5.10",
    "0.5.10.post1",
    "0.5.11",
    "0.5.12",
    "0.5.12.post1",
    "0.5.13",
    "0.5.13.post1",
    "0.5.14",
    "0.5.15",
    "0.5.15.post1",
    "0.5.16",
    "0.5.17",
    "0.5.18",
    "0.5.19",
    "0.5.20",
    "0.5.21",
    "0.5.22",
    "0.5.23",
]

# The seed: Qwen3.6-27B (bf16 config) on 2x RTX A6000, TP 2, 32K context.
CONFIG = "src/servefit/catalog/data/Qwen__Qwen3.6-27B.DERIVED-from-nvidia-NVFP4.json"
GPU_MIB = 49140  # nvidia-smi memory.total of an RTX A6000
SM = (8, 6)
PRE_LOAD_FREE_GIB = 47.1689453125  # pre_model_load_memory (min over ranks)
WEIGHTS_GIB = 25.48039923608303  # target weights per rank
DRAFT_WEIGHTS_GIB = 0.4443845748901367  # MTP layer weights per rank
MTP = {
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}
SCENARIOS: dict[str, dict[str, Any]] = {
    "plain": {},
    "mtp": MTP,
    "plain_f085_mrr16": {"mem_fraction_static": 0.85, "max_running_requests": 16},
    "mtp_f085_mrr16": {**MTP, "mem_fraction_static": 0.85, "max_running_requests": 16},
    "mtp_f088_mrr16": {**MTP, "mem_fraction_static": 0.88, "max_running_requests": 16},
    # the two ways out of the 0.5.10-0.5.13 rejection the engine's message names
    "mtp_extra_buffer": {**MTP, "@strategy": "extra_buffer"},
    "mtp_no_radix": {**MTP, "disable_radix_cache": True},
}
# --mamba-scheduler-strategy (<= 0.5.13) became --mamba-radix-cache-strategy (0.5.14).
STRATEGY_FIELDS = ("mamba_radix_cache_strategy", "mamba_scheduler_strategy")
RESOLVED = (
    "mem_fraction_static",
    "max_running_requests",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "disable_radix_cache",
    "disable_overlap_schedule",
    "mamba_scheduler_strategy",
    "mamba_radix_cache_strategy",
    "attention_backend",
    "page_size",
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "disable_piecewise_cuda_graph",
)

# ---------------------------------------------------------------- CPU stand-ins for the GPU

STUB_PACKAGES = (
    "sgl_kernel",
    "flashinfer",
    "deep_gemm",
    "sgl_kernel_npu",
    "aiter",
    "cutlass",
    "quack",
    "tilelang",
    "mooncake",
)


class _Dummy:
    """Any attribute of a stubbed kernel package: callable, a decorator, a base class."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> Any:
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Dummy()

    def __getattr__(self, k: str) -> Any:
        if k.startswith("__"):
            raise AttributeError(k)
        return _Dummy()

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False


class _StubModule(types.ModuleType):
    __path__: list[str] = []

    def __getattr__(self, k: str) -> Any:
        if k.startswith("__"):
            raise AttributeError(k)
        return _Dummy()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in STUB_PACKAGES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _install_gpu_stubs() -> None:
    sys.meta_path.insert(0, _StubFinder())
    import torch
    import torch.library as tl
    import torchvision  # noqa: F401  (imported before the CUDA stand-ins below)

    props = types.SimpleNamespace(
        name="NVIDIA RTX A6000",
        major=SM[0],
        minor=SM[1],
        total_memory=GPU_MIB << 20,
        multi_processor_count=84,
    )
    torch.cuda.get_device_capability = lambda *a, **k: SM
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.get_device_name = lambda *a, **k: props.name
    torch.cuda.device_count = lambda: 2
    torch.cuda.current_device = lambda: 0
    register = tl.Library._register_fake

    def register_or_skip(self: Any, *a: Any, **k: Any) -> Any:
        try:  # fake impls of stubbed kernel ops have no op to attach to
            return register(self, *a, **k)
        except RuntimeError:
            return None

    tl.Library._register_fake = register_or_skip


AVAIL_GIB = [PRE_LOAD_FREE_GIB]  # what get_available_gpu_memory answers; set per phase


def _patch_engine_modules() -> None:
    """The engine's platform and memory queries, answered for an A6000 pair."""
    answers: dict[str, Any] = {
        "is_cuda": lambda: True,
        "is_cuda_alike": lambda: True,
        "is_hip": lambda: False,
        "is_npu": lambda: False,
        "is_cpu": lambda: False,
        "is_mps": lambda: False,
        "is_xpu": lambda: False,
        "is_musa": lambda: False,
        "is_hpu": lambda: False,
        "is_sm100_supported": lambda *a, **k: False,
        "is_sm90_supported": lambda *a, **k: False,
        "is_sm120_supported": lambda *a, **k: False,
        "is_blackwell": lambda: False,
        "is_blackwell_supported": lambda *a, **k: False,
        "get_device_memory_capacity": lambda *a, **k: GPU_MIB,
        "get_nvgpu_memory_capacity": lambda *a, **k: GPU_MIB,
        "get_device_sm": lambda *a, **k: SM[0] * 10 + SM[1],
        "get_device_capability": lambda *a, **k: SM,
        "get_available_gpu_memory": lambda *a, **k: AVAIL_GIB[0],
        "get_device": lambda *a, **k: "cuda",
    }
    for name, module in list(sys.modules.items()):
        if not name.startswith("sglang") or module is None:
            continue
        for attr, fn in answers.items():
            if callable(getattr(module, attr, None)):
                setattr(module, attr, fn)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("sglang") and record.levelno >= logging.INFO:
            self.lines.append(record.getMessage())


# ---------------------------------------------------------------- one release, one scenario


def _resolve(sa: Any, model_dir: str, extra: dict[str, Any]) -> Any:
    extra = dict(extra)
    if "@strategy" in extra:
        field = next(f for f in STRATEGY_FIELDS if hasattr(sa.ServerArgs, f))
        extra[field] = extra.pop("@strategy")
    args = dict(model_path=model_dir, tp_size=2, context_length=32768, device="cuda", **extra)
    s = sa.ServerArgs(**args)
    if hasattr(s, "resolve_once"):  # 0.5.19+: construction leaves the record unresolved
        s.resolve_once()
    return s


def _view(s: Any) -> Any:
    try:
        from sglang.srt.arg_groups.overrides import resolving_view
    except ImportError:
        return s
    return resolving_view(s)


def run_release(version: str, model_dir: str) -> dict[str, Any]:
    _install_gpu_stubs()
    import sglang.srt.server_args as sa

    _patch_engine_modules()
    from sizing import size  # tools/golden_sglang_sizing.py, imported after the stubs

    out: dict[str, Any] = {}
    for name, extra in SCENARIOS.items():
        records = _Records()
        logging.getLogger().addHandler(records)
        logging.getLogger().setLevel(logging.INFO)
        row: dict[str, Any] = {}
        try:
            s = _resolve(sa, model_dir, extra)
            view = _view(s)
            row["resolved"] = {k: getattr(view, k) for k in RESOLVED if hasattr(view, k)}
        except (RuntimeError, ValueError, AssertionError) as exc:  # the release's own rejection
            row["error"] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # the harness missed something: not engine output
            row["harness_error"] = f"{type(exc).__name__}: {exc}"
        if "error" not in row and "harness_error" not in row:
            try:
                _patch_engine_modules()
                row["sizing"] = size(version, s, _view(s))
            except (RuntimeError, ValueError, AssertionError) as exc:  # raised by the sizing code
                if os.environ.get("GOLDEN_DEBUG"):
                    import traceback

                    traceback.print_exc()
                row["error"] = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # the harness missed an attribute: not engine output
                row["harness_error"] = f"{type(exc).__name__}: {exc}"
        row["log"] = records.lines
        logging.getLogger().removeHandler(records)
        out[name] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", default="/work/cache/wheels/sglang")
    ap.add_argument("--release", help="run one release in this process and print its JSON")
    ap.add_argument("--out", help="write all releases to this JSON file")
    ap.add_argument(
        "--only", help="comma-separated releases to recompute, merged into an existing --out"
    )
    ns = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    if ns.release:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "config.json").write_text((root / CONFIG).read_text())
            sys.path.insert(0, str(root / "tools"))
            sys.modules["sizing"] = importlib.import_module("golden_sglang_sizing")
            print(json.dumps(run_release(ns.release, tmp), default=str))
        return
    result: dict[str, Any] = {
        "inputs": {
            "config": CONFIG,
            "gpu_mib": GPU_MIB,
            "sm": SM,
            "tp_size": 2,
            "context_length": 32768,
            "pre_load_free_gib": PRE_LOAD_FREE_GIB,
            "weights_gib": WEIGHTS_GIB,
            "draft_weights_gib": DRAFT_WEIGHTS_GIB,
            "scenarios": SCENARIOS,
        },
        "releases": {},
    }
    releases = RELEASES
    if ns.only:
        releases = [v for v in RELEASES if v in ns.only.split(",")]
        if ns.out and Path(ns.out).exists():
            result["releases"] = json.loads(Path(ns.out).read_text())["releases"]
    for version in releases:
        env = dict(os.environ, PYTHONPATH=f"{ns.wheels}/{version}", PYTHONWARNINGS="ignore")
        proc = subprocess.run(
            [sys.executable, __file__, "--release", version, "--wheels", ns.wheels],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        last = proc.stdout.strip().splitlines()[-1:] or [""]
        try:
            result["releases"][version] = json.loads(last[0])
        except json.JSONDecodeError:
            result["releases"][version] = {"harness_error": proc.stderr[-2000:]}
        print(version, "ok" if "harness_error" not in result["releases"][version] else "FAILED")
    text = json.dumps(result, indent=1, sort_keys=True, default=str)
    if ns.out:
        Path(ns.out).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
