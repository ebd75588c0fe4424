"""Secrets out of everything servefit writes or prints.

A secret is shown as `***` plus the first 8 hex digits of its SHA-256 (`***5e884898`): the
same key gives the same mark in every run, so two runs can be compared, and nothing of the
value is readable. (The digest is not salted: a short password could be found by trying
candidates against it; API keys and tokens are long random strings.) The engine itself always
gets the real value; only what servefit stores and shows is redacted.

What counts as secret:
  * engine flags that carry one, per engine and release (servefit.engines.secretflags reads
    them from the flag tables: `--api-key`, `--admin-api-key`, `--hf-token`, ...), as option
    and value in a command, and as `name=value` / `'name': value` where an engine prints its
    arguments (SGLang `server_args=ServerArgs(... api_key='...')`, vLLM `non-default args: {...
    'api_key': ['...']}`); with the flag tables known, also an option no engine has whose name
    speaks of a secret, the way an environment variable's does (a misspelled `--api-keyy
    sk-...`, which the engine's argparse quotes back in its error);
  * environment variables whose name contains TOKEN, API_KEY, SECRET, PASSWORD (HF_TOKEN,
    HUGGING_FACE_HUB_TOKEN, VLLM_API_KEY, ...); counts of tokens (`*TOKENS*`) and tokenizer
    settings (`*TOKENIZER*`) are not credentials and stay readable;
  * credentials inside URLs: the password of the userinfo (`https://user:password@host`, the
    user name stays readable; a password holding `@` is read up to the last `@` of the host
    part, as urllib does), a user part of 20 characters or more with no password (a token used
    as the user: `https://ghp_...@github.com`);
  * the value of a URL query parameter whose name says it carries a credential (any case):
    names containing `token` (not `tokens`, `tokenizer`), `key` (`api_key`, `apikey`,
    `AWSAccessKeyId`, `keys`; not `keyword`), `secret`, `passw`, `pwd`, `signature`
    (`X-Amz-Signature`, `X-Goog-Signature`), `credential`, `auth` (not `author`), `session`,
    `jwt`, and the name `sig` (Azure SAS): `?token=...`, `&access_token=...`, `;sig=...`.
    Punctuation that ends a sentence after the value (`...?token=abc: no such file`) is kept
    outside the mask;
  * an `Authorization: Bearer ...` / `Basic ...` value, and a Hugging Face token by its shape
    (`hf_` and 34 letters and digits, as `huggingface-cli login` issues them), wherever it
    appears;
  * any value a `Redactor` was told about, wherever it appears.

Where it runs: every run file servefit writes (launch/rundir.py, through the launch's
`Redactor`), the outputs of plan, explain, fit and doctor, the lines `logs` prints, and every
error line: a `servefit.errors.ServefitError` applies `redact_text` (the rules above that need no
engine flag table) to its own message, and the CLI's error exit (cli/main.py) redacts what it
prints with every engine's secret flags and the secret values of its own command line and
environment, click's usage errors included.

This module depends on nothing else in servefit, so every layer can use it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import field
from typing import Any

from servefit.frozen import frozen

MASK = "***"
FINGERPRINT_HEX = 8
# Known values shorter than this, or all digits, are not replaced wherever they occur (a short
# "key" would mangle every word it is part of, a number every figure); the patterns below still
# catch them where a name or a flag introduces them.
MIN_VALUE_LEN = 8

_MASKED = re.compile(r"^\*\*\*[0-9a-f]{" + str(FINGERPRINT_HEX) + "}$")
# What an engine prints in place of a secret it hides itself: vLLM 0.29+ "***"
# (vllm/entrypoints/serve/utils/api_utils.py:redact_sensitive_args), SGLang 0.5.23 "<redacted>"
# (sglang/srt/sampling/watermarking/core.py:redact_watermark_secrets). Kept as printed: its
# fingerprint would be that of the placeholder, not of a key.
_HIDDEN = re.compile(r"^(?:\*+|<redacted>)$")
_ENV_SECRET = re.compile(
    r"TOKEN(?!S|IZER)|API_?KEY|SECRET|PASSWORD|PASSWD|PRIVATE_KEY|ACCESS_KEY|CREDENTIAL"
)
# Values that say "no secret here".
_EMPTY = frozenset({"", "None", "none", "null", "True", "False", "true", "false", "''", '""'})


def fingerprint(value: str) -> str:
    import hashlib  # here: 4 ms of OpenSSL start-up that only a secret on the command line needs

    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:FINGERPRINT_HEX]


def mask(value: str) -> str:
    """`***` + fingerprint; values that hide nothing (empty, None, already masked or hidden by
    the engine) unchanged."""
    if value in _EMPTY or is_masked(value) or _HIDDEN.match(value):
        return value
    return MASK + fingerprint(value)


def is_masked(value: str) -> bool:
    return bool(_MASKED.match(value))


def secret_env_name(name: str) -> bool:
    """An environment variable that holds a credential (any case: HF_TOKEN, hf_token)."""
    return bool(_ENV_SECRET.search(name.upper()))


def _secret_env_word(name: str) -> bool:
    """In free text and data keys only upper-case names count: lower-case ones are engine
    arguments (`speculative_token_map`), decided by the flag tables instead."""
    return name == name.upper() and bool(_ENV_SECRET.search(name))


def _canonical_option(option: str) -> str:
    # vLLM reads `--api_key` as `--api-key` (vllm/utils/argparse_utils.py:FlexibleArgumentParser)
    return "--" + option[2:].replace("_", "-") if option.startswith("--") else option


@frozen
class SecretFlags:
    """Engine flags that carry a secret: option strings, the argument names the engine prints
    them under, which options take several values (nargs "+": vLLM `--api-key K1 K2`), and
    every option of the engine (`known`), so that a prefix is resolved as argparse does."""

    options: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    multi: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()

    def __or__(self, other: SecretFlags) -> SecretFlags:
        return SecretFlags(
            self.options | other.options,
            self.names | other.names,
            self.multi | other.multi,
            self.known | other.known,
        )

    def option(self, token: str) -> str | None:
        """The secret option `token` stands for, or None. Exact names first (`--x_y` reads as
        `--x-y`), then an abbreviation, which argparse accepts (`--api-k`): it counts as
        secret when any option it could stand for is (an ambiguous one the engine rejects).
        An option no engine has whose name speaks of a secret (`--api-keyy`, `--hf-tokenn`: a
        typo the engine refuses, quoting the value back) is secret too, when the engines'
        options are known."""
        name = _canonical_option(token)
        if name in self.options:
            return name
        if name in self.known or not name.startswith("--") or len(name) < 4:
            return None
        hits = sorted(o for o in self.options if o.startswith(name))
        if hits:
            return hits[0]
        if self.known and secret_env_name(name[2:].replace("-", "_")):
            return name
        return None


# --------------------------------------------------------------------------------- patterns

_QUOTED_OR_BARE = r"'[^'\n]*'|\"[^\"\n]*\"|\[[^\]\n]*\]|[^\s,;)}\]'\"]+"
# The password runs to the last `@` before the path (urllib.parse reads `user:p@ss@host` so): a
# password with an unescaped `@` is masked whole, not up to its first `@`.
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s:@/?#'\"<>]*)"
    r"(?::(?P<password>[^\s/?#'\"<>]*))?@"
)
_BEARER = re.compile(
    r"(?P<pre>\b[Bb]earer\s+|\bBEARER\s+|[Aa]uthorization:\s*[Bb]asic\s+)"
    r"(?P<val>[A-Za-z0-9._~+/=-]{4,})"
)
_ENV_ASSIGN = re.compile(
    r"(?P<pre>(?<![\w.-])(?P<q>['\"]?)(?P<name>[A-Z][A-Z0-9_]*)(?P=q)\s*(?:=|:)\s*)"
    r"(?P<val>" + _QUOTED_OR_BARE + ")"
)
# `--opt value`, `--opt=value`, and the option and value as items of a printed list
# (`'--api-key', 'sk-...'`); `more` are further words, values of an option taking several.
_OPTION = re.compile(
    r"(?P<pre>(?<![^\s'\"\[,(])(?P<q>['\"]?)(?P<opt>--[A-Za-z][\w-]*)(?:(?P=q)(?:, |\s+)(?P=q)|=))"
    r"(?P<val>(?!-)(?:'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"\],]+))"
    r"(?P<more>(?:[ \t]+(?!-)[^\s'\"\],]+)*)"
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HF_TOKEN = re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])")
# Cheap tests before the patterns run: most log lines carry none of these.
_ENV_HINT = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL")
# A token used as the user part of a URL is a credential when it is this long (a GitHub or Hub
# token in https://TOKEN@host); a short user name (git@, admin@) stays.
_TOKEN_USER_LEN = 20
# A query parameter: its name, and its value up to the next parameter, fragment, space or quote;
# the value is matched lazily so that punctuation closing the sentence it stands in
# (`...?token=abc: no such file`, `(...&sig=abc)`) stays outside the mask.
_QUERY = re.compile(
    r"(?P<pre>[?&;](?P<name>[A-Za-z0-9_.%\[\]-]{1,64})=)"
    r"(?P<val>[^&;#\s'\"<>]+?)(?=[:.,)\]}]*(?:[&;#\s'\"<>]|$))"
)
# The parameter names that carry a credential, lower-cased (the module docstring lists them).
_QUERY_SECRET_NAME = re.compile(
    r"token(?!s|izer)|key(?!word)|secret|passw|pwd|signature|credential|auth(?!or)"
    r"|session|jwt|(?:^|[-_.])sig$"
)
# Cheap test before _QUERY runs: a parameter separator followed by a name and `=`.
_QUERY_HINT = re.compile(r"[?&;][A-Za-z0-9_.%\[\]-]{1,64}=")


def _mask_quoted(raw: str) -> str:
    """Mask one value as printed: 'x', "x", [..., ...] or bare; quotes and brackets kept."""
    if raw.startswith("[") and raw.endswith("]"):
        return re.sub(r"'([^']*)'|\"([^\"]*)\"", lambda m: _mask_quoted(m.group(0)), raw)
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[0] + mask(raw[1:-1]) + raw[0]
    return mask(raw)


def secret_query_name(name: str) -> bool:
    """A URL query parameter that carries a credential (`token`, `api_key`, `X-Amz-Signature`,
    `sig`, `access_token`, `password`, ...), in any case."""
    return bool(_QUERY_SECRET_NAME.search(name.lower()))


def redact_query(text: str) -> str:
    """The values of secret query parameters: `?token=abc&x=1` -> `?token=***fp&x=1`."""
    if "=" not in text:
        return text
    return _QUERY.sub(
        lambda m: (
            m.group("pre") + mask(m.group("val"))
            if secret_query_name(m.group("name"))
            else m.group(0)
        ),
        text,
    )


def _redact_userinfo(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        user, password = m.group("user"), m.group("password")
        if password is not None:
            return f"{m.group('scheme')}{user}:{mask(password)}@" if password else m.group(0)
        if len(user) >= _TOKEN_USER_LEN:
            return f"{m.group('scheme')}{mask(user)}@"
        return m.group(0)

    return _URL_CREDENTIALS.sub(sub, text) if "@" in text else text


def redact_url(text: str) -> str:
    """Credentials inside URLs, in a URL or in any text that quotes one: the userinfo's password
    (`scheme://user:password@` -> `scheme://user:***fp@`, a long token as the user masked too)
    and the values of secret query parameters (`?token=`, `&X-Amz-Signature=`)."""
    return redact_query(_redact_userinfo(text))


def url_secrets(text: str) -> list[str]:
    """The credentials `redact_url` masks in `text`: userinfo passwords, long user tokens and
    secret query values (so that a message quoting one alone is masked as well)."""
    found = []
    for m in _URL_CREDENTIALS.finditer(text):
        user, password = m.group("user"), m.group("password")
        if password:
            found.append(password)
        elif password is None and len(user) >= _TOKEN_USER_LEN:
            found.append(user)
    found += [m.group("val") for m in _QUERY.finditer(text) if secret_query_name(m.group("name"))]
    return [v for v in found if v not in _EMPTY and not is_masked(v)]


def redact_text(text: str) -> str:
    """The rules that need no engine flag table: URL credentials, secret query values, bearer
    tokens, Hugging Face tokens by their shape, and `NAME=value` of secret variable names. For
    text of no known engine (an error message); a `Redactor` adds the engines' flags."""
    return _PLAIN.text(text)


