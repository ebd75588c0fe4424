#!/usr/bin/env python3
"""Golden KV-cache figures from vLLM's own code, release by release.

    python tools/golden_vllm.py --wheels /work/cache/wheels/vllm \
        --out tests/data/golden/vllm_kv.json            # every release, every case
    python tools/golden_vllm.py --wheels DIR --releases 0.24.0 0.33.0 --print

Runs the *released* pure functions on the CPU, one fresh interpreter per release, with
`sys.path` pointing at the release's extracted `vllm/*.py` (`unzip WHEEL 'vllm/*.py'`). The
interpreter needs torch (CPU build), transformers and vLLM's light Python dependencies; no GPU
and no compiled vLLM extension are used. What each case runs, in the engine's order:

1. the prefix-caching default: EngineArgs._set_default_chunked_prefill_and_prefix_caching_args
   with ModelConfig.is_prefix_caching_supported (0.12+), get_chunked_prefill_prefix_caching_
   defaults (0.11.1), _set_default_args / _set_default_args_v1 (older: on for generation);
2. vllm/model_executor/models/config.py: HybridAttentionMambaModelConfig.verify_and_update_config
   (with MambaModelConfig and the model's own config hook, e.g. Qwen3_5ForConditionalGeneration
   Config), then, from 0.20.0, Platform._align_hybrid_block_size with the FLASH_ATTN backend
   class (the CUDA default before SM100; the worker-side phase 1 keeps block size 16);
3. the layers' specs: MambaBase.get_kv_cache_spec called on a stand-in layer whose state shapes
   and dtypes come from the model class's get_mamba_state_shape_from_config /
   get_mamba_state_dtype_from_config, and FullAttentionSpec as the attention layer builds it;
4. vllm/v1/core/kv_cache_utils.py:get_kv_cache_configs (get_kv_cache_config before 0.11) on
   the given available memory, per worker, with the engine's log lines captured, and
   get_max_concurrency_for_kv_cache_config; with a too-small memory, the ValueError text.

Where the engine would consult the GPU or walk the loaded model, the stand-in answers as an
RTX A6000 (SM 8.6) would: no FlashInfer GDN prefill (so no prefill-checkpoint alignment), the
FLASH_ATTN backend. Qwen3.5's config classes are named in the model registry of 0.17.0 on; its
model module imports torchvision, so the state shapes are taken from Qwen3NextForCausalLM's
classmethods, which the script first checks are the same code (AST) as Qwen3_5's in that
release.

The output (JSON) is committed as tests/data/golden/vllm_kv.json; tests/engines/vllm/
test_golden.py compares servefit's plans with it.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "src" / "servefit" / "catalog" / "data"
GiB = 1 << 30

# name -> (config file in the catalog, TP, max_model_len, speculative tokens, prefix caching
# (None = the release's default), available KV memory per worker in bytes, first release)
CASES: dict[str, dict[str, Any]] = {
    "seed": dict(cfg="Qwen__Qwen3.6-27B.DERIVED-from-nvidia-NVFP4.json", tp=2, mml=32768,
                 k=0, pc=None, mem=14 * GiB, since="0.17.0"),
    "seed-mtp3": dict(cfg="Qwen__Qwen3.6-27B.DERIVED-from-nvidia-NVFP4.json", tp=2, mml=32768,
                      k=3, pc=None, mem=14 * GiB, since="0.17.0"),
    "seed-pc": dict(cfg="Qwen__Qwen3.6-27B.DERIVED-from-nvidia-NVFP4.json", tp=2, mml=32768,
                    k=0, pc=True, mem=14 * GiB, since="0.17.0"),
    "seed-mtp3-pc": dict(cfg="Qwen__Qwen3.6-27B.DERIVED-from-nvidia-NVFP4.json", tp=2,
                         mml=32768, k=3, pc=True, mem=14 * GiB, since="0.17.0"),
    "seed-nopc": dict(cfg="Qwen__Qwen3.6-27B.DERIVED-from-nvidia-NVFP4.json", tp=2, mml=32768,
                      k=0, pc=False, mem=14 * GiB, since="0.17.0"),
    "seed-small": dict(cfg="Qwen__Qwen3.6-27B.DERIVED-from-nvidia-NVFP4.json", tp=2,
                       mml=262144, k=0, pc=None, mem=1 * GiB, since="0.17.0"),
    "next": dict(cfg="Qwen__Qwen3-Next-80B-A3B-Thinking.json", tp=2, mml=32768, k=0, pc=None,
                 mem=40 * GiB, since="0.10.2"),
    "next-pc": dict(cfg="Qwen__Qwen3-Next-80B-A3B-Thinking.json", tp=2, mml=32768, k=0,
                    pc=True, mem=40 * GiB, since="0.10.2"),
    "next-small": dict(cfg="Qwen__Qwen3-Next-80B-A3B-Thinking.json", tp=2, mml=262144, k=0,
                       pc=None, mem=1 * GiB, since="0.10.2"),
    "dense": dict(cfg="Qwen__Qwen3-8B.json", tp=1, mml=32768, k=0, pc=None, mem=10 * GiB,
                  since="0.10.0"),
    "dense-small": dict(cfg="Qwen__Qwen3-8B.json", tp=1, mml=40960, k=0, pc=None,
                        mem=1 * GiB, since="0.10.0"),
    "dense-none": dict(cfg="Qwen__Qwen3-8B.json", tp=1, mml=40960, k=0, pc=None, mem=0,
                       since="0.10.0"),
}  # fmt: skip


def _vt(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


# ---------------------------------------------------------------------------------------------
# One release, in its own interpreter
# ---------------------------------------------------------------------------------------------


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        # the missing compiled extension is this harness's, not the engine's
        if record.levelno >= logging.INFO and "vllm._C" not in msg:
            self.lines.append(msg)


def _same_code(path_a: Path, qual_a: str, path_b: Path, qual_b: str) -> bool:
    def body(path: Path, qual: str) -> str:
        cls, meth = qual.split(".")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for f in node.body:
                    if isinstance(f, ast.FunctionDef) and f.name == meth:
                        f.decorator_list = []
                        return ast.dump(f, annotate_fields=False, include_attributes=False)
        raise LookupError(f"{path}:{qual}")

    return body(path_a, qual_a) == body(path_b, qual_b)


def run_release(version: str, wheels: Path, cases: list[str]) -> dict[str, Any]:
    root = wheels / version
    sys.path.insert(0, str(root))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
    import torch  # noqa: F401

    _quiet_triton_placeholder()
    import vllm.v1.core.kv_cache_utils as kvu
    import vllm.v1.kv_cache_interface as kvi

    try:  # 0.33.0: the planning half of kv_cache_utils moved to kv_cache_planning
        import vllm.v1.core.kv_cache_planning as kvp
    except ImportError:
        kvp = None
    if kvp is not None:
        kvu = _Merged(kvp, kvu)

    cap = Capture()
    logging.getLogger("vllm").addHandler(cap)
    logging.getLogger("vllm").setLevel(logging.INFO)
    out: dict[str, Any] = {}
    for name in cases:
        case = CASES[name]
        if _vt(version) < _vt(case["since"]):
            continue
        cap.lines.clear()
        _reset_once_caches()
        try:
            out[name] = _run_case(version, root, case, kvu, kvi, cap)
        except Exception as exc:  # the engine's own error is a result
            out[name] = {"error": f"{type(exc).__name__}: {exc}", "logs": list(cap.lines)}
    return out


def _quiet_triton_placeholder() -> None:
    """Without a GPU driver, vLLM replaces triton by a placeholder module; the FLA kernels'
    module-level `tl.exp`-style names (imported with the GDN models) must resolve to
    something: nothing here runs a kernel."""
    try:
        import vllm.triton_utils.importing as imp
    except ImportError:
        return
    placeholder = getattr(imp, "TritonLanguagePlaceholder", None)
    if placeholder is not None and not hasattr(placeholder, "__getattr__"):
        placeholder.__getattr__ = lambda self, name: None


def _reset_once_caches() -> None:
    """vllm/logger.py's *_once helpers are lru_caches: each case logs as a fresh engine."""
    import vllm.logger as vlog

    for obj in vars(vlog).values():
        if callable(getattr(obj, "cache_clear", None)):
            obj.cache_clear()


