"""A release's Profile from the shared flow and the release's rules (flow/__init__.py)."""

from __future__ import annotations

from servefit.engines.base import MemoryInputs, Profile, ResolvedArgs, Sizing
from servefit.engines.sglang import profile
from servefit.engines.sglang.flow import args, pools
from servefit.engines.sglang.flow.rules import Rules
from servefit.hardware.spec import GPUSet
from servefit.model.spec import ModelSpec

__all__ = ["declare"]


def declare(rules: Rules) -> Profile:
    """The Profile of the release whose rules are `rules` (rules.version)."""

    def resolve_args(
        model: ModelSpec, gpus: GPUSet, user_args: dict, env: dict[str, str]
    ) -> ResolvedArgs:
        return args.resolve_args(model, gpus, user_args, env, rules)

    def size_pools(
        model: ModelSpec, gpus: GPUSet, resolved: ResolvedArgs, memory: MemoryInputs
    ) -> Sizing:
        return pools.size_pools(model, gpus, resolved, memory, rules)

    return profile.declare(
        rules.version,
        resolve_args=resolve_args,
        size_pools=size_pools,
        renames=rules.renames,
        log_format=rules.log_format,
    )
