"""Launch commands as text a user can paste: no borders, POSIX quoting, one flag (and its
values) per continuation line, never a break inside a token."""

from __future__ import annotations

import shlex
from typing import Any

# servefit._fit.command (and the fit records it builds) is imported where a command is made:
# a plan that starts prints none.


def command_block(command: str | list[str]) -> str:
    """A command line (as the user wrote it, or an argv) laid out one flag per line.
    A string that does not split as POSIX shell (an unbalanced quote) is returned as is."""
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError:
            return command
    else:
        argv = list(command)
    env = {}
    while (
        argv
        and "=" in argv[0]
        and not argv[0].startswith("-")
        and argv[0].split("=")[0].isidentifier()
    ):
        k, _, v = argv.pop(0).partition("=")
        env[k] = v
    from servefit._fit.command import shell_text

    return shell_text(argv, env or None)


def command_for(
    engine: str, profile: str, model: str, args: dict[str, Any], env: dict[str, str] | None = None
) -> str:
    """The launch command for engine args (dest -> value), the engine's own spellings; --host
    only when the args carry one (the engine's default bind address otherwise)."""
    from servefit._fit.command import launch_commands

    extra = {k: args[k] for k in ("host", "port") if args.get(k) is not None}
    rest = {k: v for k, v in args.items() if k not in extra and v is not None}
    (cmd,) = launch_commands(engine, profile, model, rest, env=env, extra=extra)
    return cmd.shell
