"""Render SGLang launch commands for a fitted configuration, one per node."""

from __future__ import annotations

import shlex
from typing import Any

from servefit.explain.levers import flag_name
from servefit.fit.schema import NodeCommand

ENTRYPOINT = ("python", "-m", "sglang.launch_server")
# Flags first in this order, then the rest alphabetically by engine attribute.
ORDER = (
    "tp_size",
    "pp_size",
    "context_length",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "mem_fraction_static",
    "max_running_requests",
    "mamba_full_memory_ratio",
    "max_mamba_cache_size",
    "mamba_ssm_dtype",
    "kv_cache_dtype",
    "disable_radix_cache",
)
DEFAULT_DIST_ADDR = "NODE0_IP:50000"


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def engine_argv(profile: str, args: dict[str, Any]) -> list[str]:
    """Engine args as CLI tokens, in a stable, readable order; bool flags bare."""
    keys = [k for k in ORDER if k in args] + sorted(k for k in args if k not in ORDER)
    out: list[str] = []
    for k in keys:
        v = args[k]
        if v is None or (k == "pp_size" and v == 1):
            continue
        flag = flag_name(profile, k)
        if isinstance(v, bool):
            if v:
                out.append(flag)
            continue
        if isinstance(v, (list, tuple)):
            out += [flag, *(_value(x) for x in v)]
        else:
            out += [flag, _value(v)]
    return out


def launch_commands(
    profile: str,
    model_path: str,
    args: dict[str, Any],
    *,
    nodes: int = 1,
    dist_init_addr: str = DEFAULT_DIST_ADDR,
    env: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> list[NodeCommand]:
    """One command per node; multi-node commands carry --nnodes/--node-rank/--dist-init-addr.

    `extra` are flags kept from the user's own launch (parsers, host, port, ...)."""
    extra = dict(extra or {})
    host = extra.pop("host", "0.0.0.0")
    port = extra.pop("port", 30000)
    base = [
        *ENTRYPOINT,
        flag_name(profile, "model_path"),
        model_path,
        *engine_argv(profile, args),
        *engine_argv(profile, extra),
    ]
    out = []
    for rank in range(nodes):
        argv = list(base)
        if nodes > 1:
            argv += [
                flag_name(profile, "nnodes"),
                str(nodes),
                flag_name(profile, "node_rank"),
                str(rank),
                flag_name(profile, "dist_init_addr"),
                dist_init_addr,
            ]
        if rank == 0:
            argv += [flag_name(profile, "host"), str(host), flag_name(profile, "port"), str(port)]
        out.append(NodeCommand(node_rank=rank, argv=argv, shell=shell_text(argv, env)))
    return out


def shell_text(argv: list[str], env: dict[str, str] | None = None) -> str:
    """POSIX-quoted, one flag (and its values) per continuation line."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items()))
    head = " ".join(shlex.quote(a) for a in argv[:3])
    lines = [f"{prefix} {head}".strip()]
    i = 3
    while i < len(argv):
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        lines.append("    " + " ".join(shlex.quote(a) for a in argv[i:j]))
        i = j
    return " \\\n".join(lines)
