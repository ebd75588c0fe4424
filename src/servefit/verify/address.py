"""A server's URL as verify connects to it: the host in the form a resolver takes, the query
kept apart so that it goes with every request.

A host typed with full-width characters (`ｌｏｃａｌｈｏｓｔ`, `１２７．０．０．１`, an input
method left in full-width mode) is NFKC-normalised to `localhost`, `127.0.0.1`; a Unicode host
(`bücher.example`) is IDNA-encoded with Python's `idna` codec (IDNA 2003, as `socket` does:
`xn--bcher-kva.example`). httpx itself refuses the first with InvalidURL (its IDNA 2008 check
rejects full-width letters). A host that normalises into URL syntax (`evil．com／x` -> a `/`)
or that IDNA cannot encode is refused with one line, never passed on.
"""

from __future__ import annotations

import unicodedata

from servefit.errors import ArgumentError
from servefit.redact import redact_url

# Characters that end or split a URL's host: a host that NFKC turns into one of them was not
# a host (`／` -> `/`, `＠` -> `@`, `？` -> `?`).
_URL_SYNTAX = frozenset("/?#@\\[] ")


def _fail(what: str, url: str, why: str) -> ArgumentError:
    return ArgumentError(f"{what}: {redact_url(url)!r}: {why}")


def _encode_host(host: str, what: str, url: str) -> str:
    """A host after NFKC: refused when it became URL syntax, IDNA-encoded when not ASCII; an
    IPv6 literal `[...]` as it is."""
    if host.startswith("[") and host.endswith("]") and host.isascii():
        return host
    if any(c in _URL_SYNTAX or c.isspace() or ord(c) < 32 for c in host):
        raise _fail(what, url, f"the host {host!r} (after NFKC normalisation) is not a host name")
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        reason = exc.__cause__ or exc
        raise _fail(what, url, f"the host {host!r} cannot be IDNA-encoded ({reason})") from None


def normalise_host(url: str, what: str = "URL") -> str:
    """`url` with its host NFKC-normalised and IDNA-encoded (and a full-width port made ASCII);
    the scheme, credentials, path and query unchanged. A text without `://` is returned as it
    is, for the URL check to name. Raises ArgumentError (exit 2) for a host that cannot be."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, hostport = netloc.rpartition("@")
    if hostport.isascii():
        return url.strip()
    hostport = unicodedata.normalize("NFKC", hostport)
    if hostport.startswith("["):
        close = hostport.find("]")
        host, port = (hostport, "") if close < 0 else (hostport[: close + 1], hostport[close + 1 :])
    else:
        host, colon, number = hostport.rpartition(":")
        host, port = (host, colon + number) if colon else (hostport, "")
    if port and not port[1:].isascii():
        raise _fail(what, url, f"the port {port[1:]!r} is not a number")
    return f"{scheme}://{userinfo}{at}{_encode_host(host, what, url)}{port}{tail}"


def split_base_url(url: str) -> tuple[str, str]:
    """('http://h:30000', 'token=x') for 'http://h:30000/v1/?token=x#frag': the base that
    request paths (with their /v1) are added to, and the query sent with every request."""
    url = url.strip()
    url, _, _fragment = url.partition("#")
    url, _, query = url.partition("?")
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url, query
