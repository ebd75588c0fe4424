"""Render an engine's launch commands for a fitted configuration, one per node.

SGLang: `python -m sglang.launch_server --model-path M ...`; every node runs the same command
with `--nnodes N --node-rank R --dist-init-addr HOST:PORT` (sglang/srt/server_args.py).

vLLM: `vllm serve M ...`. Across nodes (TP / PP spanning them) vLLM 0.24.0 and 0.33.0 use the
multiprocessing backend with `--nnodes N --node-rank R --master-addr HOST --master-port PORT`
on every node (vllm/config/parallel.py:ParallelConfig.nnodes / node_rank / master_addr /
master_port, "for multi-node distributed inference when distributed_executor_backend is mp";
__post_init__ picks "mp" on CUDA when nnodes > 1), and `--headless` on every node but the
first: vllm/entrypoints/cli/serve.py:run_headless starts only the workers there
("headless multiproc executor ... for multi-node PP/TP") and no API server.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from servefit._fit.schema import NodeCommand
from servefit.frozen import frozen

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
    # vLLM (the SGLang names above do not occur in its args)
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_model_len",
    "speculative_config",
    "gpu_memory_utilization",
    "max_num_seqs",
    "mamba_ssm_cache_dtype",
    # both
    "kv_cache_dtype",
    "disable_radix_cache",
    "enable_prefix_caching",
)
DEFAULT_DIST_ADDR = "NODE0_IP:50000"
_DEFAULT_PARALLEL = {"pp_size": 1, "pipeline_parallel_size": 1}


@frozen
class _Launcher:
    head: Callable[[str, str], list[str]]  # (release, model path) -> entry point and model
    nodes: Callable[[str, int, int, str], list[str]]  # (release, nodes, rank, address)
    port: int


def _tokens(engine: str) -> Callable[[str, str, Any], list[str]]:
    from servefit._explain.catalogue import catalogue_for

    return catalogue_for(engine).tokens


def _flag(engine: str, profile: str, dest: str) -> str:
    from servefit._explain.catalogue import catalogue_for

    return catalogue_for(engine).flag(profile, dest)


def _sglang_nodes(profile: str, nodes: int, rank: int, addr: str) -> list[str]:
    return [
        _flag("sglang", profile, "nnodes"),
        str(nodes),
        _flag("sglang", profile, "node_rank"),
        str(rank),
        _flag("sglang", profile, "dist_init_addr"),
        addr,
    ]


def _vllm_nodes(profile: str, nodes: int, rank: int, addr: str) -> list[str]:
    host, _, port = addr.rpartition(":")
    if not host:  # no port given: vLLM's default master port
        host, port = port, ""
    out = [
        _flag("vllm", profile, "nnodes"),
        str(nodes),
        _flag("vllm", profile, "node_rank"),
        str(rank),
        _flag("vllm", profile, "master_addr"),
        host,
    ]
    if port:
        out += [_flag("vllm", profile, "master_port"), port]
    return out + ([_flag("vllm", profile, "headless")] if rank > 0 else [])


LAUNCHERS = {
    "sglang": _Launcher(
        head=lambda profile, model: [
            "python",
            "-m",
            "sglang.launch_server",
            _flag("sglang", profile, "model_path"),
            model,
        ],
        nodes=_sglang_nodes,
        port=30000,
    ),
    "vllm": _Launcher(
        head=lambda profile, model: ["vllm", "serve", model],
        nodes=_vllm_nodes,
        port=8000,  # FrontendArgs.port (0.33.0 vllm/entrypoints/common/cli_args.py, 0.24.0 openai/)
    ),
}


def engine_argv(engine: str, profile: str, args: dict[str, Any]) -> list[str]:
    """Engine args as CLI tokens, in a stable, readable order (the engine's own spellings)."""
    tokens = _tokens(engine)
    keys = [k for k in ORDER if k in args] + sorted(k for k in args if k not in ORDER)
    out: list[str] = []
    for k in keys:
        if _DEFAULT_PARALLEL.get(k) == args[k]:
            continue
        out += tokens(profile, k, args[k])
    return out


def launch_commands(
    engine: str,
    profile: str,
    model_path: str,
    args: dict[str, Any],
    *,
    nodes: int = 1,
    dist_init_addr: str = DEFAULT_DIST_ADDR,
    env: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> list[NodeCommand]:
    """One command per node; multi-node commands carry the engine's node flags.

    `extra` are flags kept from the user's own launch (parsers, host, port, ...). The bind
    address is the user's --host or none at all: the engine's own default (loopback for
    SGLang), so following the advice never exposes a server the user did not expose."""
    launcher = LAUNCHERS[engine]
    extra = dict(extra or {})
    host = extra.pop("host", None)
    port = extra.pop("port", launcher.port)
    base = [
        *launcher.head(profile, model_path),
        *engine_argv(engine, profile, args),
        *engine_argv(engine, profile, extra),
    ]
    out = []
    for rank in range(nodes):
        argv = list(base)
        if nodes > 1:
            argv += launcher.nodes(profile, nodes, rank, dist_init_addr)
        if rank == 0:
            if host is not None:
                argv += [_flag(engine, profile, "host"), str(host)]
            argv += [_flag(engine, profile, "port"), str(port)]
        out.append(NodeCommand(node_rank=rank, argv=argv, shell=shell_text(argv, env)))
    return out


def shell_text(argv: list[str], env: dict[str, str] | None = None) -> str:
    """POSIX-quoted, one flag (and its values) per continuation line."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items()))
    i = next((k for k, a in enumerate(argv) if a.startswith("--")), len(argv))
    head = " ".join(shlex.quote(a) for a in argv[:i])  # entry point and positional model
    lines = [f"{prefix} {head}".strip()]
    while i < len(argv):
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        lines.append("    " + " ".join(shlex.quote(a) for a in argv[i:j]))
        i = j
    return " \\\n".join(lines)
