"""Targets: the one interface attacks talk to, with three adapters.

* ``PipelineTarget``  - the built-in RAGPipeline (gives a full hook trace);
* ``CallableTarget``  - any Python callable ``query -> answer`` (or ``(query, history) -> ...``),
  which may return ``(answer, retrieved_ids)`` or a dict with ``answer`` / ``retrieved_ids`` /
  ``refused`` (true where the target declined the query);
* ``HttpTarget``      - a JSON endpoint: a request template with ``{query}``, a path to the answer
  in the response, timeouts and retries with exponential backoff, credentials kept out of
  everything it reports. Two request shapes: a plain JSON body (``json``), and OpenAI
  chat-completions (``openai``: the history becomes user/assistant ``messages``).

``pipeline.build.build_target`` is the one place that builds a target, from an index or from an
endpoint's ``TargetConfig``. Multi-turn use wraps any target in ``pipeline.conversation.Conversation``,
which keeps the history. A target may carry
a ``stop_rule``: the attack's query session stops sending once errors are sustained (a dead or
rate-limiting service), so a cell fails with the reason instead of burning its budget.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from ragleak.errors import ConfigError, EndpointError, TargetError
from ragleak.pipeline.rag import RAGPipeline
from ragleak.rag.redact import Redactor, env_names, expand_env, redact_http_client_logs, redact_url
from ragleak.records import TargetResponse, Turn

log = logging.getLogger(__name__)


class EndpointFailure(EndpointError):
    """An HTTP target's request that failed, with what kind of failure it was, so a cell record can
    name it (``grid.failure``): ``kind`` one of ``http_status`` (with ``status``), ``timeout``,
    ``connection_refused``, ``network``, ``bad_response``. The message says the same in words
    (``HTTP 401``, ``ReadTimeout``, ``Connection refused``), which is what a transcript keeps."""

    def __init__(self, message: str, kind: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


def _network_kind(exc: BaseException) -> str:
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    return "connection_refused" if "refused" in str(exc).lower() else "network"


@dataclass(frozen=True)
class StopRule:
    """When a query session stops sending to a target whose errors are sustained: after
    ``consecutive`` failed queries in a row, or when more than ``max_rate`` of the last ``window``
    queries failed (0 turns either test off). A few failures among answers are a ``partial`` cell;
    a service that is down or throttling every request is not worth the rest of the budget."""

    consecutive: int = 5
    window: int = 20
    max_rate: float = 0.5

    def reason(self, outcomes: Sequence[bool]) -> str | None:
        """Why to stop after ``outcomes`` (True: the query got a response), or None to go on."""
        if self.consecutive and len(outcomes) >= self.consecutive and not any(outcomes[-self.consecutive:]):
            return f"the last {self.consecutive} queries failed"
        recent = list(outcomes[-self.window:]) if self.window else []
        failed = recent.count(False)
        if self.window and len(recent) >= self.window and failed > self.max_rate * len(recent):
            return f"{failed} of the last {len(recent)} queries failed (more than {self.max_rate:.0%})"
        return None


@runtime_checkable
class Target(Protocol):
    name: str
    exposes_retrieved_ids: bool

    def answer(self, query: str, history: Sequence[Turn] = ()) -> TargetResponse: ...


class PipelineTarget:
    """The built-in pipeline as a target; ``principal`` is the client id it tells the defense on
    every query (None: the requests name no client, and a per-client budget sees one stream)."""

    name = "pipeline"
    exposes_retrieved_ids = True

    def __init__(self, pipeline: RAGPipeline, principal: str | None = None) -> None:
        self.pipeline = pipeline
        self.principal = principal

    def answer(self, query: str, history: Sequence[Turn] = (), principal: str | None = None) -> TargetResponse:
        """``principal`` (a request's own client id, e.g. from ``ragleak serve``) wins over the target's."""
        response = self.pipeline.answer(query, tuple(history), self.principal if principal is None else principal)
        return _target_response(query, response)

    @property
    def batch_size(self) -> int:
        """How many independent queries ``answer_many`` decodes together (1: one at a time)."""
        return self.pipeline.batch_size()

    @property
    def takes_many(self) -> bool:
        """Whether ``answer_many`` does better than ``answer`` query after query
        (``RAGPipeline.takes_many``)."""
        return self.pipeline.takes_many()

    def answer_many(self, queries: Sequence[str]) -> list[TargetResponse | Exception]:
        """Independent single-turn queries: each entry is ``answer(query)``'s response or the
        exception it raised (``RAGPipeline.answer_many`` batches their generation)."""
        return [out if isinstance(out, Exception) else _target_response(query, out)
                for query, out in zip(queries, self.pipeline.answer_many(list(queries), self.principal))]


def _target_response(query: str, response) -> TargetResponse:
    return TargetResponse(query=query, answer=response.answer, retrieved_ids=response.trace.retrieved_ids,
                          trace=response.trace)


class CallableTarget:
    name = "callable"

    def __init__(self, fn: Callable[..., Any], exposes_retrieved_ids: bool = False,
                 stop_rule: StopRule | None = None, name: str | None = None) -> None:
        self.fn = fn
        self.exposes_retrieved_ids = exposes_retrieved_ids
        self.stop_rule = stop_rule
        if name:
            self.name = name
        try:
            self._takes_history = len(inspect.signature(fn).parameters) >= 2
        except (TypeError, ValueError):
            self._takes_history = False

    def answer(self, query: str, history: Sequence[Turn] = ()) -> TargetResponse:
        try:
            out = self.fn(query, list(history)) if self._takes_history else self.fn(query)
        except Exception as exc:
            raise TargetError(f"target callable {getattr(self.fn, '__name__', self.fn)!r} raised {type(exc).__name__}: {exc}") from exc
        answer, ids, refused = _unpack(out)
        return TargetResponse(query=query, answer=answer, retrieved_ids=ids, refused=refused)


def _unpack(out: Any) -> tuple[str, list[str] | None, bool]:
    """(answer, retrieved ids, refused): a dict may say ``"refused": true`` (the target declined)."""
    if isinstance(out, str):
        return out, None, False
    if isinstance(out, dict) and isinstance(out.get("answer"), str):
        ids, refused = out.get("retrieved_ids"), out.get("refused", False)
        if not isinstance(refused, bool):
            raise TargetError(f"target callable returned refused={refused!r}; expected true or false")
        return out["answer"], [str(i) for i in ids] if ids is not None else None, refused
    if isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], str):
        return out[0], [str(i) for i in out[1]] if out[1] is not None else None, False
    raise TargetError(
        f"target callable returned {type(out).__name__}; expected str, (answer, retrieved_ids) "
        "or {'answer': ..., 'retrieved_ids': [...], 'refused': false}"
    )


_PATH_TOKEN = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]")


def json_path(document: Any, path: str) -> Any:
    """Follow a small JSON path: ``answer``, ``$.choices[0].message.content``, ``data.items[2]``."""
    rest = path[1:] if path.startswith("$") else path
    value, pos = document, 0
    while pos < len(rest):
        match = _PATH_TOKEN.match(rest, pos)
        if not match:
            raise EndpointError(f"bad JSON path {path!r} at position {pos}")
        key, idx = match.groups()
        try:
            value = value[key] if key is not None else value[int(idx)]
        except (KeyError, IndexError, TypeError) as exc:
            raise EndpointError(f"response has no {path!r} (failed at {match.group(0)!r})") from exc
        pos = match.end()
    return value


def chat_messages(query: str, history: Sequence[Turn], system_prompt: str | None = None) -> list[dict[str, str]]:
    """OpenAI chat ``messages``: an optional system message, each earlier turn as a user and an
    assistant message, then the query."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for turn in history:
        messages += [{"role": "user", "content": turn.query}, {"role": "assistant", "content": turn.answer}]
    return messages + [{"role": "user", "content": query}]


def _fill(template: Any, query: str, history: Sequence[Turn], system_prompt: str | None = None) -> Any:
    """Substitute into a parsed JSON template, so the query is JSON-escaped by construction:
    ``"{history}"`` becomes the turns (``[{"query", "answer"}, ...]``), ``"{messages}"`` the
    OpenAI chat messages."""
    if isinstance(template, str):
        if template == "{history}":
            return [t.model_dump() for t in history]
        if template == "{messages}":
            return chat_messages(query, history, system_prompt)
        return template.replace("{query}", query)
    if isinstance(template, list):
        return [_fill(v, query, history, system_prompt) for v in template]
    if isinstance(template, dict):
        return {k: _fill(v, query, history, system_prompt) for k, v in template.items()}
    return template


#: Per request shape: the default request body and the JSON path to the answer.
SHAPES: dict[str, tuple[str, str]] = {
    "json": ('{"query": "{query}", "history": "{history}"}', "answer"),
    "openai": ('{"model": "{model}", "messages": "{messages}"}', "choices[0].message.content"),
}


#: Defaults of an HTTP target: a hanging endpoint costs at most about
#: (retries + 1) * timeout + backoff * (2**retries - 1) seconds per query.
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF_S = 0.5


def template_sends_history(shape: str, request_template: str | None) -> bool:
    """Whether requests of this shape and template carry a conversation's history."""
    template = request_template or SHAPES[shape][0]
    return '"{history}"' in template or '"{messages}"' in template


@dataclass
class HttpTarget:
    """A JSON endpoint. Each query is POSTed with ``timeout_s`` per attempt; connection errors,
    timeouts, HTTP 5xx and 429 are retried up to ``retries`` times after an exponential backoff
    (``backoff_s``, doubling); any other 4xx fails at once. Credentials in the URL or in
    credential-carrying headers are masked (``***``) in the target's name, its errors and logs,
    including where the server echoes them in an error body."""

    url: str = field(repr=False)
    request_template: str | None = None
    answer_path: str | None = None
    retrieved_ids_path: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    name: str = ""
    shape: str = "json"
    api_model: str | None = None
    system_prompt: str | None = None
    stop_rule: StopRule | None = field(default_factory=StopRule)

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise EndpointError(f"unknown request shape {self.shape!r}; known: {', '.join(SHAPES)}")
        if self.shape == "openai" and self.request_template is not None:
            raise EndpointError("the openai shape builds its own request body; give a request template with shape json")
        template, answer_path = SHAPES[self.shape]
        self.request_template = self.request_template or template
        self.answer_path = self.answer_path or answer_path
        # $env:NAME references are read here, where requests are made, and kept out of every
        # field that is reported; their values are masked like any credential
        self._url = expand_env(self.url)
        self._headers = {k: expand_env(v) for k, v in self.headers.items()}
        from_env = [expand_env(f"$env:{n}") for text in (self.url, *self.headers.values()) for n in env_names(text)]
        self._redact = Redactor([*Redactor.for_endpoint(self._url, self._headers).secrets, *from_env])
        redact_http_client_logs(self._redact)
        self.public_url = redact_url(self.url)
        self.name = self._redact(self.name) if self.name else f"http:{self.public_url}"
        if not self.timeout_s > 0:
            raise EndpointError(f"timeout must be > 0 seconds, got {self.timeout_s}")
        if self.retries < 0:
            raise EndpointError(f"retries must be >= 0, got {self.retries}")
        if self.backoff_s < 0:
            raise EndpointError(f"backoff must be >= 0 seconds, got {self.backoff_s}")
        try:
            self._template = json.loads(self.request_template)
        except ValueError as exc:
            raise EndpointError(f"request template is not valid JSON: {exc}") from exc
        if self.shape == "openai":
            self._template["model"] = self.api_model or "default"
        elif "{query}" not in self.request_template and '"{messages}"' not in self.request_template:
            raise EndpointError('request template must contain {query} (or "{messages}", which carries it)')

    @property
    def exposes_retrieved_ids(self) -> bool:
        return self.retrieved_ids_path is not None

    @property
    def sends_history(self) -> bool:
        """Whether a conversation's history reaches the endpoint ({history} or {messages} in the body)."""
        return template_sends_history(self.shape, self.request_template)

    def _body(self, r: Any) -> str:
        # mask before cutting, so a cut never leaves part of a secret behind
        return repr(self._redact(r.text)[:200])

    def answer(self, query: str, history: Sequence[Turn] = ()) -> TargetResponse:
        import httpx

        if history and not self.sends_history:
            # a multi-turn measurement whose turns arrive one by one would pass for multi-turn
            raise EndpointError(f"the request template for {self.public_url} sends no history ({{history}} or "
                                "{messages}): a multi-turn conversation cannot reach this endpoint")
        body = _fill(self._template, query, history, self.system_prompt)
        where = self.public_url
        last_error, last_kind, last_status = "no attempt made", "network", None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                r = httpx.post(self._url, json=body, headers=self._headers, timeout=self.timeout_s)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                last_error = self._redact(f"{type(exc).__name__}: {exc}")
                last_kind, last_status = _network_kind(exc), None
                log.warning("attempt %d of %d to %s failed: %s", attempt + 1, self.retries + 1, where, last_error)
                continue
            except (httpx.HTTPError, httpx.InvalidURL) as exc:  # a bad URL, scheme or redirect loop: no retry
                raise EndpointFailure(self._redact(f"cannot query {where}: {type(exc).__name__}: {exc}"),
                                      "network") from None
            if r.status_code >= 500 or r.status_code == 429:
                last_error = f"HTTP {r.status_code}: {self._body(r)}"
                last_kind, last_status = "http_status", r.status_code
                log.warning("attempt %d of %d to %s failed: %s", attempt + 1, self.retries + 1, where, last_error)
                continue
            if r.status_code >= 400:
                raise EndpointFailure(f"{where} answered HTTP {r.status_code}: {self._body(r)}", "http_status",
                                      r.status_code)
            try:
                payload = r.json()
            except ValueError:
                raise EndpointFailure(f"{where} did not answer JSON: {self._body(r)}", "bad_response") from None
            answer = json_path(payload, self.answer_path)
            if not isinstance(answer, str):
                raise EndpointError(f"{self.answer_path!r} in the response is {type(answer).__name__}, not a string")
            ids = None
            if self.retrieved_ids_path:
                raw = json_path(payload, self.retrieved_ids_path)
                if not isinstance(raw, list):
                    raise EndpointError(f"{self.retrieved_ids_path!r} in the response is not a list")
                ids = [str(i) for i in raw]
            return TargetResponse(query=query, answer=answer, retrieved_ids=ids)
        raise EndpointFailure(f"could not reach {where} after {self.retries + 1} attempts: {last_error}", last_kind,
                              last_status)


def load_callable(reference: str) -> Callable[..., Any]:
    """``module:function`` imported (``module`` on the import path, e.g. the working directory)."""
    module_name, _, attribute = reference.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load target callable {reference!r}: {type(exc).__name__}: {exc}") from exc
    if not callable(fn):
        raise ConfigError(f"target {reference!r} is a {type(fn).__name__}, not a callable")
    return fn
