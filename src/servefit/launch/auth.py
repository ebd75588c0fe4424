"""The key a launched server wants, where the launch (or the running engine) says it, and the
warnings about exposing a server or its key.

Where each engine takes its key:
  SGLang  `--api-key KEY` (sglang/srt/server_args.py:ServerArgs.api_key); once set, every
          endpoint but /health*, /metrics (and /ready in 0.5.23) answers 401 {"error":
          "Unauthorized"} without `Authorization: Bearer KEY`
          (sglang/srt/utils/auth.py:decide_request_auth, add_api_key_middleware).
          `--admin-api-key` alone guards only the management endpoints, not the ones probed.
  vLLM    `--api-key KEY [KEY ...]`, else the environment's VLLM_API_KEY
          (vllm/entrypoints/openai/api_server.py:build_app: `args.api_key or
          [envs.VLLM_API_KEY]`); every path under /v1 answers 401 {"error": "Unauthorized"}
          without one of them (vllm/entrypoints/openai/server_utils.py:AuthenticationMiddleware);
          /health stays open.
A key kept elsewhere (an engine config file, a wrapper script) is not known to servefit: the
server then answers 401 and readiness says the server requires a key, with the fix.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping

from servefit.engines.secretflags import KEY_ENV
from servefit.errors import ServefitError
from servefit.frozen import frozen
from servefit.launch.schema import Check
from servefit.redact import Redactor, mask

# Where loopback names resolve to the loopback on every machine.
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


@frozen
class ServerKey:
    """The key the probes send, and where it came from."""

    value: str
    source: str  # "--api-key" | "VLLM_API_KEY"

    @property
    def shown(self) -> str:
        return f"{self.source} {mask(self.value)}"


def server_key(engine: str, engine_argv: list[str], env: Mapping[str, str]) -> ServerKey | None:
    """The key the engine will require, read from its flags as its own parser reads them (the
    last --api-key wins; vLLM takes several, any of them works), else from the environment the
    engine starts with."""
    from servefit.engines.registry import select

    profile, _ = select(engine)
    value = profile.parse_argv(_with_config_file(engine, engine_argv)).values.get("api_key")
    if isinstance(value, (list, tuple)):
        value = next((v for v in value if v), None)
    if isinstance(value, str) and value:
        return ServerKey(value, "--api-key")
    for name in KEY_ENV.get(engine, ()):
        if env.get(name):
            return ServerKey(env[name], name)
    return None


def _with_config_file(engine: str, engine_argv: list[str]) -> list[str]:
    """The flags with a `--config FILE` merged in, values unmasked (a key set in the file is
    the key the server requires; the file's options come first, so the command line wins, as
    in both engines' merges: servefit.engines.configfile). A file the engine would refuse
    leaves the flags as written: the preflight plan reports the refusal."""
    argv = list(engine_argv)
    if "--config" not in argv:
        return argv
    from servefit.engines import configfile
    from servefit.engines.registry import select

    try:
        merged = configfile.merge_config(select(engine)[0], "", argv, masked=False)
    except ServefitError:
        return argv
    return merged.argv if merged is not None else argv


def launch_redactor(engine: str, commands: list[list[str]], env: Mapping[str, str]) -> Redactor:
    """The redactor of one launch: the engine's secret flags, and the values of every secret
    in its commands (each read on its own: an option taking several values would take the
    next command's words), in the variables servefit sets, and in the environment it
    inherits."""
    from servefit.engines.secretflags import redactor

    base = redactor(engine)
    # a key in a --config file is as secret as one on the command line
    found = [v for argv in commands for v in base.argv_secrets(_with_config_file(engine, argv))]
    return base.with_values([*found, *base.env_secrets(env), *base.env_secrets(os.environ)])


def process_redactor(engine: str, pid: int | None, start_ticks: int | None) -> Redactor:
    """For what a run printed, read later: the engine's secret flags, and the secret values
    of the engine process while it runs (its own command line and environment)."""
    from servefit.engines.secretflags import redactor
    from servefit.launch import procs

    if pid and procs.same_process(pid, start_ticks):
        return launch_redactor(engine, [procs.cmdline(pid)], procs.environ(pid))
    return redactor(engine)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost; a wildcard ("0.0.0.0", "::", "") is every interface."""
    host = host.strip().strip("[]")
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_check(host: str, port: int, key: ServerKey | None, default_host: bool) -> Check:
    """Preflight: a server listening beyond the loopback without a key serves anyone."""
    if is_loopback(host):
        return Check(name="exposure", status="ok", message=f"listens on {host} (this machine only)")
    where = "every interface" if host in ("0.0.0.0", "::", "") else host
    if key is not None:
        return Check(
            name="exposure",
            status="ok",
            message=f"listens on {where}; requests need the key ({key.shown})",
        )
    why = " (the engine's default)" if default_host else ""
    return Check(
        name="exposure",
        status="warn",
        message=f"listens on {where}{why} without an API key: anyone who reaches port {port} "
        "can use the server; give it a key (--api-key), or keep it on this machine "
        "(--host 127.0.0.1)",
    )


def plain_http_warning(url: str, sending_key: bool) -> str | None:
    """Before a key goes over plain HTTP to another machine: anyone on the path can read it."""
    import urllib.parse

    if not sending_key:
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or is_loopback(parts.hostname or ""):
        return None
    return (
        f"sending the API key over plain HTTP to {parts.hostname}: anyone on the network path "
        "can read it; use https:// or an SSH tunnel to a loopback port"
    )


def auth_refused(status: int, key: ServerKey | None, engine: str, what: str) -> str:
    """What a 401/403 means to readiness: the server is up and wants a key. (Written so that
    no word follows a flag name: run.json is redacted as text, and a word after `--api-key`
    would read as a key.)"""
    if key is None:
        where = "in the launch command (--api-key)"
        for name in KEY_ENV.get(engine, ()):
            where += f" or in its environment ({name}, with --env)"
        return (
            f"{what}: HTTP {status}: the server requires an API key that servefit does not "
            f"know; give it {where}"
        )
    return f"{what}: HTTP {status}: the server refused the key from {key.shown}"


def key_from_process(pid: int | None, engine: str) -> ServerKey | None:
    """The key of a running engine, from its own command line and environment (/proc; only
    the user who runs it, or root, can read them). Nothing is stored in the run directory."""
    from servefit.launch import procs
    from servefit.launch.command import parse_launch

    if not pid:
        return None
    argv = procs.cmdline(pid)
    if not argv:
        return None
    env = procs.environ(pid)
    try:
        launch = parse_launch(argv, engine)
    except ServefitError:  # a command line servefit cannot read: no key from it
        return None
    return server_key(engine, launch.engine_argv, env)
