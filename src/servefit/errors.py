"""Errors servefit raises on bad input. The CLI turns each into one line and a non-zero exit."""

from __future__ import annotations


class ServefitError(Exception):
    """Base class: every expected failure (bad input, unsupported case) derives from this."""

    exit_code = 2


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
