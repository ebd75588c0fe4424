"""servefit.redact: what is masked, how, and what stays readable.

The fingerprint is the first 8 hex digits of SHA-256; the expected values are the published
test vectors of FIPS 180-2 (appendix B.1: SHA-256("abc"); B.2 for the 448-bit message), not a
second computation. The engine lines are the engines' own formats (cited per test)."""

from __future__ import annotations

import hashlib

from servefit.engines.secretflags import redactor
from servefit.redact import (
    Redactor,
    SecretFlags,
    fingerprint,
    is_masked,
    mask,
    redact_text,
    redact_url,
    url_secrets,
)

KEY = "sk-live-0123456789abcdef"
KEY2 = "sk-live-fedcba9876543210"
HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
M = mask(KEY)
M2 = mask(KEY2)
MHF = mask(HF)
ALL = redactor()


def test_fingerprint_is_truncated_sha256():
    # FIPS 180-2 B.1: SHA-256("abc") = ba7816bf 8f01cfea ...
    assert fingerprint("abc") == "ba7816bf"
    assert mask("abc") == "***ba7816bf"
    # FIPS 180-2 B.2: SHA-256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") = 248d6a61 ...
    assert fingerprint("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") == "248d6a61"
    assert hashlib.sha256(KEY.encode()).hexdigest().startswith(M[3:])


def test_masking_is_stable_and_idempotent():
    assert mask(KEY) == mask(KEY) and is_masked(M)
    assert mask(M) == M  # an already masked value is left alone
    for nothing in ("", "None", "null", "True", "False"):
        assert mask(nothing) == nothing
    line = f"server_args=ServerArgs(api_key='{KEY}')"
    once = ALL.text(line)
    assert ALL.text(once) == once == f"server_args=ServerArgs(api_key='{M}')"


def test_what_the_engine_hid_itself_stays_as_printed():
    # vLLM 0.29+ logs its sensitive arguments as "***"
    # (vllm/entrypoints/serve/utils/api_utils.py:redact_sensitive_args)
    line = "non-default args: {'model_tag': 'Q', 'api_key': '***', 'hf_token': '***'}"
    assert ALL.text(line) == line
    assert mask("<redacted>") == "<redacted>"  # SGLang 0.5.23's watermark keys


def test_sglang_0_5_9_server_args_repr():
    # sglang/srt/entrypoints/engine.py:_launch_subprocesses logger.info(f"{server_args=}"): the
    # dataclass repr, every field
    line = (
        "[2026-02-01 00:05:02] server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B', "
        f"tp_size=2, api_key='{KEY}', admin_api_key=None, speculative_token_map=None, "
        "max_total_tokens=None, bucket_time_to_first_token=None)"
    )
    assert ALL.text(line) == line.replace(KEY, M)


def test_sglang_0_5_23_server_args_dict():
    # 0.5.23 logs f"server_args={_server_args_for_logging(server_args)}", a dict
    line = (
        f"server_args={{'model_path': 'Q', 'api_key': '{KEY}', 'ssl_keyfile_password': 'pw-1234'}}"
    )
    assert ALL.text(line) == (
        f"server_args={{'model_path': 'Q', 'api_key': '{M}', "
        f"'ssl_keyfile_password': '{mask('pw-1234')}'}}"
    )


def test_vllm_non_default_args():
    # vllm/entrypoints/utils.py:log_non_default_args logger.info("non-default args: %s", dict)
    line = (
        "(APIServer pid=7) INFO 06-01 09:00:00 [utils.py:233] non-default args: "
        f"{{'model_tag': 'Qwen/Qwen3-8B', 'api_key': ['{KEY}', '{KEY2}'], 'hf_token': '{HF}'}}"
    )
    assert ALL.text(line) == line.replace(KEY, M).replace(KEY2, M2).replace(HF, MHF)


