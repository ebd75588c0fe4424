"""Engine flags that carry a secret, per engine and release, read from the flag tables.

The arguments are declared here by the name each engine keeps them under, with where the
engine defines and uses them; the option strings (aliases included), whether a flag takes
several values, and which releases have it come from each release's flag table
(engines/<engine>/flags_<version>.json, extracted from the wheels). tests/engines/
test_secretflags.py checks every table: a flag whose name speaks of a token, key, secret,
password or credential is either declared here or listed there as not secret, so a release
that adds one cannot slip through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from servefit.redact import Redactor, SecretFlags

# SGLang (sglang/srt/server_args.py:ServerArgs in 0.5.9; sglang/srt/arg_groups/fields/ in 0.5.23)
SGLANG_SECRETS: dict[str, str] = {
    # the key every OpenAI/native endpoint wants as `Authorization: Bearer ...` once set
    # (sglang/srt/utils/auth.py:decide_request_auth, AuthLevel.NORMAL)
    "api_key": "serving: Set API key of the server",
    # the key of the management endpoints (auth.py:decide_request_auth, ADMIN_OPTIONAL/FORCE)
    "admin_api_key": "serving: Set admin API key for sensitive management endpoints",
    # 0.5.23 arg_groups/fields/serving.py: "The password to decrypt the SSL keyfile."
    "ssl_keyfile_password": "serving: the password of the SSL key file",
    # 0.5.23 arg_groups/fields/exec_.py: "a JSON file path or an inline JSON object with optional
    # key, key_b, ..."; the keys resolve into watermark_key / watermark_key_b, which SGLang
    # itself leaves out of its repr (server_args.py:ServerArgs.__repr__, `hidden`)
    "watermark_config": "exec: inline JSON may hold the watermark keys",
    "watermark_key": "resolved from --watermark-config (no flag of its own)",
    "watermark_key_b": "resolved from --watermark-config (no flag of its own)",
}
# vLLM (vllm/entrypoints/openai/cli_args.py:FrontendArgs, vllm/engine/arg_utils.py:EngineArgs).
# vLLM 0.29+ prints these as "***" in its own `non-default args` line
# (vllm/entrypoints/serve/utils/api_utils.py:_SENSITIVE_ARG_FIELDS: api_key, hf_token; 0.32 adds
# watermark_config; 0.33 vllm/entrypoints/common/startup.py:redact_sensitive_args); older
# releases print them as given.
VLLM_SECRETS: dict[str, str] = {
    # FrontendArgs.api_key: list[str] (one str before 0.13); any of them unlocks /v1/*
    # (vllm/entrypoints/openai/server_utils.py:AuthenticationMiddleware)
    "api_key": "frontend: If provided, the server will require one of these keys",
    # EngineArgs.hf_token (vllm/config/model.py:ModelConfig.hf_token): the Hub token
    "hf_token": "engine: The token to use as HTTP bearer authorization for remote files",
    # vllm/config/vllm.py:VllmConfig.watermark_config (0.32+), sensitive to vLLM itself
    "watermark_config": "engine: Text watermarking configuration (its key)",
}
# Environment variables an engine reads its server key from. vLLM: vllm/envs.py VLLM_API_KEY,
# used when --api-key is not given (vllm/entrypoints/openai/api_server.py:build_app:
# `args.api_key or [envs.VLLM_API_KEY]`). SGLang reads its key from the flag only.
KEY_ENV: dict[str, tuple[str, ...]] = {"sglang": (), "vllm": ("VLLM_API_KEY",)}

DECLARED: dict[str, dict[str, str]] = {"sglang": SGLANG_SECRETS, "vllm": VLLM_SECRETS}


def _tables(engine: str) -> tuple[Callable[[], tuple[str, ...]], Callable[[str], Any]]:
    if engine == "sglang":
        from servefit.engines.sglang import flags as sglang_flags

        return sglang_flags.available_versions, sglang_flags.load_flags
    if engine == "vllm":
        from servefit.engines.vllm import flags as vllm_flags

        return vllm_flags.available_versions, vllm_flags.load_flags
    raise KeyError(engine)


def _from_flags(flags: Iterable[Any], declared: dict[str, str]) -> SecretFlags:
    options: set[str] = set()
    multi: set[str] = set()
    known: set[str] = set()
    for flag in flags:
        known.update(flag.names)
        if flag.dest in declared:
            options.update(flag.names)
            if getattr(flag, "nargs", None) in ("+", "*"):
                multi.update(flag.names)
    return SecretFlags(
        options=frozenset(options),
        names=frozenset(declared),
        multi=frozenset(multi),
        known=frozenset(known),
    )


@functools.cache
def secret_flags(engine: str, version: str | None = None) -> SecretFlags:
    """The secret flags of one release's table (`version` as the table is named, e.g. "0.5.9"),
    or of every release of the engine with a table when `version` is None."""
    versions, load = _tables(engine)
    wanted = versions() if version is None else (version,)
    out = SecretFlags()
    for v in wanted:
        out = out | _from_flags(load(v), DECLARED[engine])
    return out


@functools.cache
def all_secret_flags() -> SecretFlags:
    """Every engine's secret flags: for text whose engine and release are not known (a log
    given to the doctor, a run's log)."""
    out = SecretFlags()
    for engine in DECLARED:
        out = out | secret_flags(engine)
    return out


def redactor(engine: str | None = None, version: str | None = None) -> Redactor:
    """A redactor for an engine's commands and output (every engine's flags when None)."""
    return Redactor(secret_flags(engine, version) if engine else all_secret_flags())
