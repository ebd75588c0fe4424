"""The user's launch command -> what servefit executes, and what it needs to watch it.

`servefit launch -- CUDA_VISIBLE_DEVICES=0,1 nohup /venv/bin/python3 -m sglang.launch_server ...`
runs `/venv/bin/python3 -m sglang.launch_server ...` itself, with CUDA_VISIBLE_DEVICES=0,1 added
to its environment: servefit owns the log, so wrappers (`nohup`, `setsid`, `env`), shell
redirections and a trailing `&` are dropped, and the interpreter path and its options are kept
exactly as written. Tokenising and wrapper handling are the plan command's own
(servefit.engines.command), so `plan` and `launch` read a pasted command the same way.

Defaults that decide where the server listens, from the engines' released code:
  SGLang: host "127.0.0.1", port 30000 (sglang/srt/server_args.py:ServerArgs in 0.5.9,
          sglang/srt/arg_groups/fields/serving.py in 0.5.23)
  vLLM:   host None (all interfaces), port 8000 (vllm/entrypoints/common/cli_args.py:FrontendArgs)
"""

from __future__ import annotations

import os
import shlex
from dataclasses import field

from servefit.errors import ArgumentError
from servefit.frozen import frozen

ENGINES = ("sglang", "vllm")
DEFAULT_HOST = {"sglang": "127.0.0.1", "vllm": "0.0.0.0"}
DEFAULT_PORT = {"sglang": 30000, "vllm": 8000}

# Engine flags that set the parallel world, by engine (names as each engine's argparse has them).
_VLLM_WORLD_FLAGS = {
    "tp_size": ("--tensor-parallel-size", "-tp"),
    "pp_size": ("--pipeline-parallel-size", "-pp"),
    "dp_size": ("--data-parallel-size", "-dp"),
}


@frozen
class EngineLaunch:
    """One engine launch, ready to execute."""

    engine: str  # "sglang" | "vllm"
    argv: list[str]  # what servefit executes: interpreter/program onwards
    engine_argv: list[str]  # the engine's own flags
    env: dict[str, str] = field(default_factory=dict)  # assignments written in the command
    recognised: bool = True  # False: an unrecognised program run as given (--engine names it)
    host: str = "127.0.0.1"
    host_default: bool = True  # no --host: the engine's own default address
    port: int = 30000
    world_size: int = 1  # GPUs the engine instance uses: tp x pp (x dp without DP attention)
    parallel: str = "tp 1"  # how world_size comes about, for messages

    @property
    def probe_host(self) -> str:
        """Where to connect: a wildcard listen address is reached on the loopback."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "", "::", "[::]") else self.host

    @property
    def url(self) -> str:
        host = self.probe_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    @property
    def command_line(self) -> str:
        return shlex.join(self.argv)


def _words(command: list[str]) -> list[list[str]]:
    """Simple commands (words, redirections removed), tokenised as `servefit plan` does."""
    from servefit.engines import command as engine_command

    if len(command) == 1 and any(c.isspace() for c in command[0]):
        tokens = engine_command._shell_tokens(command[0])
    else:
        tokens = engine_command._list_tokens(list(command))
    return engine_command._segments(tokens)


def parse_launch(command: list[str], engine: str | None = None) -> EngineLaunch:
    """Read the command after `--`. `engine` ("sglang"/"vllm", optionally ==VERSION) is required
    when the program is not a recognised engine entrypoint (a wrapper script, a test stand-in)."""
    from servefit.engines import command as engine_command

    if not command:
        raise ArgumentError("no launch command: put the engine command after `--`")
    wanted = engine.split("==")[0].split("@")[0].strip().lower() if engine else None
    if wanted is not None and wanted not in ENGINES:
        raise ArgumentError(f"--engine {engine}: launch supports {', '.join(ENGINES)}")
    env: dict[str, str] = {}
    for words in _words(command):
        if words[0] == "export":
            for w in words[1:]:
                name, eq, value = w.partition("=")
                if eq:
                    env[name] = value
            continue
        local: dict[str, str] = {}
        program = engine_command._strip_prefix(words, local)
        found = engine_command._recognise(program)
        if found is None:
            continue
        name, _entry, engine_argv = found
        if wanted is not None and wanted != name:
            raise ArgumentError(f"--engine {engine} but the launch command runs {name}")
        return _complete(name, list(program), list(engine_argv), {**env, **local}, True)
    if wanted is None:
        raise ArgumentError(
            "not an SGLang or vLLM launch command; to run a wrapper as the engine, name the "
            "engine whose log and API it has with --engine sglang|vllm"
        )
    segments = [s for s in _words(command) if s[0] != "export"]
    if len(segments) != 1:
        raise ArgumentError("the launch command must be one program (no `;`, `&&`, `|`)")
    local = {}
    program = engine_command._strip_prefix(segments[0], local)
    if not program:
        raise ArgumentError("the launch command has no program to run")
    return _complete(wanted, list(program), list(program[1:]), {**env, **local}, False)


def _complete(
    engine: str, argv: list[str], engine_argv: list[str], env: dict[str, str], recognised: bool
) -> EngineLaunch:
    values = _engine_values(engine, engine_argv)
    host = values.get("host") or DEFAULT_HOST[engine]
    port = values.get("port", DEFAULT_PORT[engine])
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise ArgumentError(f"--port must be an integer, got {port!r}") from None
    if not 0 < port < 65536:
        raise ArgumentError(f"--port must be in 1..65535, got {port}")
    tp, pp, dp = (max(1, _int(values.get(k), 1)) for k in ("tp_size", "pp_size", "dp_size"))
    dp_ranks = 1 if values.get("enable_dp_attention") else dp
    world = tp * pp * dp_ranks
    parallel = " x ".join(
        f"{name} {n}"
        for name, n in (("tp", tp), ("pp", pp), ("dp", dp_ranks))
        if n > 1 or name == "tp"
    )
    return EngineLaunch(
        engine=engine,
        argv=argv,
        engine_argv=engine_argv,
        env=env,
        recognised=recognised,
        host=str(host),
        host_default=not values.get("host"),
        port=port,
        world_size=world,
        parallel=parallel,
    )


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def _engine_values(engine: str, argv: list[str]) -> dict[str, object]:
    """host, port and the parallel sizes from the engine flags."""
    if engine == "sglang":
        # The engine's own flag table: aliases (--tp) and argparse prefixes (--tp-si) included.
        from servefit.engines.registry import select

        profile, _ = select(engine)
        return dict(profile.parse_argv(argv).values)
    return _scan(argv, {"host": ("--host",), "port": ("--port",), **_VLLM_WORLD_FLAGS})


def _scan(argv: list[str], names: dict[str, tuple[str, ...]]) -> dict[str, object]:
    """`--flag VALUE` and `--flag=VALUE`; the last occurrence wins, as with argparse."""
    out: dict[str, object] = {}
    for i, token in enumerate(argv):
        flag, eq, inline = token.partition("=")
        for dest, aliases in names.items():
            if flag in aliases:
                if eq:
                    out[dest] = inline
                elif i + 1 < len(argv):
                    out[dest] = argv[i + 1]
    return out


def visible_devices(env: dict[str, str]) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as the engine will see it (the command's value, else servefit's own
    environment); None when unset (all GPUs visible)."""
    raw = env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    if raw is None:
        return None
    # CUDA stops at the first invalid entry; an empty value hides every GPU.
    return [d.strip() for d in raw.split(",") if d.strip()]
