"""No secret in what plan / explain / fit / doctor print or write (text, JSON, HTML): the keys
and tokens of the command and of --env show as `***` + fingerprint (servefit.redact).

The doctor's log is the repo's real SGLang 0.5.9 log of the seed failure
(tests/doctor/logs/sglang_0_5_9_seed_085_fail.log) with its `api_key=None` set to a key, as
SGLang prints it when started with --api-key (its `server_args=ServerArgs(...)` repr)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from servefit.redact import mask
from tests.clihelp import run
from tests.seedcase import SEED_ARGV, SEED_TARGET_ARGV

KEY = "sk-output-test-0123456789"
ADMIN = "adm-output-test-9876543210"
HF = "hf_OutputTestTokenNotReal0123456789"
SECRETS = (KEY, ADMIN, HF)
LOGS = Path(__file__).resolve().parents[1] / "doctor" / "logs"
SEED_FAIL = [*SEED_ARGV, "--mem-fraction-static", "0.85"]
SGLANG = SEED_FAIL  # SEED_ARGV starts with `python -m sglang.launch_server`
SGLANG_WITH_KEYS = [*SGLANG, "--api-key", KEY, "--admin-api-key", ADMIN]
VLLM_WITH_KEYS = ["vllm", "serve", "Qwen/Qwen3-8B", "--api-key", KEY, ADMIN, "--hf-token", HF]


def clean(*texts: str) -> None:
    for text in texts:
        leaked = [s for s in SECRETS if s in text]
        assert not leaked, leaked


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_plan_and_explain(capsys, tmp_path, fmt):
    env = ["--env", f"HF_TOKEN={HF}"]
    code, out, err = run(capsys, "plan", *SEED_TARGET_ARGV, *env, "--format", fmt, "--",
                         *SGLANG_WITH_KEYS)  # fmt: skip
    assert code == 1  # the seed command at 0.85 fails; the keys change nothing of that
    clean(out, err)
    if fmt == "json":
        plan = json.loads(out)
        assert plan["user_args"]["api_key"] == mask(KEY)
        assert plan["user_args"]["admin_api_key"] == mask(ADMIN)
    html = tmp_path / "explain.html"
    code, out, err = run(capsys, "explain", *SEED_TARGET_ARGV, *env, "--format", fmt,
                         "--html", str(html), "--", *SGLANG_WITH_KEYS)  # fmt: skip
    clean(out, err, html.read_text())
    assert mask(KEY) in out  # explain lists the user's flags, this one masked


def test_fit_commands_carry_masked_keys(capsys, tmp_path):
    html = tmp_path / "fit.html"
    code, out, err = run(capsys, "fit", "--gpu", "A6000", "-c", "32768", "--html", str(html),
                         "--", *VLLM_WITH_KEYS)  # fmt: skip
    assert code == 0, err
    clean(out, err, html.read_text())
    assert f"--api-key '{mask(KEY)}' '{mask(ADMIN)}'" in out
    assert f"--hf-token '{mask(HF)}'" in out
    code, out, err = run(capsys, "fit", "--gpu", "A6000", "-c", "32768", "--format", "json",
                         "--", *VLLM_WITH_KEYS)  # fmt: skip
    clean(out, err)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_doctor_quotes_and_fixes_without_the_key(capsys, tmp_path, fmt):
    real = (LOGS / "sglang_0_5_9_seed_085_fail.log").read_text()
    # SGLang's repr of a launch without keys: api_key=None, admin_api_key=None
    text, n = re.subn(r"\bapi_key=None", f"api_key='{KEY}'", real)
    text, m = re.subn(r"\badmin_api_key=None", f"admin_api_key='{ADMIN}'", text)
    assert (n, m) == (1, 1)
    log = tmp_path / "with_key.log"
    log.write_text(text)
    code, out, err = run(capsys, "doctor", str(log), "--gpu", "A6000", "--format", fmt,
                         "--command", " ".join(SGLANG_WITH_KEYS))  # fmt: skip
    assert code == 1
    clean(out, err)
    assert mask(KEY) in out  # the fixed command keeps the flag, masked
