"""Serving an ASGI app on 127.0.0.1 (a free port) in a thread, for tests of HTTP targets."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(app, timeout_s: float = 30) -> Iterator[str]:
    """``app`` served by uvicorn until the block ends; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def bearer_only(app, token: str):
    """``app`` answering 401 to any request without ``Authorization: Bearer <token>``."""
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import JSONResponse

    async def check(request, call_next):
        if request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)

    app.user_middleware.append(Middleware(BaseHTTPMiddleware, dispatch=check))
    return app
