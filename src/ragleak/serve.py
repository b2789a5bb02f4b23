"""Serve a target as a JSON endpoint (``ragleak serve``): POST /ask {"query", "history"?}.

Used to audit the built-in pipeline over HTTP exactly as a user's own endpoint would be audited,
and by the HTTP adapter's tests against a real server.
"""

from __future__ import annotations

import asyncio

from ragleak.rag.target import Target
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
        async with lock:
            response = await asyncio.to_thread(target.answer, query, history)
        return JSONResponse({"answer": response.answer, "retrieved_ids": response.retrieved_ids})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "target": target.name})

    return Starlette(routes=[Route("/ask", ask, methods=["POST"]), Route("/health", health)])
