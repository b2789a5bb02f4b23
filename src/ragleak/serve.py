"""Serve a target as an HTTP endpoint (``ragleak serve``), in two request shapes:

* POST /ask {"query", "history"?, "client"?} -> {"answer", "retrieved_ids"};
* POST /v1/chat/completions, OpenAI chat-completions: the last user message is the query and the
  user/assistant pairs before it are the history (system messages are ignored: the pipeline has
  its own system prompt); the answer is ``choices[0].message.content`` and the retrieved
  passage ids ride along as ``retrieved_ids``; OpenAI's ``user`` field is the client id.

``client`` is the caller's id; the built-in pipeline passes it to its defense as the principal
(ca-dp keeps one budget per client; requests without one share the stream's).

``ragleak serve`` is deploy mode (docs/accounting.md): the defense's DP noise comes from fresh OS
entropy and budgeted defenses keep their charges in a SQLite file beside the index, so neither a
replayed seed nor a restart undoes a guarantee; ``--noise-seed`` fixes the noise for an audit.

Used to audit the built-in pipeline over HTTP exactly as a user's own endpoint would be audited
(the same grid ``target:`` section works against both), and by the HTTP adapter's tests.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from ragleak.pipeline.target import PipelineTarget, Target
from ragleak.records import TargetResponse, Turn


class BadRequest(ValueError):
    """A request body the endpoint cannot answer (HTTP 400)."""


def turns_from_messages(messages: Any) -> tuple[str, list[Turn]]:
    """(query, history) from OpenAI chat ``messages``: the last message must be the user's; each
    earlier user message with the assistant message after it is one turn."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("field 'messages' (a non-empty list) is required")
    chat = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in (
                "system", "user", "assistant"):
            raise BadRequest("each message needs a role (system, user or assistant) and a string content")
        if m["role"] != "system":
            chat.append((m["role"], m["content"]))
    if not chat or chat[-1][0] != "user" or not chat[-1][1].strip():
        raise BadRequest("the last message must be a non-empty user message")
    history, pending = [], None
    for role, content in chat[:-1]:
        if role == "user":
            if pending is not None:
                raise BadRequest("two user messages in a row: each needs the assistant's answer after it")
            pending = content
        else:
            if pending is None:
                raise BadRequest("an assistant message without the user message before it")
            history.append(Turn(query=pending, answer=content))
            pending = None
    if pending is not None:
        raise BadRequest("two user messages in a row: each needs the assistant's answer after it")
    return chat[-1][1], history


def chat_completion(response: TargetResponse, model: str) -> dict[str, Any]:
    """An OpenAI chat-completions response body carrying ``response``'s answer and retrieved ids."""
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": response.answer},
                         "finish_reason": "stop"}],
            "retrieved_ids": response.retrieved_ids}


def make_app(target: Target):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    lock = asyncio.Lock()  # one model, one request at a time

    def client_of(body: dict, field: str) -> str | None:
        client = body.get(field)
        if client is not None and not isinstance(client, str):
            raise BadRequest(f"field '{field}' (the client id) must be a string")
        return client

    async def run(query: str, history: list[Turn], client: str | None) -> TargetResponse:
        extra = {"principal": client} if client is not None and isinstance(target, PipelineTarget) else {}
        async with lock:
            return await asyncio.to_thread(target.answer, query, history, **extra)

    async def body_of(request: Request) -> dict:
        try:
            body = await request.json()
        except ValueError:
            raise BadRequest("body must be JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("body must be a JSON object")
        return body

    async def ask(request: Request) -> JSONResponse:
        try:
            body = await body_of(request)
            query = body.get("query")
            if not isinstance(query, str) or not query.strip():
                raise BadRequest("field 'query' (non-empty string) is required")
            try:
                history = [Turn.model_validate(t) for t in body.get("history") or []]
            except ValueError as exc:
                raise BadRequest(f"bad history: {exc}") from None
            client = client_of(body, "client")
        except BadRequest as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        response = await run(query, history, client)
        return JSONResponse({"answer": response.answer, "retrieved_ids": response.retrieved_ids})

    async def chat(request: Request) -> JSONResponse:
        try:
            body = await body_of(request)
            query, history = turns_from_messages(body.get("messages"))
            client = client_of(body, "user")
        except BadRequest as exc:
            return JSONResponse({"error": {"message": str(exc), "type": "invalid_request_error"}}, status_code=400)
        response = await run(query, history, client)
        return JSONResponse(chat_completion(response, str(body.get("model") or target.name)))

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "target": target.name})

    return Starlette(routes=[Route("/ask", ask, methods=["POST"]),
                             Route("/v1/chat/completions", chat, methods=["POST"]), Route("/health", health)])
