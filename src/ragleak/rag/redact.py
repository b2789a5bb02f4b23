"""Keeping an endpoint's credentials out of everything ragleak stores or logs.

An HTTP target may carry secrets in its URL (``https://user:pass@host/...``, ``?api_key=...``)
and in its headers (``Authorization``, ``X-API-Key``, ...), and a server may echo them back in an
error body. A ``Redactor`` collects those values when the target is built and replaces every
occurrence with ``***`` in any text before it reaches a transcript, an error message or a log.

A URL or header value may name environment variables instead of holding a secret
(``Authorization: Bearer $env:RAG_TOKEN``, or ``${env:RAG_TOKEN}``): configs, cell ids and
records keep the reference, and ``expand_env`` reads the value only in the process that sends
the requests, when it builds the target.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from typing import Iterable, Mapping
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

from ragleak.errors import EndpointError

MASK = "***"
# query parameters and header names that carry credentials (matched as substrings, any case)
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "session", "signature", "credential")
# a value this short is not masked inside free text: it would mask ordinary words ("a", "id")
_MIN_SECRET_CHARS = 4


#: ``$env:NAME`` or ``${env:NAME}``: a value read from the environment when a request is built
_ENV_REF = re.compile(r"\$env:([A-Za-z_][A-Za-z0-9_]*)|\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def env_names(text: str) -> list[str]:
    """The environment variables ``text`` refers to (``$env:NAME`` / ``${env:NAME}``), in order."""
    return [a or b for a, b in _ENV_REF.findall(text)]


def expand_env(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every ``$env:NAME`` replaced by that variable's value; an unset variable is an
    ``EndpointError`` (a request with an empty token would fail as a 401 far from its cause)."""
    env = os.environ if environ is None else environ

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in env:
            raise EndpointError(f"environment variable {name} is not set (referred to as $env:{name})")
        return env[name]

    return _ENV_REF.sub(value, text)


def literal_secrets(url: str, headers: Mapping[str, str]) -> list[str]:
    """Where a URL or headers hold a credential literally rather than as ``$env:NAME``: the
    user info or query parameter of the URL, the names of credential-carrying headers."""
    found = []
    parts = urlsplit(url)
    if parts.username is not None and not env_names(parts.netloc.rsplit("@", 1)[0]):
        found.append("the URL's user info")
    for name, raw in parse_qsl(parts.query, keep_blank_values=True):
        if raw and is_secret_name(name) and not env_names(raw):
            found.append(f"URL parameter {name!r}")
    found += [f"header {name!r}" for name, value in headers.items()
              if value and is_secret_name(name) and not env_names(value)]
    return found


def is_secret_name(name: str) -> bool:
    """Whether a query parameter or header name carries a credential (``Authorization``,
    ``X-API-Key``, ``api_key``, ``access_token``, ``client_secret``, ``password``, ...)."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _url_secrets(url: str) -> list[str]:
    parts = urlsplit(url)
    found = [v for v in (parts.username, parts.password) if v]
    if parts.username is not None:
        # the HTTP client sends URL user info as a Basic auth header, which a server may echo
        basic = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        found.append(base64.b64encode(basic.encode("utf-8")).decode("ascii"))
    for pair in parts.query.split("&"):
        name, _, raw = pair.partition("=")
        if raw and is_secret_name(unquote_plus(name)):
            found += [raw, unquote_plus(raw)]  # as sent, and as a server decodes it
    return found


def _header_secrets(headers: Mapping[str, str]) -> list[str]:
    found = []
    for name, value in headers.items():
        if is_secret_name(name) and value:
            found.append(value)
            # "Bearer abc", "Basic xyz": the credential alone may be echoed without its scheme
            found.extend(part for part in value.split() if len(part) >= _MIN_SECRET_CHARS)
    return found


def redact_url(url: str) -> str:
    """The URL with its user info and credential-carrying query values masked."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if is_secret_name(k) and v else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Redactor:
    """Masks known secret values (and the URL forms of them) in any text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in secrets if s and len(s) >= _MIN_SECRET_CHARS}
        self.secrets: tuple[str, ...] = tuple(sorted(values))
        # a value may appear percent-encoded in a URL or an echoed request line
        values |= {form(s) for s in list(values) for form in (unquote, lambda v: quote(v, safe=""), quote_plus)}
        # longest first, so a secret containing another is masked whole
        # any case: percent-escapes may come back as %2f or %2F
        self._pattern = re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)),
                                   re.IGNORECASE) if values else None

    @classmethod
    def for_endpoint(cls, url: str, headers: Mapping[str, str] | None = None) -> "Redactor":
        return cls([*_url_secrets(url), *_header_secrets(headers or {})])

    def __call__(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._pattern is not None and text else text


class _RedactingFilter(logging.Filter):
    """Masks every registered redactor's secrets in each record's message."""

    def __init__(self) -> None:
        super().__init__()
        self.redactors: list[Redactor] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = message
        for redactor in self.redactors:
            clean = redactor(clean)
        if clean != message:
            record.msg, record.args = clean, None
        return True


_HTTPX_FILTER = _RedactingFilter()


def redact_http_client_logs(redactor: Redactor) -> None:
    """Mask ``redactor``'s secrets in httpx's own request log (it names the full URL at INFO)."""
    logger = logging.getLogger("httpx")
    if _HTTPX_FILTER not in logger.filters:
        logger.addFilter(_HTTPX_FILTER)
    if redactor._pattern is not None and redactor not in _HTTPX_FILTER.redactors:
        _HTTPX_FILTER.redactors.append(redactor)
