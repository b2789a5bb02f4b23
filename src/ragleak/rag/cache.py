"""A content-addressed, on-disk cache of generations, shared safely by several processes.

Key = SHA-256 of (model file hash, decoding parameters, exact rendered prompt). Greedy decoding is
deterministic, so a repeated key always maps to the same text and serving it from the cache is
exact, not an approximation. A batched generation (``DecodingParams.batch`` > 1) is keyed by its
whole batch as well: batched decoding is deterministic per batch, not per prompt. Storage is
SQLite in WAL mode: readers never block the writer, and concurrent writers wait on SQLite's lock
(busy timeout) instead of failing.

SQLite does not checksum its pages, so a flipped byte in a stored answer would be served as if
the model had said it. Each entry therefore carries a SHA-256 of its key and value; an entry that
fails it is deleted, regenerated and counted (``repairs``), never served. A file SQLite cannot
read at all raises ``CacheCorruptError`` naming the fix (``--rebuild-cache``, ``move_cache_aside``).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
from pydantic import ValidationError

from ragleak.errors import CacheCorruptError, RagleakError
from ragleak.rag.generator import DecodingParams, Generation, GenerationResult, Generator
from ragleak.rag.prompt import ChatMessage
from ragleak.records import canonical_json, digest

log = logging.getLogger(__name__)

# SQLite's user_version. 1 (implicit 0): no checksums. 2: every entry has a checksum.
CACHE_SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    params TEXT NOT NULL,
    prompt TEXT NOT NULL,
    generation TEXT NOT NULL,
    created REAL NOT NULL,
    checksum TEXT NOT NULL
)
"""

REBUILD_HINT = "rerun with --rebuild-cache to move it aside and start a fresh cache"


def cache_key(model_id: str, params: DecodingParams, prompt: str) -> str:
    return digest({"model": model_id, "params": params.model_dump(mode="json"), "prompt": prompt})


def batched_cache_key(model_id: str, params: DecodingParams, prompt: str, batch: Sequence[str]) -> str:
    """The key of ``prompt``'s generation decoded in the batch of prompts ``batch`` (in order):
    batched decoding is not exact, so the batch is part of what determines the text."""
    return digest({"model": model_id, "params": params.model_dump(mode="json"), "prompt": prompt,
                   "batch": digest(list(batch))})


def entry_checksum(key: str, model_id: str, params: str, prompt: str, generation: str) -> str:
    """SHA-256 over an entry's key and value, as stored (the columns' text)."""
    return digest([key, model_id, params, prompt, generation])


def move_cache_aside(path: Path) -> Path | None:
    """Move the cache file at ``path`` (and its WAL/SHM side files) aside so the next open starts
    a fresh cache; returns where the old file went (None when there was none)."""
    path = Path(path)
    if not path.exists():
        return None
    aside = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.replace(aside.with_name(aside.name + suffix))
    path.replace(aside)
    log.warning("moved the generation cache %s aside to %s; starting a fresh cache", path, aside)
    return aside


class CacheRead(NamedTuple):
    generation: Generation | None
    repaired: bool  # an entry was found corrupt and discarded


