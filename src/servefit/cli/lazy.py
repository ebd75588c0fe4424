"""A click group whose subcommands live in their own modules and are imported only when used.

Each entry is "module:attribute"; `servefit --help` imports them to list their one-line help, a
single command imports only itself, so `servefit plan` never pays for `launch` or `verify`.
"""

from __future__ import annotations

import importlib
import importlib.util

import click


class LazyGroup(click.Group):
    def __init__(self, *args, lazy_commands: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._available()))

    def _available(self) -> list[str]:
        out = []
        for name, target in self.lazy_commands.items():
            module = target.split(":", 1)[0]
            if importlib.util.find_spec(module) is not None:
                out.append(name)
        return out

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None or name not in self.lazy_commands:
            return cmd
        module, attr = self.lazy_commands[name].split(":", 1)
        if importlib.util.find_spec(module) is None:
            return None
        return getattr(importlib.import_module(module), attr)