def _config(case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    raw = json.loads((CATALOG / case["cfg"]).read_text())
    text = raw.get("text_config") or raw
    return raw, text


class _Merged:
    """Attribute lookup over two modules, the first one first."""

    def __init__(self, *mods: Any) -> None:
        self._mods = mods

    def __getattr__(self, name: str) -> Any:
        for m in self._mods:
            if hasattr(m, name):
                return getattr(m, name)
        raise AttributeError(name)


class NS(SimpleNamespace):
    """A stand-in config object: a missing attribute names itself."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"stand-in config has no {name!r}")


def _model_class(version: str, root: Path, arch: str) -> Any:
    from vllm.model_executor.models.qwen3_next import Qwen3NextForCausalLM

    if arch.startswith("Qwen3_5"):
        a = root / "vllm/model_executor/models/qwen3_5.py"
        b = root / "vllm/model_executor/models/qwen3_next.py"
        owner = (
            "Qwen3_5ForCausalLMBase"
            if "class Qwen3_5ForCausalLMBase" in a.read_text()
            else "Qwen3_5ForConditionalGeneration"
        )
        for meth in ("get_mamba_state_shape_from_config", "get_mamba_state_dtype_from_config"):
            qual = f"{owner}.{meth}"
            if "class Qwen3_5ForConditionalGeneration" in a.read_text() and meth in a.read_text():
                try:
                    same = _same_code(a, qual, b, f"Qwen3NextForCausalLM.{meth}")
                except LookupError:
                    same = _same_code(
                        a, f"Qwen3_5ForConditionalGeneration.{meth}", b,
                        f"Qwen3NextForCausalLM.{meth}",
                    )
                if not same:
                    raise RuntimeError(f"{version}: Qwen3.5 {meth} differs from Qwen3-Next's")
    return Qwen3NextForCausalLM


def _vllm_config(version: str, case: dict[str, Any], raw: dict, text: dict) -> NS:
    import torch
    from vllm.config import CacheConfig

    arch = raw["architectures"][0]
    tp = case["tp"]
    hf_text = SimpleNamespace(**text)
    kv_heads = text["num_key_value_heads"]
    head = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    model_config = NS(
        max_model_len=case["mml"],
        original_max_model_len=case["mml"],
        dtype=torch.bfloat16,
        hf_config=SimpleNamespace(**{**raw, "model_type": raw.get("model_type")}),
        hf_text_config=hf_text,
        architecture=arch,
        architectures=[arch],
        model=arch,
        is_hybrid=True,
        use_mla=False,
        is_attention_free=False,
        runner_type="generate",
        pooler_config=None,
        attn_type="hybrid",
        supports_mamba_prefix_caching=False,  # GDN models never declare it
        supports_kv_cache_grouping=False,  # SupportsKVCacheGrouping: not the Qwen models
        get_num_kv_heads=lambda pc: max(1, kv_heads // pc.tensor_parallel_size),
        get_head_size=lambda: head,
        get_mamba_chunk_size=lambda: None,
        is_multimodal_model="vision_config" in raw,
        _model_info=SimpleNamespace(architecture=arch),
    )
    fields = getattr(CacheConfig, "__dataclass_fields__", {})
    kwargs: dict[str, Any] = {"block_size": 16, "gpu_memory_utilization": 0.9}
    if "swap_space" in fields:
        kwargs["swap_space"] = 0
    if "cache_dtype" in fields:
        kwargs["cache_dtype"] = "auto"
    try:
        cache_config = CacheConfig(**kwargs)
    except Exception:
        cache_config = CacheConfig(**{k: v for k, v in kwargs.items() if k != "swap_space"})
    spec = (
        NS(
            num_speculative_tokens=case["k"],
            method="mtp",
            use_eagle=lambda: True,  # SpeculativeConfig.use_eagle: method in (..., "mtp", ...)
            use_multi_module_mtp=lambda: False,  # one MTP layer
            use_eagle_block_drop=lambda: True,  # disable_eagle_block_drop defaults to False
            disable_eagle_block_drop=False,
        )
        if case["k"]
        else None
    )
    return NS(
        model_config=model_config,
        cache_config=cache_config,
        parallel_config=NS(
            tensor_parallel_size=tp,
            pipeline_parallel_size=1,
            data_parallel_size=1,
            decode_context_parallel_size=1,
            prefill_context_parallel_size=1,
            enable_expert_parallel=False,
            world_size=tp,
        ),
        scheduler_config=NS(
            disable_hybrid_kv_cache_manager=False,
            enable_chunked_prefill=True,
            max_num_batched_tokens=2048,
            max_num_seqs=256,
            long_prefill_token_threshold=0,
            disable_chunked_mm_input=False,
        ),
        speculative_config=spec,
        num_speculative_tokens=case["k"],
        num_prefill_lookahead_tokens=1 if case["k"] else 0,  # VllmConfig's, eagle-family: 1
        kv_transfer_config=None,
        kv_events_config=None,
        attention_config=NS(backend=None, use_cross_layer_kv_cache=False, hisparse_config=None),
        compilation_config=NS(cudagraph_mode=None, mode=0),
        lora_config=None,
        ec_transfer_config=None,
        additional_config={},
        load_config=NS(load_format="auto"),
        observability_config=None,
        profiler_config=None,
        device_config=NS(device_type="cuda"),
    )


def _prefix_caching_default(version: str, vc: NS) -> bool:
    from vllm.engine.arg_utils import EngineArgs

    mc = vc.model_config
    if hasattr(EngineArgs, "_set_default_chunked_prefill_and_prefix_caching_args"):
        from vllm.config.model import ModelConfig

        mc.is_prefix_caching_supported = ModelConfig.is_prefix_caching_supported.fget(mc)
        mc.is_chunked_prefill_supported = True
        me = NS(
            enable_chunked_prefill=None,
            enable_prefix_caching=None,
            prefill_context_parallel_size=1,
            enable_prompt_embeds=False,
        )
        EngineArgs._set_default_chunked_prefill_and_prefix_caching_args(me, mc)
        return bool(me.enable_prefix_caching)
    if hasattr(EngineArgs, "get_chunked_prefill_prefix_caching_defaults"):
        return bool(EngineArgs.get_chunked_prefill_prefix_caching_defaults(mc)[1])
    return True  # _set_default_args(_v1): "V1 always uses ... prefix caching"


def _warm_imports(version: str) -> None:
    if _vt(version) >= (0, 20, 0):
        import vllm.platforms.interface  # noqa: F401
        import vllm.v1.attention.backends.flash_attn  # noqa: F401
        from vllm.config.vllm import set_current_vllm_config  # noqa: F401


def _align(version: str, vc: NS, model_cls: Any, cap: Capture) -> None:
    import vllm.model_executor.models.config as mcfg
    from vllm.model_executor.models import ModelRegistry

    ModelRegistry.resolve_model_cls = lambda *a, **k: (model_cls, vc.model_config.architecture)
    mcfg.ModelRegistry = ModelRegistry
    # SM 8.6: not the SM100 family (0.11.1-0.17: 32-token alignment for head 256 there)
    plat = getattr(mcfg, "current_platform", None)
    if plat is not None:
        for name in ("is_device_capability", "is_device_capability_family"):
            with contextlib.suppress(Exception):
                setattr(type(plat), name, classmethod(lambda cls, *a, **k: False))
    hook = mcfg.MODELS_CONFIG_MAP.get(vc.model_config.architecture)
    if hook is not None:
        hook.verify_and_update_config(vc)
    mcfg.HybridAttentionMambaModelConfig.verify_and_update_config(vc)
    if _vt(version) < (0, 20, 0):
        return
    from vllm.platforms import interface
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    platform = interface.Platform
    platform._find_non_ssm_backends = classmethod(lambda cls, c: [FlashAttentionBackend])
    import vllm.model_executor.layers.mamba.abstract as abstract

    if hasattr(abstract, "get_mamba_prefill_checkpoint_alignment"):
        # no FlashInfer GDN prefill on SM 8.6: no layer exports prefill checkpoints
        abstract.get_mamba_prefill_checkpoint_alignment = lambda c: None
    vc.cache_config.block_size = 16  # phase 1: FLASH_ATTN keeps the default
    vc.cache_config.user_specified_block_size = False
    from vllm.config.vllm import set_current_vllm_config

    with set_current_vllm_config(vc):
        platform._align_hybrid_block_size(vc, FlashAttentionBackend)


def _specs(version: str, vc: NS, model_cls: Any, kvi: Any, layer_types: list[str]) -> dict:
    import torch

    cc = vc.cache_config
    if model_cls is not None:
        from vllm.model_executor.layers.mamba.abstract import MambaBase
    head = vc.model_config.get_head_size()
    heads = vc.model_config.get_num_kv_heads(vc.parallel_config)
    attn_block = cc.block_size
    if model_cls is not None and (0, 18, 0) <= _vt(version) < (0, 20, 0):
        attn_block = 16  # the worker's update_block_size_for_backend resets hybrids to 16
    fields = kvi.FullAttentionSpec.__dataclass_fields__
    akw: dict[str, Any] = dict(
        block_size=attn_block, num_kv_heads=heads, head_size=head, dtype=torch.bfloat16
    )
    if "head_size_v" in fields:
        akw["head_size_v"] = head
    if "use_mla" in fields:
        akw["use_mla"] = False
    attn = kvi.FullAttentionSpec(**akw)
    mamba = None
    if model_cls is not None:
        shapes = model_cls.get_mamba_state_shape_from_config(vc)
        dtypes = model_cls.get_mamba_state_dtype_from_config(vc)
        layer = NS(
            get_state_shape=lambda: shapes,
            get_state_dtype=lambda: dtypes,
            mamba_type=getattr(model_cls, "mamba_type", None) or _gdn_type(),
            is_kv_cache_tp_replicated=False,
        )
        if hasattr(MambaBase, "get_kv_cache_spec"):
            mamba = MambaBase.get_kv_cache_spec(layer, vc)
        else:  # up to 0.11.0 the model runner builds it (gpu_model_runner.py:get_kv_cache_spec)
            mamba = kvi.MambaSpec(
                shapes=shapes,
                dtypes=dtypes,
                block_size=vc.model_config.max_model_len,
                page_size_padded=cc.mamba_page_size_padded,
                mamba_type=layer.mamba_type,
                num_speculative_blocks=case_k(vc),
            )
    specs: dict[str, Any] = {}
    for i, kind in enumerate(layer_types):
        specs[f"model.layers.{i}.{'self_attn.attn' if kind == 'full_attention' else 'linear_attn'}"] = (
            attn if kind == "full_attention" else mamba
        )
    for i in range(vc.model_config.hf_text_config.__dict__.get("mtp_num_hidden_layers", 0)
                   if vc.speculative_config else 0):
        # gpu_model_runner.py:get_kv_cache_spec marks a draft layer's spec is_draft (0.33.0;
        # compare=False, so it joins the target's attention group)
        draft = attn
        if "is_draft" in fields:
            from dataclasses import replace

            draft = replace(attn, is_draft=True)
        specs[f"mtp.layers.{i}.self_attn.attn"] = draft
    return specs


def _engine_core(version: str, vc: NS, specs: dict, mem: int, workers: int, kvu: Any) -> Any:
    """v1/engine/core.py:EngineCore._initialize_kv_caches, the KV-cache part, release by
    release: (0.29.0 on) resolve_kv_cache_layout over the workers' backends (FLASH_ATTN here);
    (0.33.0) get_global_kv_cache_groups; get_kv_cache_configs (per-worker get_kv_cache_config
    before 0.11.0); (0.28.0 on) generate_scheduler_kv_cache_config, the scheduler block size and
    update_kv_cache_capacity, which logs the capacity."""
    worker_specs = [specs] * workers
    try:
        from vllm.v1.attention.backends import utils as backend_utils
    except ImportError:
        backend_utils = None
    if backend_utils is not None and hasattr(backend_utils, "resolve_kv_cache_layout"):
        from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

        layouts = [
            layout.name
            for layout in backend_utils.get_supported_kv_cache_layouts([FlashAttentionBackend])
        ]
        backend_utils.resolve_kv_cache_layout(
            vc, [layouts] * workers, [s for w in worker_specs for s in w.values()]
        )
    if not hasattr(kvu, "get_kv_cache_configs"):
        configs = [kvu.get_kv_cache_config(vc, w, mem) for w in worker_specs]
    elif hasattr(kvu, "get_global_kv_cache_groups"):
        groups = kvu.get_global_kv_cache_groups(vc, worker_specs)
        configs = kvu.get_kv_cache_configs(vc, worker_specs, [mem] * workers, groups)
    else:
        configs = kvu.get_kv_cache_configs(vc, worker_specs, [mem] * workers)
    if hasattr(kvu, "update_kv_cache_capacity"):
        sched = kvu.generate_scheduler_kv_cache_config(configs)
        if sched.kv_cache_groups:
            vc.cache_config.block_size = min(g.kv_cache_spec.block_size for g in sched.kv_cache_groups)
            kvu.update_kv_cache_capacity(vc, sched)
    return configs[0]


def case_k(vc: NS) -> int:
    return vc.speculative_config.num_speculative_tokens if vc.speculative_config else 0


def _gdn_type() -> Any:
    try:
        from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum

        return MambaAttentionBackendEnum.GDN_ATTN
    except Exception:
        return "gdn_attention"


def _run_case(version: str, root: Path, case: dict, kvu: Any, kvi: Any, cap: Capture) -> dict:
    raw, text = _config(case)
    vc = _vllm_config(version, case, raw, text)
    hybrid = "layer_types" in text or "full_attention_interval" in text
    vc.model_config.is_hybrid = hybrid
    vc.model_config.attn_type = "hybrid" if hybrid else "decoder"
    pc = case["pc"] if case["pc"] is not None else _prefix_caching_default(version, vc)
    vc.cache_config.enable_prefix_caching = pc
    model_cls = None
    if hybrid:
        model_cls = _model_class(version, root, raw["architectures"][0])
        _warm_imports(version)
        cap.lines.clear()  # import-time lines (NIXL, UCX) are the harness's
        _align(version, vc, model_cls, cap)
    logs_config = list(cap.lines)
    cap.lines.clear()
    types = text.get("layer_types") or [
        "full_attention"
        if not hybrid or (i + 1) % text.get("full_attention_interval", 4) == 0
        else "linear_attention"
        for i in range(text["num_hidden_layers"])
    ]
    specs = _specs(version, vc, model_cls, kvi, types)
    mem = case["mem"]
    config = _engine_core(version, vc, specs, mem, case["tp"], kvu)
    conc = kvu.get_max_concurrency_for_kv_cache_config(vc, config)
    groups = config.kv_cache_groups
    return {
        "prefix_caching": bool(vc.cache_config.enable_prefix_caching),
        "mamba_cache_mode": getattr(vc.cache_config, "mamba_cache_mode", None),
        "block_size": int(vc.cache_config.block_size),
        "mamba_block_size": getattr(vc.cache_config, "mamba_block_size", None),
        "mamba_page_size_padded": vc.cache_config.mamba_page_size_padded,
        "group_sizes": [len(g.layer_names) for g in groups],
        "group_block_sizes": [g.kv_cache_spec.block_size for g in groups],
        "page_size_bytes": groups[0].kv_cache_spec.page_size_bytes,
        "num_blocks": config.num_blocks,
        "max_concurrency": conc,
        "config_logs": logs_config,
        "kv_logs": list(cap.lines),
        "available_memory": mem,
    }


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", type=Path, required=True, help="folder of extracted releases")
    ap.add_argument("--releases", nargs="*", help="default: every folder under --wheels")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--print", action="store_true")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_release(args.one, args.wheels, args.cases), default=str))
        return 0
    releases = args.releases or sorted((p.name for p in args.wheels.iterdir()), key=_vt)
    result: dict[str, Any] = {"cases": CASES, "releases": {}}
    for v in releases:
        proc = subprocess.run(
            [sys.executable, __file__, "--wheels", str(args.wheels), "--one", v,
             "--cases", *args.cases],
            capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"{v}: failed")
        result["releases"][v] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{v}: {len(result['releases'][v])} case(s)", file=sys.stderr)
    text = json.dumps(result, indent=1, sort_keys=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.print or not args.out:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
