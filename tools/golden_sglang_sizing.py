"""The pool-sizing half of tools/golden_sglang.py: one release's own sizing entry point on CPU.

Imported by golden_sglang.py after its GPU stand-ins are installed. The runner/configurator
object is built without running its GPU-bound constructor; every attribute set below is one
the release reads while sizing, with the value a TP 2, PP 1, DP 1 start on one node has.
"""

from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace
from typing import Any

import golden_sglang as g


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:3])


def _avail_gib(version: str, spec: bool) -> float:
    """Free memory when the target pools are sized. From 0.5.14 managers/scheduler.py:
    init_model_worker loads the draft (maybe_init_draft_worker) before init_memory_pools;
    before, the target ModelRunner sized its pools before the draft worker existed."""
    avail = g.PRE_LOAD_FREE_GIB - g.WEIGHTS_GIB
    if spec and _vt(version) >= (0, 5, 14):
        avail -= g.DRAFT_WEIGHTS_GIB
    return avail


def _patch(name: str, value: Any) -> None:
    for mod_name, module in list(sys.modules.items()):
        if (
            mod_name.startswith("sglang")
            and module is not None
            and callable(getattr(module, name, None))
        ):
            setattr(module, name, value)


def _common(obj: Any, s: Any, mc: Any, view: Any) -> None:
    import torch
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    values = {
        "server_args": s,
        "model_config": mc,
        "device": "cuda",
        "gpu_id": 0,
        "tp_size": 2,
        "tp_rank": 0,
        "pp_size": 1,
        "pp_rank": 0,
        "dp_size": 1,
        "attn_dp_size": 1,
        "start_layer": 0,
        "end_layer": mc.num_hidden_layers,
        "num_effective_layers": mc.num_hidden_layers,
        "kv_cache_dtype": torch.bfloat16,
        "model_dtype": torch.bfloat16,
        "dtype": torch.bfloat16,
        "page_size": view.page_size,
        "mem_fraction_static": view.mem_fraction_static,
        "is_draft_worker": False,
        "post_capture_kv_active": False,
        "use_mla_backend": False,
        "is_hybrid_swa": False,
        "is_hybrid_swa_compress": False,
        "sliding_window_size": None,
        "memory_pool_config": None,
        "req_to_token_pool": None,
        "token_to_kv_pool_allocator": None,
        "spec_algorithm": SpeculativeAlgorithm.from_string(view.speculative_algorithm),
    }
    for key, value in values.items():
        # a slotted configurator has no such field in this release
        with contextlib.suppress(AttributeError):
            setattr(obj, key, value)


def _model_config(s: Any) -> Any:
    from sglang.srt.configs.model_config import ModelConfig

    return ModelConfig.from_server_args(s)


def _runner_config(version: str, s: Any, view: Any) -> Any:
    """0.5.10..0.5.15: ModelRunnerKVCacheMixin._resolve_memory_pool_config(pre_model_load_memory)."""
    from sglang.srt.model_executor.model_runner import ModelRunner

    mc = _model_config(s)
    runner = ModelRunner.__new__(ModelRunner)
    _common(runner, s, mc, view)
    _patch("get_attention_tp_size", lambda: 2)
    _patch("get_attention_dp_size", lambda: 1)
    _patch("get_world_group", lambda: SimpleNamespace(world_size=2, cpu_group=None))
    config = runner._resolve_memory_pool_config(g.PRE_LOAD_FREE_GIB)
    return runner, config


_KEEP: list[Any] = []  # open override scopes, alive for the whole run


def _parallel_overrides() -> None:
    """The TP 2 topology a scheduler process would have written (runtime_context.py:
    ParallelContext.override); the release rejects names it does not know, so each is tried."""
    from sglang.srt.runtime_context import get_parallel

    group = SimpleNamespace(world_size=2, cpu_group=None, rank_in_group=0, device_group=None)
    values = dict(
        tp_size=2,
        tp_rank=0,
        attn_tp_size=2,
        attn_tp_rank=0,
        attn_dp_size=1,
        attn_dp_rank=0,
        pp_size=1,
        pp_rank=0,
        dp_size=1,
        dp_rank=0,
        attn_cp_size=1,
        attn_cp_rank=0,
        attn_dcp_size=1,
        attn_dcp_rank=0,
        moe_ep_size=1,
        moe_tp_size=2,
        moe_dp_size=1,
        world_size=2,
        launch_world_size=2,
        world_group=group,
        tp_group=group,
        attn_tp_group=group,
        pp_group=SimpleNamespace(world_size=1, cpu_group=None, rank_in_group=0),
    )
    parallel = get_parallel()
    for key, value in values.items():
        try:
            if hasattr(parallel, "override_permanently"):
                parallel.override_permanently(**{key: value})
            else:
                stack = contextlib.ExitStack()
                stack.enter_context(parallel.override(**{key: value}))
                _KEEP.append(stack)
        except (ValueError, KeyError, TypeError, AttributeError, RuntimeError):
            pass