def test_commands_as_text_and_as_words():
    text = f"HF_TOKEN={HF} vllm serve Q --api-key {KEY} {KEY2} --port 8000"
    assert ALL.text(text) == f"HF_TOKEN={MHF} vllm serve Q --api-key {M} {M2} --port 8000"
    words = ["vllm", "serve", "Q", "--api_key", KEY, KEY2, "--hf-token", "--port", "8000"]
    # vLLM reads --api_key as --api-key; nargs "+" takes both keys; --hf-token alone (nargs "?")
    # takes no value here
    assert ALL.argv(words) == [
        "vllm",
        "serve",
        "Q",
        "--api_key",
        M,
        M2,
        "--hf-token",
        "--port",
        "8000",
    ]
    assert ALL.argv_secrets(words) == [KEY, KEY2]
    # SGLang's --api-key takes one value; `--api-k` is an abbreviation argparse accepts
    sgl = redactor("sglang", "0.5.9")
    assert sgl.argv(["--api-k", KEY, "--tp", "2"]) == ["--api-k", M, "--tp", "2"]
    assert sgl.argv([f"--admin-api-key={KEY2}"]) == [f"--admin-api-key={M2}"]
    # the option and its value as items of a printed list
    assert ALL.text(f"['--api-key', '{KEY}']") == f"['--api-key', '{M}']"


def test_abbreviations_resolve_like_argparse():
    # vLLM's --watermark (a float) is an option of its own: not SGLang 0.5.23's --watermark-config
    assert (
        ALL.text("--watermark 0.1 --max-total-tokens 5") == "--watermark 0.1 --max-total-tokens 5"
    )
    assert ALL.flags.option("--watermark") is None
    assert ALL.flags.option("--watermark-c") == "--watermark-config"
    assert ALL.flags.option("--hf-tok") == "--hf-token"


def test_environment_names():
    env = {
        "HF_TOKEN": HF,
        "HUGGING_FACE_HUB_TOKEN": HF,
        "VLLM_API_KEY": KEY,
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "DB_PASSWORD": "hunter22",
        "MAX_TOKENS": "512",
        "TOKENIZERS_PARALLELISM": "false",
        "PATH": "/usr/bin",
        "HTTPS_PROXY": "http://me:pass-word@proxy:3128",
    }
    assert ALL.env(env) == {
        "HF_TOKEN": MHF,
        "HUGGING_FACE_HUB_TOKEN": MHF,
        "VLLM_API_KEY": M,
        "AWS_SECRET_ACCESS_KEY": mask("aws-secret-value"),
        "DB_PASSWORD": mask("hunter22"),
        "MAX_TOKENS": "512",  # a count of tokens, not a token
        "TOKENIZERS_PARALLELISM": "false",
        "PATH": "/usr/bin",
        "HTTPS_PROXY": f"http://me:{mask('pass-word')}@proxy:3128",
    }


def test_urls_and_bearer():
    assert redact_url("https://user:pa55word@host/x") == f"https://user:{mask('pa55word')}@host/x"
    token = "ghp_" + "a" * 36
    assert redact_url(f"https://{token}@github.com/o/r") == f"https://{mask(token)}@github.com/o/r"
    assert redact_url("ssh://git@github.com/o/r") == "ssh://git@github.com/o/r"  # a user name
    assert ALL.text(f"Authorization: Bearer {KEY}") == f"Authorization: Bearer {M}"
    assert ALL.text("a basic test, the bearer of news") == "a basic test, the bearer of news"


def test_a_hugging_face_token_by_its_shape():
    # an engine that prints the token in a sentence of its own, after the run is over (no value
    # known any more): the hf_ + 34 letters and digits shape is enough
    assert ALL.text(f"Using token {HF} for the Hub") == f"Using token {MHF} for the Hub"
    assert (
        ALL.text("hf_transfer enabled; hf_hub_download") == "hf_transfer enabled; hf_hub_download"
    )


def test_known_values_anywhere_and_short_ones_only_where_named():
    r = Redactor().with_values([KEY, "short", "12345678"])
    assert r.values == (KEY,)  # short values and numbers would mangle ordinary text
    assert r.text(f"unexpected {KEY}!") == f"unexpected {M}!"
    assert ALL.text("api_key=short") == f"api_key={mask('short')}"


