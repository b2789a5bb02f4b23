"""A content-addressed, on-disk cache of generations, shared safely by several processes.

Key = SHA-256 of (model file hash, decoding parameters, exact rendered prompt). Greedy decoding is
deterministic, so a repeated key always maps to the same text and serving it from the cache is
exact, not an approximation. Storage is SQLite in WAL mode: readers never block the writer, and
concurrent writers wait on SQLite's lock (busy timeout) instead of failing.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ragleak.rag.generator import DecodingParams, Generation, Generator
from ragleak.rag.prompt import ChatMessage
from ragleak.records import canonical_json, digest

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    params TEXT NOT NULL,
    prompt TEXT NOT NULL,
    generation TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def cache_key(model_id: str, params: DecodingParams, prompt: str) -> str:
    return digest({"model": model_id, "params": params.model_dump(mode="json"), "prompt": prompt})


class GenerationCache:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._initialise()

    def _initialise(self, attempts: int = 50) -> None:
        """Switch the file to WAL (persistent) and create the table. Several processes may open a
        new cache at the same instant; switching the journal mode does not wait on SQLite's busy
        handler, so a "database is locked" here is retried with backoff."""
        for attempt in range(attempts):
            try:
                conn = self._connect()
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(_SCHEMA)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(min(0.05 * 2 ** attempt, 1.0))

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> Generation | None:
        row = self._connect().execute("SELECT generation FROM generations WHERE key = ?", (key,)).fetchone()
        return Generation.model_validate_json(row[0]) if row else None

    def put(self, key: str, model_id: str, params: DecodingParams, prompt: str, generation: Generation) -> None:
        # INSERT OR IGNORE: two processes racing on one key wrote the same greedy text anyway
        self._connect().execute(
            "INSERT OR IGNORE INTO generations VALUES (?, ?, ?, ?, ?, ?)",
            (key, model_id, canonical_json(params), prompt, generation.model_dump_json(), time.time()),
        )

    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM generations").fetchone()[0]

    def stats(self) -> dict[str, int]:
        return {"entries": len(self), "bytes": self.path.stat().st_size if self.path.exists() else 0}


class CachedGenerator:
    """Wraps a generator; a repeated (model, params, prompt) is served without running the model.

    With ``cache`` None every call runs the model (and is counted as a miss)."""

    def __init__(self, inner: Generator, cache: GenerationCache | None) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = inner.model_id
        self.hits = 0
        self.misses = 0

    @property
    def params(self) -> DecodingParams:
        return getattr(self.inner, "params", DecodingParams())

    def render(self, messages: Sequence[ChatMessage]) -> str:
        return self.inner.render(messages)

    def generate(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation:
        p = params or self.params
        if self.cache is None:
            self.misses += 1
            return self.inner.generate(messages, p)
        prompt = self.render(messages)
        key = cache_key(self.model_id, p, prompt)
        hit = self.cache.get(key)
        if hit is not None:
            self.hits += 1
            return hit.model_copy(update={"cached": True})
        self.misses += 1
        generation = self.inner.generate(messages, p)
        self.cache.put(key, self.model_id, p, prompt, generation)
        return generation

    def next_token_logprobs(self, prompt: str) -> np.ndarray:
        return self.inner.next_token_logprobs(prompt)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

