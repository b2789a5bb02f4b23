"""Keeping an endpoint's credentials out of everything ragleak stores or logs.

An HTTP target may carry secrets in its URL (``https://user:pass@host/...``, ``?api_key=...``)
and in its headers (``Authorization``, ``X-API-Key``, ...), and a server may echo them back in an
error body. A ``Redactor`` collects those values when the target is built and replaces every
occurrence with ``***`` in any text before it reaches a transcript, an error message or a log.
"""

from __future__ import annotations

import base64
import logging
import re
from typing import Iterable, Mapping
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

MASK = "***"
# query parameters and header names that carry credentials (matched as substrings, any case)
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "session", "signature", "credential")
# a value this short is not masked inside free text: it would mask ordinary words ("a", "id")
_MIN_SECRET_CHARS = 4


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