def test_data_masks_by_key_name():
    data = {
        "api_key": [KEY],
        "hf_token": HF,
        "speculative_token_map": "/models/map.json",  # a path, not a secret
        "nested": {"HF_TOKEN": HF, "url": "http://a:b-secret@h"},
        "count": 3,
    }
    assert ALL.data(data) == {
        "api_key": [M],
        "hf_token": MHF,
        "speculative_token_map": "/models/map.json",
        "nested": {"HF_TOKEN": MHF, "url": f"http://a:{mask('b-secret')}@h"},
        "count": 3,
    }


def test_secret_flags_union():
    a = SecretFlags(options=frozenset({"--a-key"}), names=frozenset({"a_key"}))
    b = SecretFlags(options=frozenset({"--b-key"}), multi=frozenset({"--b-key"}))
    u = a | b
    assert u.options == {"--a-key", "--b-key"} and u.multi == {"--b-key"} and u.names == {"a_key"}


def test_secret_query_values_in_any_case_and_the_rest_readable():
    url = (
        "https://h/m?token=tok-123456&X-Amz-Signature=deadbeef01&X-Amz-Credential=AKIA/x"
        "&api_key=k1&access_token=at&sig=s1&password=pw&max_tokens=5&keyword=llama"
        "&author=me&tokenizer=t&api_keys=k2"
    )
    assert redact_url(url) == (
        f"https://h/m?token={mask('tok-123456')}&X-Amz-Signature={mask('deadbeef01')}"
        f"&X-Amz-Credential={mask('AKIA/x')}&api_key={mask('k1')}&access_token={mask('at')}"
        f"&sig={mask('s1')}&password={mask('pw')}&max_tokens=5&keyword=llama"
        f"&author=me&tokenizer=t&api_keys={mask('k2')}"
    )
    # `;` separates parameters too; the value's sentence punctuation stays outside the mask
    assert redact_url("h?a=1;pwd=p1") == f"h?a=1;pwd={mask('p1')}"
    assert ALL.text("https://h/m?token=abc: no such file") == (
        f"https://h/m?token={mask('abc')}: no such file"
    )
    assert ALL.text("(see https://h/m?sig=a.b.c).") == f"(see https://h/m?sig={mask('a.b.c')})."
    # idempotent, and a URL without a secret query is left alone
    once = redact_url(url)
    assert redact_url(once) == once
    assert redact_url("https://h/m?revision=main&x=1") == "https://h/m?revision=main&x=1"


def test_a_password_holding_at_is_masked_whole():
    # urllib.parse reads the userinfo up to the last `@` before the host
    assert redact_url("https://u:p@ss@host/x") == f"https://u:{mask('p@ss')}@host/x"


def test_url_secrets_and_argv_secrets_find_url_credentials():
    url = f"https://alice:pw-123456@h/m?token={KEY}&x=1"
    assert url_secrets(url) == ["pw-123456", KEY]
    assert ALL.argv_secrets(["--model-path", url, f"HF_TOKEN={HF}"]) == ["pw-123456", KEY, HF]


def test_a_misspelled_secret_flag_is_secret():
    # SGLang's argparse quotes an unknown option back with its value ("unrecognized arguments:
    # --api-keyy sk-..."); an unknown option of a name speaking of a key is masked
    assert ALL.argv(["--api-keyy", KEY, "--tp", "2"]) == ["--api-keyy", M, "--tp", "2"]
    line = f"launch_server.py: error: unrecognized arguments: --api-keyy {KEY}"
    assert ALL.text(line) == line.replace(KEY, M)
    # a known option of the engines stays as it is, a secret-sounding one included
    assert ALL.argv(["--speculative-token-map", "/m/map.json"]) == [
        "--speculative-token-map",
        "/m/map.json",
    ]
    # without the engines' options known nothing is guessed
    assert Redactor().argv(["--api-keyy", KEY]) == ["--api-keyy", KEY]


def test_redact_text_needs_no_flag_table_and_errors_use_it():
    from servefit.errors import ConfigError

    text = f"https://u:pw-123456@h/m?token={KEY}: Authorization: Bearer {KEY2}, {HF}"
    want = f"https://u:{mask('pw-123456')}@h/m?token={M}: Authorization: Bearer {M2}, {MHF}"
    assert redact_text(text) == want
    err = ConfigError(text)
    assert str(err) == want and err.args == (text,)  # shown redacted, raised as given