def _configurator_config(version: str, s: Any, view: Any) -> Any:
    """0.5.16+: KVCacheConfigurator._resolve_memory_pool_config(pre_model_load_memory), the
    configurator built as model_runner.py:init_kv_cache_configurator builds it."""
    import dataclasses

    import torch
    from sglang.srt.mem_cache import kv_cache_configurator as kvc
    from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    if _vt(version) >= (0, 5, 17):
        from sglang.srt import runtime_context

        runtime_context.publish(s, role="scheduler")
    _parallel_overrides()
    _patch("get_attention_tp_size", lambda: 2)
    _patch("get_world_group", lambda: SimpleNamespace(world_size=2, cpu_group=None))
    mc = _model_config(s)
    algo = SpeculativeAlgorithm.from_string(view.speculative_algorithm)
    n = mc.num_hidden_layers
    kwargs = dict(
        device="cuda",
        gpu_id=0,
        attn_dp_size=1,
        pp_size=1,
        pp_group=None,
        model=None,
        model_config=mc,
        server_args=s,
        kv_cache_dtype=torch.bfloat16,
        kv_cache_dtype_str="auto",
        model_dtype=torch.bfloat16,
        page_size=view.page_size,
        sliding_window_size=None,
        spec_algorithm=algo,
        is_draft_worker=False,
        post_capture_kv_active=False,
        spec_aux_config=resolve_spec_aux_hidden_state_config(
            server_args=s, model_config=mc, spec_algorithm=algo, is_draft_worker=False
        ),
        is_hybrid_swa=False,
        is_hybrid_swa_compress=False,
        use_mla_backend=False,
        layer_info=ModelLayerInfo(start_layer=0, end_layer=n, num_effective_layers=n),
        forward_stream=None,
        req_to_token_pool=None,
        token_to_kv_pool_allocator=None,
        memory_pool_config=None,
        draft_model_idx=None,
        ps=SimpleNamespace(attn_dp_size=1, pp_size=1, tp_size=2, attn_tp_size=2, dp_size=1),
    )
    names = {f.name for f in dataclasses.fields(kvc.KVCacheConfigurator) if f.init}
    conf = kvc.KVCacheConfigurator(**{k: v for k, v in kwargs.items() if k in names})
    config = conf._resolve_memory_pool_config(g.PRE_LOAD_FREE_GIB)
    return conf, config


def size(version: str, s: Any, view: Any) -> dict[str, Any] | None:
    if _vt(version) < (0, 5, 10):
        return None  # 0.5.9 sizes inside init_memory_pool; its profile was checked on real logs
    spec = view.speculative_algorithm is not None
    g.AVAIL_GIB[0] = _avail_gib(version, spec)
    _patch("get_available_gpu_memory", lambda *a, **k: g.AVAIL_GIB[0])
    if _vt(version) < (0, 5, 16):
        obj, config = _runner_config(version, s, view)
    else:
        obj, config = _configurator_config(version, s, view)
    ratio = obj._calculate_mamba_ratio()
    return {
        "kv_cell_bytes": _cell_size(obj),
        "mamba_cache_per_req": obj.mambaish_config.mamba2_cache_params.mamba_cache_per_req,
        "avail_gib": g.AVAIL_GIB[0],
        "max_total_num_tokens": config.max_total_num_tokens,
        "max_running_requests": config.max_running_requests,
        "max_mamba_cache_size": _mamba_cache_size(version, s),
        "mamba_ratio": ratio,
    }


def _mamba_cache_size(version: str, s: Any) -> Any:
    if _vt(version) >= (0, 5, 17):
        from sglang.srt.runtime_context import get_schedule

        return get_schedule().max_mamba_cache_size
    return s.max_mamba_cache_size


def _cell_size(obj: Any) -> int | None:
    """pool_configurator.py:DefaultPoolConfigurator._cell_size (0.5.11+); 0.5.10 computes it
    inside profile_max_num_token and keeps no copy."""
    try:
        from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    except ImportError:
        return None
    return create_memory_pool_configurator(obj)._cell_size