class GenerationCache:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self.repairs = 0
        self._initialise()

    def _unreadable(self, exc: sqlite3.DatabaseError) -> CacheCorruptError:
        return CacheCorruptError(f"generation cache {self.path} is unreadable ({exc}); {REBUILD_HINT}")

    def _initialise(self, attempts: int = 50) -> None:
        """Switch the file to WAL (persistent) and create or upgrade the table. Several processes
        may open a new cache at the same instant; switching the journal mode does not wait on
        SQLite's busy handler, so a "database is locked" here is retried with backoff."""
        for attempt in range(attempts):
            try:
                conn = self._connect()
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                self._migrate(conn)
                return
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) and attempt < attempts - 1:
                    time.sleep(min(0.05 * 2 ** attempt, 1.0))
                    continue
                raise self._unreadable(exc) from exc
            except sqlite3.DatabaseError as exc:
                raise self._unreadable(exc) from exc

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == CACHE_SCHEMA_VERSION:
            return
        if version > CACHE_SCHEMA_VERSION:
            raise CacheCorruptError(f"generation cache {self.path} has schema {version}, newer than this ragleak's "
                                    f"{CACHE_SCHEMA_VERSION}; upgrade ragleak or {REBUILD_HINT}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:  # another process may have won
                has_table = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type='table' AND name='generations'").fetchone()
                if has_table:
                    # entries written without a checksum cannot be vouched for: drop them (they
                    # regenerate, identically, on their next use)
                    n = conn.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
                    conn.execute("DROP TABLE generations")
                    log.warning("upgraded the generation cache %s to checksummed entries; dropped %d entries "
                                "written without checksums", self.path, n)
                conn.execute(_SCHEMA)
                conn.execute(f"PRAGMA user_version={CACHE_SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection (the last one to close folds the WAL into the file)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _execute(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        try:
            return self._connect().execute(sql, args)
        except sqlite3.OperationalError:
            raise  # locked past the busy timeout, disk full: not the file's fault
        except sqlite3.DatabaseError as exc:
            raise self._unreadable(exc) from exc

    def read(self, key: str) -> CacheRead:
        """The entry under ``key``; one whose checksum fails, or whose value does not parse, is
        deleted and reported as ``repaired`` (the caller regenerates it)."""
        row = self._execute("SELECT model_id, params, prompt, generation, checksum FROM generations WHERE key = ?",
                            (key,)).fetchone()
        if row is None:
            return CacheRead(None, False)
        model_id, params, prompt, text, checksum = row
        if checksum == entry_checksum(key, model_id, params, prompt, text):
            try:
                return CacheRead(Generation.model_validate_json(text), False)
            except ValidationError:
                pass  # checksummed but unparsable: written by a different Generation schema
        # delete only the bad row: a concurrent process may already have written the good one
        self._execute("DELETE FROM generations WHERE key = ? AND checksum = ?", (key, checksum))
        self.repairs += 1
        log.warning("generation cache %s: entry %s failed its checksum; discarded and regenerated", self.path, key[:12])
        return CacheRead(None, True)

    def get(self, key: str) -> Generation | None:
        return self.read(key).generation

    def put(self, key: str, model_id: str, params: DecodingParams, prompt: str, generation: Generation) -> None:
        params_text, text = canonical_json(params), generation.model_dump_json()
        # INSERT OR IGNORE: two processes racing on one key wrote the same greedy text anyway
        self._execute(
            "INSERT OR IGNORE INTO generations VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, model_id, params_text, prompt, text, time.time(),
             entry_checksum(key, model_id, params_text, prompt, text)),
        )

    def __len__(self) -> int:
        return self._execute("SELECT COUNT(*) FROM generations").fetchone()[0]

    def stats(self) -> dict[str, int]:
        return {"entries": len(self), "bytes": self.path.stat().st_size if self.path.exists() else 0,
                "repairs": self.repairs}


class CachedGenerator:
    """Wraps a generator; a repeated (model, params, prompt) is served without running the model.

    With ``cache`` None every call runs the model (and is counted as a miss). ``repairs`` counts
    corrupt cache entries this wrapper found, discarded and regenerated."""

    def __init__(self, inner: Generator, cache: GenerationCache | None) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = inner.model_id
        self.hits = 0
        self.misses = 0
        self.repairs = 0

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
        hit = self._lookup(prompt, p)
        if hit is not None:
            return hit
        self.misses += 1
        generation = self.inner.generate(messages, p)
        self.cache.put(cache_key(self.model_id, p, prompt), self.model_id, p, prompt, generation)
        return generation

    def generate_many(self, batch: Sequence[Sequence[ChatMessage]],
                      params: DecodingParams | None = None) -> list[GenerationResult]:
        """``generate`` for each of ``batch``; each entry is a ``Generation`` or the
        ``RagleakError`` that prompt alone raised (errors are never cached).

        Unbatched settings (``batch`` 1) generate one by one, exactly as ``generate``. Batched
        settings decode the prompts together, and batched greedy decoding is not bit-identical
        to one-at-a-time decoding (measured: ``benchmarks/bench_batched.py``): a prompt's text
        can depend on the other prompts in its batch. So each entry is keyed by its prompt *and
        the whole batch* (``batched_cache_key``), and a batch with any miss is decoded whole, in
        the same composition, never just its misses: what the cache serves is then a function
        of the key alone, not of what happened to be cached when the batch ran."""
        p = params or self.params
        if p.batch < 2:
            return [self._try(lambda m=messages: self.generate(m, p)) for messages in batch]
        prompts = [self.render(messages) for messages in batch]
        keys = [batched_cache_key(self.model_id, p, prompt, prompts) for prompt in prompts]
        if self.cache is not None:
            found = [self.cache.read(key) for key in keys]
            self.repairs += sum(f.repaired for f in found)
            if all(f.generation is not None for f in found):
                self.hits += len(batch)
                return [f.generation.model_copy(update={"cached": True}) for f in found]  # type: ignore[union-attr]
        self.misses += len(batch)  # the whole batch runs, its cached members included
        results = self._inner_many(list(batch), p)
        for key, prompt, out in zip(keys, prompts, results):
            if isinstance(out, Generation) and self.cache is not None:
                self.cache.put(key, self.model_id, p, prompt, out)
        return results

    @staticmethod
    def _try(call) -> GenerationResult:
        try:
            return call()
        except RagleakError as exc:
            return exc

    def _inner_many(self, batch: list[Sequence[ChatMessage]], params: DecodingParams) -> list[GenerationResult]:
        if not batch:
            return []
        many = getattr(self.inner, "generate_many", None)
        try:
            if many is not None:
                return list(many(batch, params))
        except RagleakError as exc:  # the batch as a whole failed: each of its prompts failed
            return [exc] * len(batch)
        return [self._try(lambda m=messages: self.inner.generate(m, params)) for messages in batch]

    def _lookup(self, prompt: str, params: DecodingParams) -> Generation | None:
        hit, repaired = self.cache.read(cache_key(self.model_id, params, prompt))
        self.repairs += repaired
        if hit is None:
            return None
        self.hits += 1
        return hit.model_copy(update={"cached": True})

    def cached(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation | None:
        """The cached generation of ``messages`` (a hit), or None; never runs the model."""
        if self.cache is None:
            return None
        return self._lookup(self.render(messages), params or self.params)

    def next_token_logprobs(self, prompt: str) -> np.ndarray:
        return self.inner.next_token_logprobs(prompt)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

