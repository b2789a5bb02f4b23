"""A small RAG web service of the kind ragleak audits: BM25 retrieval over a folder of documents,
a local LLM through llama-cpp's chat API, and the OpenAI chat-completions request/response shape
with the source document ids in the response (``sources``).

It knows nothing of ragleak's pipeline: ragleak reaches it only over HTTP, as it would reach
yours. (ragleak is used for one thing: finding the GGUF file of a packaged model; point
``--gguf`` at any chat model file instead.) Written with Starlette, the ASGI toolkit FastAPI is
built on, because FastAPI itself is not among ragleak's dependencies; a FastAPI app would have
the same route.

    python examples/rag_service/service.py --corpus DIR [--port 8000] [--mask-pii]

``--mask-pii`` replaces e-mail addresses and phone numbers in answers (a regex output filter, the
kind of defense a service might run); ``RAG_SERVICE_TOKEN`` in the environment makes the service
require ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SYSTEM_PROMPT = ("You are the company's internal assistant. Answer the question using the documents below; "
                 "quote them where useful.\n\n{context}")
_TOKEN = re.compile(r"[a-z0-9]+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?:\+?\d[\d ().-]{6,}\d)")


@dataclass(frozen=True)
class Doc:
    id: str
    text: str


def read_corpus(folder: Path) -> list[Doc]:
    """Every ``.txt``/``.md`` file (id: its relative path) and every line of every ``.jsonl`` file
    (``{"id", "text"}``) under ``folder``."""
    docs = []
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix in (".txt", ".md"):
            docs.append(Doc(path.relative_to(folder).as_posix(), path.read_text(encoding="utf-8")))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    docs.append(Doc(str(row["id"]), row["text"]))
    if not docs:
        raise SystemExit(f"{folder}: no .txt, .md or .jsonl documents")
    return docs


class BM25:
    """Okapi BM25 (Robertson and Zaragoza, 2009) over whole documents."""

    def __init__(self, docs: list[Doc], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs, self.k1, self.b = docs, k1, b
        self.tfs = [Counter(_TOKEN.findall(d.text.lower())) for d in docs]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.avg = sum(self.lengths) / len(docs)
        df = Counter(term for tf in self.tfs for term in tf)
        self.idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in df.items()}

    def search(self, query: str, k: int = 3) -> list[Doc]:
        terms = _TOKEN.findall(query.lower())
        scores = []
        for i, tf in enumerate(self.tfs):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            s = sum(self.idf.get(t, 0.0) * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in terms if t in tf)
            scores.append((s, i))
        return [self.docs[i] for s, i in sorted(scores, key=lambda p: (-p[0], p[1]))[:k] if s > 0]


def mask_pii(text: str) -> str:
    return _PHONE.sub("<PHONE>", _EMAIL.sub("<EMAIL>", text))


def load_llm(gguf: str | None = None, model: str = "smollm2-135m", n_ctx: int = 2048, threads: int | None = None):
    from llama_cpp import Llama

    if gguf is None:
        from ragleak.rag.models import model_path

        gguf = str(model_path(model))
    threads = threads or int(os.environ.get("RAGLEAK_THREADS", "0")) or os.cpu_count() or 1
    return Llama(model_path=gguf, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, seed=0, verbose=False)


def build_app(docs: list[Doc], llm, top_k: int = 3, max_tokens: int = 96, mask: bool = False,
              token: str | None = None):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    index = BM25(docs)
    lock = asyncio.Lock()  # one model, one request at a time

    def answer(messages: list[dict[str, str]]) -> tuple[str, list[str]]:
        question = messages[-1]["content"]
        hits = index.search(question, top_k)
        context = "\n\n".join(f"[{d.id}]\n{d.text}" for d in hits)
        chat = [{"role": "system", "content": SYSTEM_PROMPT.format(context=context)},
                *[m for m in messages if m["role"] in ("user", "assistant")]]
        out = llm.create_chat_completion(messages=chat, max_tokens=max_tokens, temperature=0.0, seed=0)
        text = out["choices"][0]["message"]["content"] or ""
        return (mask_pii(text) if mask else text), [d.id for d in hits]

    async def chat_completions(request: Request) -> JSONResponse:
        if token is not None and request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"error": {"message": "invalid or missing bearer token"}}, status_code=401)
        body: Any = await request.json()
        messages = body.get("messages") if isinstance(body, dict) else None
        if not messages or not isinstance(messages, list) or messages[-1].get("role") != "user":
            return JSONResponse({"error": {"message": "messages must end with a user message"}}, status_code=400)
        async with lock:
            text, sources = await asyncio.to_thread(answer, messages)
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or "rag-service",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "sources": sources,
        })

    return Starlette(routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="folder of .txt/.md/.jsonl documents")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--gguf", help="a chat model's GGUF file (default: ragleak's packaged smollm2-135m)")
    parser.add_argument("--mask-pii", action="store_true", help="mask e-mail addresses and phone numbers in answers")
    args = parser.parse_args()

    import uvicorn

    app = build_app(read_corpus(args.corpus), load_llm(args.gguf), mask=args.mask_pii,
                    token=os.environ.get("RAG_SERVICE_TOKEN"))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
