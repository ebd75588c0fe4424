"""A release's Profile from the shared flow and the release's rules (flow/__init__.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servefit.engines.base import MemoryInputs, Profile, ResolvedArgs, Sizing
from servefit.engines.sglang import profile
from servefit.engines.sglang.flow import args, pools
from servefit.engines.sglang.flow.rules import Rules
from servefit.evolve import evolve
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec

__all__ = ["declare"]


def _renamed(values: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    return {names.get(k, k): val for k, val in values.items()}


def _to_release(resolved: ResolvedArgs, names: Mapping[str, str]) -> ResolvedArgs:
    """The flow's attribute names (0.5.23 spelling) back to the release's own."""
    if not names:
        return resolved
    changes = tuple(c.model_copy(update={"arg": names.get(c.arg, c.arg)}) for c in resolved.changes)
    return evolve(resolved, values=_renamed(resolved.values, names), changes=changes)


def declare(rules: Rules) -> Profile:
    """The Profile of the release whose rules are `rules` (rules.version)."""
    to_flow = {release: flow for flow, release in rules.flow_names.items()}

    def resolve_args(
        model: ModelSpec, gpus: GPUSet, user_args: dict[str, Any], env: dict[str, str]
    ) -> ResolvedArgs:
        flow_args = _renamed(user_args, to_flow)
        return _to_release(args.resolve_args(model, gpus, flow_args, env, rules), rules.flow_names)

    def size_pools(
        model: ModelSpec,
        gpus: GPUSet,
        resolved: ResolvedArgs,
        memory: MemoryInputs,
        *,
        text: bool = True,
    ) -> Sizing:
        if to_flow:
            resolved = evolve(resolved, values=_renamed(resolved.values, to_flow))
        return pools.size_pools(model, gpus, resolved, memory, rules, text=text)

    return profile.declare(
        rules.version,
        resolve_args=resolve_args,
        size_pools=size_pools,
        renames=rules.renames,
        log_format=rules.log_format,
        layout=rules.layout,
        dtype_cast_logged=rules.dtype_cast_logged,
        config_readers=profile.config_readers(
            rules.transformers,
            modelopt_fp8_text=rules.modelopt_fp8_text,
            kv_divides_by_cell=rules.kv_divides_by_cell,
        ),
    )
