"""Typed, validated reads from a config dict.

Config files are user input: any key may be missing, null, a string, a bool or a huge number.
Every read here either returns a sane Python value or raises a servefit error, so the parsers
built on top never leak a KeyError/TypeError/ZeroDivisionError. Missing required fields raise
UnsupportedModelError (we cannot size the model); present-but-invalid values raise ConfigError.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

from servefit.errors import ConfigError, UnsupportedModelError

# Guards against configs that would make us build absurd structures (hypothesis feeds us
# num_hidden_layers=10**18). Real models are far below both.
MAX_DIM = 1 << 40
MAX_LAYERS = 10_000

_MISSING = object()


def as_int(value: Any, what: str, *, minimum: int = 1, maximum: int = MAX_DIM) -> int:
    """Coerce a JSON number to int; integral floats (4096.0) are accepted, bools are not."""
    if isinstance(value, bool) or value is None:
        raise ConfigError(f"config field {what} must be an integer, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ConfigError(f"config field {what} must be an integer, got {value!r}")
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(f"config field {what} must be an integer, got {value!r:.60}")
    if value < minimum:
        if minimum >= 1:
            raise ConfigError(f"config field {what} must be positive, got {value}")
        raise ConfigError(f"config field {what} must be >= {minimum}, got {value}")
    if value > maximum:
        raise ConfigError(f"config field {what} is implausibly large ({value})")
    return value


class Fields:
    """Reads from one config dict. `where` names the dict in messages ("text_config").

    The readers are named after the types they return (`f.int(...)`, `f.str(...)`), so inside
    the class body `int`/`str`/... name these methods: annotations below them say `builtins.int`.
    """

    def __init__(self, data: Any, where: str = "config") -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be a JSON object, got {type(data).__name__}")
        self.data = data
        self.where = where

    def _name(self, key: str) -> str:
        return key if self.where == "config" else f"{self.where}.{key}"

    def get(self, *keys: str, default: Any = None) -> Any:
        """First present, non-null value among keys."""
        for key in keys:
            value = self.data.get(key)
            if value is not None:
                return value
        return default

    def first_key(self, *keys: str) -> str | None:
        for key in keys:
            if self.data.get(key) is not None:
                return key
        return None

    def has(self, *keys: str) -> bool:
        return self.first_key(*keys) is not None

    def int(self, *keys: str, default: Any = _MISSING, minimum: int = 1) -> int:
        """Required (unless default given) integer; zero/negative -> ConfigError."""
        key = self.first_key(*keys)
        if key is None:
            if default is _MISSING:
                raise UnsupportedModelError(
                    f"{self.where} has no {' / '.join(keys)}; cannot size this model"
                )
            return default
        return as_int(self.data[key], self._name(key), minimum=minimum)

    def opt_int(self, *keys: builtins.str, minimum: builtins.int = 0) -> builtins.int | None:
        key = self.first_key(*keys)
        if key is None:
            return None
        return as_int(self.data[key], self._name(key), minimum=minimum)

    def str(self, *keys: builtins.str, default: builtins.str = "") -> builtins.str:
        key = self.first_key(*keys)
        if key is None:
            return default
        value = self.data[key]
        if not isinstance(value, str):
            raise ConfigError(f"config field {self._name(key)} must be a string, got {value!r:.60}")
        return value

    def bool(self, *keys: builtins.str, default: builtins.bool = False) -> builtins.bool:
        key = self.first_key(*keys)
        if key is None:
            return default
        value = self.data[key]
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"config field {self._name(key)} must be true/false, got {value!r:.60}")

    def float(
        self, *keys: builtins.str, default: builtins.float | None = None
    ) -> builtins.float | None:
        key = self.first_key(*keys)
        if key is None:
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"config field {self._name(key)} must be a number, got {value!r:.60}")
        return float(value)

    def list(self, *keys: builtins.str) -> builtins.list[Any] | None:
        key = self.first_key(*keys)
        if key is None:
            return None
        value = self.data[key]
        if not isinstance(value, list):
            raise ConfigError(f"config field {self._name(key)} must be a list, got {value!r:.60}")
        if len(value) > MAX_LAYERS:
            raise ConfigError(f"config field {self._name(key)} is implausibly long ({len(value)})")
        return value

    def int_list(
        self, *keys: builtins.str, minimum: builtins.int = 0
    ) -> builtins.list[builtins.int] | None:
        items = self.list(*keys)
        if items is None:
            return None
        key = self.first_key(*keys) or keys[0]
        return [as_int(v, f"{self._name(key)}[]", minimum=minimum) for v in items]

    def str_list(self, *keys: builtins.str) -> builtins.list[builtins.str] | None:
        items = self.list(*keys)
        if items is None:
            return None
        key = self.first_key(*keys) or keys[0]
        for v in items:
            if not isinstance(v, str):
                raise ConfigError(
                    f"config field {self._name(key)} must list strings, got {v!r:.60}"
                )
        return items

    def dict(self, *keys: builtins.str) -> builtins.dict[builtins.str, Any] | None:
        key = self.first_key(*keys)
        if key is None:
            return None
        value = self.data[key]
        if not isinstance(value, dict):
            raise ConfigError(
                f"config field {self._name(key)} must be an object, got {value!r:.60}"
            )
        return value
