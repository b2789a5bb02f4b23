"""Serve a target as a JSON endpoint (``ragleak serve``): POST /ask {"query", "history"?, "client"?}.

``client`` is the caller's id; the built-in pipeline passes it to its defense as the principal
(ca-dp keeps one budget per client; requests without one share the stream's).

Used to audit the built-in pipeline over HTTP exactly as a user's own endpoint would be audited,
and by the HTTP adapter's tests against a real server.
"""

from __future__ import annotations

import asyncio

from ragleak.rag.target import PipelineTarget, Target
from ragleak.records import Turn


def make_app(target: Target):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    lock = asyncio.Lock()  # one model, one request at a time

    async def ask(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": "body must be JSON"}, status_code=400)
        query = body.get("query") if isinstance(body, dict) else None
        if not isinstance(query, str) or not query.strip():
            return JSONResponse({"error": "field 'query' (non-empty string) is required"}, status_code=400)
        try:
            history = [Turn.model_validate(t) for t in body.get("history") or []]
        except ValueError as exc:
            return JSONResponse({"error": f"bad history: {exc}"}, status_code=400)
        client = body.get("client")
        if client is not None and not isinstance(client, str):
            return JSONResponse({"error": "field 'client' must be a string"}, status_code=400)
        extra = {"principal": client} if client is not None and isinstance(target, PipelineTarget) else {}
        async with lock:
            response = await asyncio.to_thread(target.answer, query, history, **extra)
        return JSONResponse({"answer": response.answer, "retrieved_ids": response.retrieved_ids})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "target": target.name})

    return Starlette(routes=[Route("/ask", ask, methods=["POST"]), Route("/health", health)])
