"""Errors servefit raises on bad input. The CLI turns each into one line and a non-zero exit.

A message quotes what it was given (a model path, a URL, a GPU name), and that can hold a
credential (`https://user:password@host/m`, `?token=...`): `str()` of every error is redacted
(servefit.redact.redact_text), so a caller that prints or stores an error (the CLI, a preflight
check, a run record) never shows one. `args` keep the message as raised.
"""

from __future__ import annotations


class ServefitError(Exception):
    """Base class: every expected failure (bad input, unsupported case) derives from this."""

    exit_code = 2

    def __str__(self) -> str:
        # imported here: its patterns cost ~10 ms to compile, and the CLI imports this module
        # on every start (`--help` included) while only an error shown needs them
        from servefit.redact import redact_text

        return redact_text(super().__str__())


class ConfigError(ServefitError):
    """A model config that cannot be read or is missing what sizing needs."""


class UnsupportedModelError(ConfigError):
    """An architecture servefit cannot size; the message names what is missing."""


class HardwareError(ServefitError):
    """Unknown GPU, impossible memory figures."""


class ArgumentError(ServefitError):
    """Engine flags or parallelism that the engine itself would reject."""


class EngineVersionError(ServefitError):
    """An engine name or version string that cannot be mapped to a profile."""


class EngineRejection(ServefitError):
    """What the engine itself raises on these inputs: its argument validation (SGLang's
    ServerArgs, vLLM's EngineArgs / config checks), an architecture the release does not
    register, a model its layers cannot split. The message is the engine's own text.

    Not bad input: the planner turns it into a plan that is predicted to fail (verdict "fail",
    exit 1), the same for every engine. `exit_code` is that of a failing plan, for callers
    that let it propagate.
    """

    exit_code = 1

    def __init__(self, message: str, *, logs: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        # what the engine logged before it stopped (its warnings while resolving), verbatim
        self.logs = logs
