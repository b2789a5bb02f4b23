"""Why a cell measured nothing: one typed reason a report, a gate and CI can name.

A cell record of status ``error`` (the cell crashed) or ``failed`` (too few queries answered, or
the session stopped on sustained errors) carries a ``Failure``: its ``kind`` and a one-line
``detail``. A report adds the cells with no readable record (``missing``, ``corrupt``).

Kinds: ``http_status`` (with ``status``: 401, 500 ...), ``timeout``, ``connection_refused``,
``network`` (another transport error), ``bad_response`` (not JSON, no answer at the path),
``exception`` (anything else: its first line), ``no_queries`` (the attack sent none), and, from
the report only, ``missing`` and ``corrupt``.

A failed query is kept in its transcript as ``"ExceptionName: message"``
(``attacks.base.QuerySession``), so a failed cell's reason is read back from that text: the
HTTP target words its errors so that this reading is exact (``pipeline.target.EndpointFailure``:
``HTTP 401``, the transport exception's name, ``Connection refused``).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from ragleak.attacks.base import Transcript

FailureKind = Literal["http_status", "timeout", "connection_refused", "network", "bad_response", "exception",
                      "no_queries", "missing", "corrupt"]
_KINDS = frozenset(FailureKind.__args__)  # type: ignore[attr-defined]

_HTTP = re.compile(r"\bHTTP (\d{3})\b")
_TIMEOUT = re.compile(r"timeout|timed out", re.IGNORECASE)
_REFUSED = re.compile(r"connection refused|ConnectionRefusedError", re.IGNORECASE)
_NETWORK = re.compile(r"\b(ConnectError|NetworkError|RemoteProtocolError|ConnectionError|ReadError|WriteError)\b")
_BAD_RESPONSE = re.compile(r"did not answer JSON|in the response is|response has no")
DETAIL_CHARS = 300  # a reason is one line a terminal shows: longer error texts are cut here


class Failure(BaseModel):
    """Why a cell has no readings: ``kind``, a one-line ``detail``, the HTTP ``status`` where
    there is one, and (failed cells) how many of its queries failed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FailureKind
    detail: str
    status: int | None = None
    queries_failed: int | None = Field(default=None, ge=0)
    queries: int | None = Field(default=None, ge=0)

    @property
    def reason(self) -> str:
        """The reason in words, as terminal, HTML, JUnit and SARIF show it."""
        head = {"http_status": f"HTTP {self.status}", "timeout": "timeout", "connection_refused": "connection refused",
                "network": "network error", "bad_response": "unusable response",
                "exception": "crashed" if self.queries is None else "queries failed",
                "no_queries": "no query sent", "missing": "record missing", "corrupt": "record corrupt"}[self.kind]
        counts = (f" ({self.queries_failed} of {self.queries} queries failed)"
                  if self.queries_failed is not None and self.queries else "")
        return f"{head}{counts}: {self.detail}" if self.detail else head + counts


def first_line(text: str) -> str:
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    return line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 1] + "…"


def classify(text: str) -> tuple[str, int | None]:
    """(kind, HTTP status) of an error's text."""
    if m := _HTTP.search(text):
        return "http_status", int(m.group(1))
    if _TIMEOUT.search(text):
        return "timeout", None
    if _REFUSED.search(text):
        return "connection_refused", None
    if _NETWORK.search(text):
        return "network", None
    if _BAD_RESPONSE.search(text):
        return "bad_response", None
    return "exception", None


def of_exception(exc: BaseException) -> Failure:
    """The failure of a cell that raised ``exc``: the kind and status the exception carries
    (``EndpointFailure``), else read from its text; the detail is its first line."""
    text = f"{type(exc).__name__}: {exc}"
    kind, status = getattr(exc, "kind", None), getattr(exc, "status", None)
    if kind not in _KINDS:
        kind, status = classify(text)
    return Failure(kind=kind, detail=first_line(text), status=status if isinstance(status, int) else None)


def of_transcript(transcript: "Transcript") -> Failure:
    """The failure of a cell whose queries failed: the most frequent kind among them (the last
    such query's error as the detail), with the session's stop reason where it stopped early."""
    errors = [q.error for q in transcript.queries if q.error is not None]
    if not transcript.queries:
        return Failure(kind="no_queries", detail=transcript.stopped or "the attack sent no query", queries=0,
                       queries_failed=0)
    if not errors:  # too few answered with none failing cannot happen (a refusal is a response); say so plainly
        return Failure(kind="exception", detail=transcript.stopped or "too few queries answered",
                       queries=len(transcript.queries), queries_failed=0)
    kinds = Counter(classify(e) for e in errors)
    (kind, status), _ = kinds.most_common(1)[0]
    example = next(e for e in reversed(errors) if classify(e) == (kind, status))
    detail = first_line(example)
    if transcript.stopped:
        detail = first_line(f"{transcript.stopped.split(' (last error')[0]}; last error: {example}")
    return Failure(kind=kind, detail=detail, status=status, queries_failed=len(errors),
                   queries=len(transcript.queries))
