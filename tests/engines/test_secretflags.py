"""Secret-carrying flags per engine and release, read from the flag tables (which are extracted
from the wheels). Every flag whose name speaks of a token, key, secret, password or credential
is either declared secret (engines/secretflags.py) or listed here with why it is not, so a new
release's table that adds one fails this test until it is decided."""

from __future__ import annotations

import re

import pytest

from servefit.engines.secretflags import DECLARED, secret_flags
from servefit.engines.sglang.flags import available_versions as sglang_versions
from servefit.engines.sglang.flags import load_flags as sglang_flags
from servefit.engines.vllm.flags import available_versions as vllm_versions
from servefit.engines.vllm.flags import load_flags as vllm_flags

SECRETISH = re.compile(r"token|key|secret|passw|credential|auth", re.I)

# Flags whose names match SECRETISH but carry no secret (the flag's help text, from the table).
NOT_SECRET = {
    "sglang": {
        "bucket_time_to_first_token": "histogram buckets (floats)",
        "bucket_inter_token_latency": "histogram buckets (floats)",
        "speculative_token_map": "the path of the draft model's small vocab table",
        "tbo_token_distribution_threshold": "a float threshold",
        "kt_max_deferred_experts_per_token": "an int",
        "prefill_delayer_token_usage_low_watermark": "a float watermark",
        "ds_heavy_token_num": "an int",
        "ssl_keyfile": "the file path to the SSL key file (the path, not the key)",
        "skip_tokenizer_init": "a bool",
    },
    "vllm": {
        "return_tokens_as_token_ids": "a bool",
        "allow_credentials": "a bool: CORS allow-credentials",
        "ssl_keyfile": "the file path to the SSL key file (the path, not the key)",
        "dbo_decode_token_threshold": "an int",
        "dbo_prefill_token_threshold": "an int",
        "long_prefill_token_threshold": "an int",
        "long_prefill_token_threshold_adaptive": "a bool",
        "skip_tokenizer_init": "a bool",
    },
}
TABLES = [("sglang", v, sglang_flags) for v in sglang_versions()] + [
    ("vllm", v, vllm_flags) for v in vllm_versions()
]


def _counts_or_tokenizer(dest: str) -> bool:
    # token counts (`*_tokens*`) and tokenizer settings are named after tokens, not credentials
    return bool(re.search(r"tokens|tokenizer", dest)) and not re.search(
        r"key|secret|passw|credential|auth", dest
    )


# ids without the loader's repr (an address): the same ids in every process (pytest -n)
@pytest.mark.parametrize(("engine", "version", "load"), TABLES,
                         ids=[f"{e}-{v}" for e, v, _ in TABLES])
def test_every_secret_looking_flag_is_decided(engine, version, load):
    undecided = [
        f.dest
        for f in load(version)
        if SECRETISH.search(f.dest)
        and not _counts_or_tokenizer(f.dest)
        and f.dest not in DECLARED[engine]
        and f.dest not in NOT_SECRET[engine]
    ]
    assert undecided == []


def test_declared_secrets_per_release():
    assert secret_flags("sglang", "0.5.9").options == {"--api-key", "--admin-api-key"}
    # 0.5.23 adds the SSL key file's password and the watermark configuration (its inline JSON
    # may hold the keys: sglang/srt/arg_groups/fields/exec_.py)
    assert secret_flags("sglang", "0.5.23").options == {
        "--api-key",
        "--admin-api-key",
        "--ssl-keyfile-password",
        "--watermark-config",
    }
    # 0.33 has --watermark-config, which vLLM itself logs as "***"
    # (vllm/entrypoints/common/startup.py:_SENSITIVE_ARG_FIELDS)
    assert secret_flags("vllm", "0.33.0").options == {
        "--api-key",
        "--hf-token",
        "--watermark-config",
    }
    assert secret_flags("vllm", "0.24.0").options == {"--api-key", "--hf-token"}
    for version in vllm_versions():
        flags = secret_flags("vllm", version)
        # FrontendArgs.api_key: list[str] -> nargs "+": `--api-key K1 K2` (from 0.10.2; one
        # str in 0.10.0's vllm/entrypoints/openai/cli_args.py)
        assert flags.multi == (set() if version == "0.10.0" else {"--api-key"})
    assert secret_flags("sglang", "0.5.9").multi == frozenset()


def test_every_declared_flag_is_in_some_table():
    for engine, declared in DECLARED.items():
        dests = {f.dest for e, v, load in TABLES if e == engine for f in load(v)}
        # watermark_key / watermark_key_b have no flag (resolved from --watermark-config)
        missing = set(declared) - dests - {"watermark_key", "watermark_key_b"}
        assert missing == set(), engine