@frozen
class Redactor:
    """Redacts text, argv, environments and JSON-like data. `flags` are the engine's secret
    flags, `values` secrets known by value (from the launch command and its environment)."""

    flags: SecretFlags = field(default_factory=SecretFlags)
    values: tuple[str, ...] = ()

    def with_values(self, values: Iterable[str]) -> Redactor:
        """The same, also replacing these values wherever they occur (those long enough to be
        told apart from ordinary words and numbers)."""
        new = {
            v for v in values if len(v) >= MIN_VALUE_LEN and not v.isdigit() and not is_masked(v)
        }
        merged = sorted(set(self.values) | new, key=lambda v: (-len(v), v))
        return Redactor(self.flags, tuple(merged))

    # ---- finding secrets

    def argv_secrets(self, argv: Iterable[str]) -> list[str]:
        """The secret values in a command: option values and NAME=value assignments."""
        found = (v for _, values in self._words(list(argv)) for v in values)
        return [v for v in found if v and v not in _EMPTY]

    def env_secrets(self, env: Mapping[str, str]) -> list[str]:
        return [v for k, v in env.items() if secret_env_name(k) and v not in _EMPTY]

    # ---- redacting

    @functools.cached_property
    def _trigger_words(self) -> tuple[str, ...]:
        """Every word one of text()'s rules looks for: a line with none of them (most lines of
        a log) is returned at once."""
        words = {*self.values, "@", "hf_", "earer", "EARER", "asic", *self.flags.names}
        words |= {"TOKEN", "KEY", "SECRET", "PASSW", "CREDENTIAL"}  # _ENV_HINT
        if self.flags.options:
            words.add("--")
        return tuple(sorted(words))

    def _triggered(self, text: str) -> bool:
        """Whether any rule of text() could apply. Substring tests, not one regex of the words:
        CPython's `in` skips through a line by its last character, where a regex tries its
        alternatives at every 'a', 'e' or 's' (3 us a log line instead of 14, on the doctor's
        real logs; a third of its time per line read)."""
        for word in self._trigger_words:
            if word in text:
                return True
        return ("?" in text or "&" in text or ";" in text) and _QUERY_HINT.search(
            text
        ) is not None

    def text(self, text: str) -> str:
        """Any text: known values, URL credentials, bearer tokens, `name=value` of secret
        argument and variable names, and the values of secret options."""
        if not text or not self._triggered(text):
            return text
        for value in self.values:
            if value in text:
                text = text.replace(value, mask(value))
        text = redact_url(text)  # userinfo and secret query values
        if "hf_" in text:
            text = _HF_TOKEN.sub(lambda m: mask(m.group(0)), text)
        if "earer" in text or "EARER" in text or "asic" in text:
            text = _BEARER.sub(lambda m: m.group("pre") + mask(m.group("val")), text)
        if self.flags.names and any(n in text for n in self.flags.names):
            text = _names_regex(self.flags.names).sub(self._sub_value, text)
        if _ENV_HINT.search(text):
            text = _ENV_ASSIGN.sub(
                lambda m: self._sub_value(m) if _secret_env_word(m.group("name")) else m.group(0),
                text,
            )
        if self.flags.options and "--" in text:
            text = _OPTION.sub(self._sub_option, text)
        return text

    def argv(self, argv: Iterable[str]) -> list[str]:
        """A command as a list of words, with secret option values and assignments masked."""
        return [word for word, _ in self._words(list(argv))]

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        return {k: mask(v) if secret_env_name(k) else self.text(v) for k, v in env.items()}

    def data(self, obj: Any) -> Any:
        """JSON-like data: values under secret names masked, every string redacted as text."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {k: self._entry(k, v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.data(v) for v in obj]
        return obj

    # ---- internals

    def _words(self, tokens: list[str]) -> Iterator[tuple[str, list[str]]]:
        """Each word of a command, masked, with the secret values it held. An option takes
        its values as argparse gives them: `--opt=v`, or the next word, or (nargs "+") every
        word up to the next option."""
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            option, eq, inline = token.partition("=")
            if token.startswith("--") and (name := self.flags.option(option)) is not None:
                if eq:
                    yield f"{option}={mask(inline)}", [inline]
                    continue
                yield token, []
                while i < len(tokens) and not tokens[i].startswith("-"):
                    yield mask(tokens[i]), [tokens[i]]
                    i += 1
                    if name not in self.flags.multi:
                        break
            elif eq and _ASSIGNMENT.match(option) and secret_env_name(option):
                yield f"{option}={mask(inline)}", [inline]
            else:
                yield self.text(token), url_secrets(token)

    def _entry(self, key: Any, value: Any) -> Any:
        secret = isinstance(key, str) and (key in self.flags.names or _secret_env_word(key))
        if not secret:
            return self.data(value)
        if isinstance(value, str):
            return mask(value)
        if isinstance(value, (list, tuple)):
            return [mask(v) if isinstance(v, str) else v for v in value]
        if isinstance(value, Mapping):
            return {k: mask(v) if isinstance(v, str) else v for k, v in value.items()}
        return value

    @staticmethod
    def _sub_value(m: re.Match[str]) -> str:
        return m.group("pre") + _mask_quoted(m.group("val"))

    def _sub_option(self, m: re.Match[str]) -> str:
        name = self.flags.option(m.group("opt"))
        if name is None:
            return m.group(0)
        more = m.group("more")
        if more and name in self.flags.multi:
            more = re.sub(r"[^\s]+", lambda w: mask(w.group(0)), more)
        return m.group("pre") + _mask_quoted(m.group("val")) + more


_NAMES_CACHE: dict[frozenset[str], re.Pattern[str]] = {}


def _names_regex(names: frozenset[str]) -> re.Pattern[str]:
    """`name=value`, `name: value`, `'name': value`, `"name": value` for the given names."""
    pattern = _NAMES_CACHE.get(names)
    if pattern is None:
        alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        pattern = re.compile(
            r"(?P<pre>(?<![\w.-])(?P<q>['\"]?)(?:" + alts + r")(?P=q)\s*(?:=|:)\s*)"
            r"(?P<val>" + _QUOTED_OR_BARE + ")"
        )
        _NAMES_CACHE[names] = pattern
    return pattern


# The redactor of text of no known engine (redact_text); Redactor is immutable, one is enough.
_PLAIN = Redactor()
