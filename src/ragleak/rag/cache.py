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

Several workers (grid processes, Ray actors) often reach the same prompt at the same moment (an
epsilon twin beside its baseline). Without a marker both would miss and both run the model. So a
miss first *claims* its key in the ``claims`` table of the same file (owner: host, pid and a
random token; a heartbeat the owner renews while it generates), then generates, stores the entry
and releases the claim. A process that finds another's live claim waits, polling for the entry,
and serves it when it appears (a hit, also counted as ``waited``). A claim is never trusted
blindly: one whose owner process is gone (same host: the pid is dead, a zombie, or reused by a
later process) or whose heartbeat is older than its lease is taken over, and a generation that
raises releases its claim, so a stale claim costs at most one repeated generation, never a
deadlock or a lost entry.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, NamedTuple, Sequence, TypeVar

import numpy as np
from pydantic import ValidationError

from ragleak.errors import CacheCorruptError, RagleakError
from ragleak.rag.generator import DecodingParams, Generation, GenerationResult, Generator
from ragleak.rag.prompt import ChatMessage
from ragleak.records import canonical_json, digest

log = logging.getLogger(__name__)

# SQLite's user_version. 1 (implicit 0): no checksums. 2: every entry has a checksum. 3: a
# ``claims`` table marks generations in progress (the generations table is unchanged).
CACHE_SCHEMA_VERSION = 3

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

_CLAIMS = """
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    heartbeat REAL NOT NULL,
    lease REAL NOT NULL
)
"""

#: Seconds a claim stays live without a heartbeat (``RAGLEAK_CACHE_LEASE_S`` overrides it). The
#: owner renews its heartbeat every ``min(lease / 4, 30)`` s while it generates, so the lease
#: bounds how long a waiter trusts an owner that went silent (a hung host, a lost network
#: mount), not how long a generation may take. Generous: taking over a live owner's claim
#: costs a repeated generation, waiting on a dead one only time.
DEFAULT_LEASE_S = 300.0

REBUILD_HINT = "rerun with --rebuild-cache to move it aside and start a fresh cache"


def key_params(params: DecodingParams) -> dict:
    """The decoding settings a generation depends on. Greedy decoding (temperature 0: llama.cpp's
    greedy sampler, which draws nothing) gives one text whatever the seed, so its seed is keyed
    as 0: an agent that seeds each of its calls apart (IKEA, RAG-Thief, DEAL) then finds a prompt
    it already sent - in this cell or another - in the cache instead of decoding it again."""
    data = params.model_dump(mode="json")
    if params.temperature == 0:
        data["seed"] = 0
    return data


def cache_key(model_id: str, params: DecodingParams, prompt: str) -> str:
    return digest({"model": model_id, "params": key_params(params), "prompt": prompt})


def batched_cache_key(model_id: str, params: DecodingParams, prompt: str, batch: Sequence[str]) -> str:
    """The key of ``prompt``'s generation decoded in the batch of prompts ``batch`` (in order):
    batched decoding is not exact, so the batch is part of what determines the text."""
    return digest({"model": model_id, "params": key_params(params), "prompt": prompt,
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


def default_lease_s() -> float:
    raw = os.environ.get("RAGLEAK_CACHE_LEASE_S")
    if not raw:
        return DEFAULT_LEASE_S
    try:
        lease = float(raw)
    except ValueError:
        raise RagleakError(f"RAGLEAK_CACHE_LEASE_S={raw!r} is not a number of seconds") from None
    if not lease > 0:
        raise RagleakError(f"RAGLEAK_CACHE_LEASE_S={raw!r} must be positive")
    return lease


_HOST = socket.gethostname()


def _process_start(pid: int) -> str | None:
    """The kernel's start time of process ``pid`` (Linux ``/proc``; None elsewhere or when gone):
    with the pid it names one process, so a pid reused by a later process is not mistaken for the
    claim's owner."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


def _process_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


_OWN_START: tuple[int, str] = (-1, "")


def _own_start() -> str:
    """This process's start time, looked up again after a fork (a child inheriting its parent's
    would make its own live claims look like a reused pid's)."""
    global _OWN_START
    pid = os.getpid()
    if _OWN_START[0] != pid:
        _OWN_START = (pid, _process_start(pid) or "")
    return _OWN_START[1]


def process_alive(pid: int, started: str) -> bool:
    """Whether the process ``pid`` on this host that started at ``started`` (``_process_start``,
    "" when unknown) still runs. A zombie (killed, not yet reaped by its parent) is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    if _process_state(pid) in ("Z", "X"):
        return False
    now_started = _process_start(pid)
    return not (started and now_started is not None and now_started != started)


class CacheRead(NamedTuple):
    generation: Generation | None
    repaired: bool  # an entry was found corrupt and discarded


class Claim(NamedTuple):
    """This process's claim on a key being generated (``took_over``: it replaced a stale claim)."""
    key: str
    owner: str
    lease: float
    took_over: bool


class GenerationCache:
    """The cache file at ``path``; ``lease_s``: how long this process's claims stay live without a
    heartbeat (default ``default_lease_s()``)."""

    def __init__(self, path: Path, lease_s: float | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self.repairs = 0
        self.takeovers = 0  # stale claims of other owners this instance took over
        self.lease_s = default_lease_s() if lease_s is None else float(lease_s)
        if not self.lease_s > 0:
            raise RagleakError(f"a claim lease must be positive, not {lease_s!r}")
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
            version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have won
            if version < 2:
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
            if version < 3:  # 2 -> 3 adds the claims table; every entry is kept
                conn.execute(_CLAIMS)
            if version < CACHE_SCHEMA_VERSION:
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
                "repairs": self.repairs, "claims": self._execute("SELECT COUNT(*) FROM claims").fetchone()[0],
                "takeovers": self.takeovers}

    # -- claims: generations in progress ----------------------------------------------------------
    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front (``BEGIN IMMEDIATE``) so a read-then-write cannot
        interleave with another process's."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as exc:
            raise self._unreadable(exc) from exc

    def claim(self, key: str) -> Claim | None:
        """Claim ``key`` for this process to generate; None while another owner's claim is live.
        A stale claim (its process gone, or no heartbeat for its lease) is taken over."""
        now = time.time()
        owner = f"{_HOST}:{os.getpid()}:{secrets.token_hex(6)}"
        with self._write() as conn:
            row = conn.execute("SELECT owner, host, pid, started, heartbeat, lease FROM claims WHERE key = ?",
                               (key,)).fetchone()
            stale = None if row is None else self._stale(row, now)
            if row is not None and stale is None:
                return None
            conn.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (key, owner, _HOST, os.getpid(), _own_start(), now, now, self.lease_s))
        if row is not None:
            self.takeovers += 1
            log.warning("generation cache %s: took over the claim on %s held by %s (%s); generating it here",
                        self.path, key[:12], row[0], stale)
        return Claim(key, owner, self.lease_s, row is not None)

    @staticmethod
    def _stale(row: tuple, now: float) -> str | None:
        """Why the claim ``row`` no longer holds (None: it does)."""
        _, host, pid, started, heartbeat, lease = row
        if host == _HOST and not process_alive(pid, started):
            return f"process {pid} is gone"
        if now - heartbeat > lease:
            return f"no heartbeat for {now - heartbeat:.0f}s, lease {lease:g}s"
        return None

    def renew(self, claim: Claim) -> bool:
        """Refresh ``claim``'s heartbeat; False when it is no longer ours (taken over)."""
        cur = self._execute("UPDATE claims SET heartbeat = ? WHERE key = ? AND owner = ?",
                            (time.time(), claim.key, claim.owner))
        return cur.rowcount > 0

    def release(self, claim: Claim) -> None:
        """Drop ``claim`` (only if still ours: a takeover's new claim stays)."""
        self._execute("DELETE FROM claims WHERE key = ? AND owner = ?", (claim.key, claim.owner))

    @contextmanager
    def holding(self, claim: Claim) -> Iterator[None]:
        """Keep ``claim`` live while the block runs (a heartbeat thread renews it every
        ``min(lease / 4, 30)`` s; llama.cpp decodes outside the GIL, so it runs during a long
        generation), and release it afterwards, whether the block returned or raised."""
        stop = threading.Event()
        interval = min(claim.lease / 4, 30.0)

        def beat() -> None:
            try:
                while not stop.wait(interval):
                    try:
                        renewed = self.renew(claim)
                    except Exception as exc:  # noqa: BLE001 - a missed beat only risks a takeover;
                        # the next one may succeed (a lock held past the busy timeout, say)
                        log.warning("generation cache %s: heartbeat failed (%s)", self.path, exc)
                        continue
                    if not renewed:
                        log.warning("generation cache %s: the claim on %s was taken over while generating it",
                                    self.path, claim.key[:12])
                        return
            finally:
                self.close()  # this thread's connection

        thread = threading.Thread(target=beat, name="ragleak-cache-heartbeat", daemon=True)
        try:
            thread.start()
            yield
        finally:
            stop.set()
            if thread.is_alive():
                thread.join()
            self.release(claim)


T = TypeVar("T")

#: bump when the way ``continuation_logprobs`` computes a likelihood changes (batch split, context
#: settings), so cached likelihoods of the old computation are not served
LIKELIHOOD_VERSION = 1

#: Poll interval (seconds) of a process waiting on another's claim: doubling from the first to
#: the second; short against a generation (seconds). Each poll tries the claim (a short write
#: transaction) and reads the entry, so it stays well below an owner's heartbeat and put rates.
POLL_S = (0.02, 0.25)


class CachedGenerator:
    """Wraps a generator; a repeated (model, params, prompt) is served without running the model.

    With ``cache`` None every call runs the model (and is counted as a miss). ``repairs`` counts
    corrupt cache entries this wrapper found, discarded and regenerated. A miss claims its key
    (``GenerationCache.claim``) before running the model; one another worker is generating right
    now is waited for and served as a hit, counted in ``hits`` and again in ``waited``.
    ``takeovers`` counts stale claims (dead or silent owners) this wrapper took over.
    ``repeats`` counts the hits on a key this wrapper had already generated or served: a prompt
    its caller sent before (an agent re-deriving a question it asked), free in any plan, unlike a
    hit on another cell's entry, which only a grid that ran that cell first gets."""

    def __init__(self, inner: Generator, cache: GenerationCache | None) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = inner.model_id
        self.hits = 0
        self.misses = 0
        self.repairs = 0
        self.waited = 0
        self.takeovers = 0
        self.repeats = 0
        self._keys: set[str] = set()
        self.model_seconds = 0.0  # wall time inside the model on misses (what a dry run's ETA prices)

    @property
    def params(self) -> DecodingParams:
        return getattr(self.inner, "params", DecodingParams())

    @property
    def shares_claims(self) -> bool:
        """Whether other workers may be generating this wrapper's prompts (a shared cache, whose
        claims ``generate_unclaimed`` can see)."""
        return self.cache is not None

    def render(self, messages: Sequence[ChatMessage]) -> str:
        return self.inner.render(messages)

    def generate(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation:
        generation = self._generate(messages, params or self.params, wait=True)
        assert generation is not None  # a waiting call always ends with a generation
        return generation

    def generate_unclaimed(self, messages: Sequence[ChatMessage],
                           params: DecodingParams | None = None) -> Generation | None:
        """``generate``, except for a prompt another worker is generating right now: None at
        once instead of waiting for it, so the caller can do its other work first and come back
        (``generate``) when that worker has likely stored it."""
        return self._generate(messages, params or self.params, wait=False)

    def _generate(self, messages: Sequence[ChatMessage], p: DecodingParams, wait: bool) -> Generation | None:
        if self.cache is None:
            self.misses += 1
            return self._timed(lambda: self.inner.generate(messages, p))
        prompt = self.render(messages)
        key = cache_key(self.model_id, p, prompt)
        hit = self._lookup_key(key)
        if hit is not None:
            return hit
        claim, found, waited = self._claim(key, lambda: self._read(key), wait)
        if found is not None:
            return self._serve([found], waited, [key])[0]
        if claim is None:  # another worker's, and we were not to wait
            return None
        self._keys.add(key)
        with self.cache.holding(claim):
            self.misses += 1
            generation = self._timed(lambda: self.inner.generate(messages, p))
            self.cache.put(key, self.model_id, p, prompt, generation)  # before the release: a waiter finds it
        return generation

    def generate_many(self, batch: Sequence[Sequence[ChatMessage]],
                      params: DecodingParams | None = None) -> list[GenerationResult]:
        """``generate`` for each of ``batch``; each entry is a ``Generation`` or the
        ``RagleakError`` that prompt alone raised (errors are never cached).

        Unbatched settings (``batch`` 1) generate one by one, exactly as ``generate`` (a claim
        per prompt). Batched settings decode the prompts together, and batched greedy decoding is not bit-identical
        to one-at-a-time decoding (measured: ``benchmarks/bench_batched.py``): a prompt's text
        can depend on the other prompts in its batch. So each entry is keyed by its prompt *and
        the whole batch* (``batched_cache_key``), and a batch with any miss is decoded whole, in
        the same composition, never just its misses: what the cache serves is then a function
        of the key alone, not of what happened to be cached when the batch ran. For the same
        reason the batch is claimed as one (a claim key derived from all its entries' keys, which
        only the same batch shares): a worker decoding the same batch is waited for until every
        entry is stored; if some are not (a prompt failed), the waiter decodes the whole batch."""
        p = params or self.params
        if p.batch < 2:
            return [self._try(lambda m=messages: self.generate(m, p)) for messages in batch]
        prompts = [self.render(messages) for messages in batch]
        keys = [batched_cache_key(self.model_id, p, prompt, prompts) for prompt in prompts]
        if self.cache is None:
            self.misses += len(batch)
            return self._inner_many(list(batch), p)
        found = self._read_all(keys)
        if found is not None:
            return self._serve(found, False, keys)
        claim, found, waited = self._claim(digest({"batch_claim": keys}), lambda: self._read_all(keys))
        if found is not None:
            return self._serve(found, waited, keys)
        self._keys.update(keys)
        with self.cache.holding(claim):
            self.misses += len(batch)  # the whole batch runs, its cached members included
            results = self._inner_many(list(batch), p)
            for key, prompt, out in zip(keys, prompts, results):
                if isinstance(out, Generation):
                    self.cache.put(key, self.model_id, p, prompt, out)
        return results

    def _claim(self, claim_key: str, ready: Callable[[], T | None],
               wait: bool = True) -> tuple[Claim | None, T | None, bool]:
        """Claim ``claim_key``, or wait until ``ready()`` (the entries it stands for) is served.
        Returns (claim, None, waited) when this process is to generate, (None, entries, waited)
        when another did. ``ready`` is asked again right after a claim is won: the owner stores its
        entry before it releases, so an entry finished between our miss and our claim is served,
        not generated twice. With ``wait`` False, another owner's live claim returns (None, None,
        False) at once."""
        assert self.cache is not None
        delay, waited = POLL_S[0], False
        while True:
            claim = self.cache.claim(claim_key)
            if claim is not None:
                self.takeovers += claim.took_over
                try:
                    found = ready()
                except BaseException:
                    self.cache.release(claim)  # others must not wait out the lease on a claim nobody holds
                    raise
                if found is None:
                    return claim, None, waited
                self.cache.release(claim)
                return None, found, waited
            if not wait:
                return None, None, False
            waited = True
            time.sleep(delay)
            delay = min(delay * 2, POLL_S[1])
            found = ready()
            if found is not None:
                return None, found, True

    def _serve(self, found: list[Generation], waited: bool, keys: Sequence[str]) -> list[Generation]:
        self._count_hits(keys, waited)
        return [g.model_copy(update={"cached": True}) for g in found]

    def _count_hits(self, keys: Sequence[str], waited: bool) -> None:
        """Count the cache serving ``keys``: hits, waits and repeats of keys this wrapper had seen."""
        self.repeats += sum(1 for key in keys if key in self._keys)
        self._keys.update(keys)
        self.hits += len(keys)
        self.waited += len(keys) if waited else 0

    def _read(self, key: str) -> Generation | None:
        hit, repaired = self.cache.read(key)  # type: ignore[union-attr]
        self.repairs += repaired
        return hit

    def _read_all(self, keys: Sequence[str]) -> list[Generation] | None:
        """Every entry of ``keys``, or None if any is missing. Every key is read even after a
        miss: a corrupt entry must be found and deleted now, or the batch's ``put`` (INSERT OR
        IGNORE) would leave it in place."""
        found = [self._read(key) for key in keys]
        return None if any(g is None for g in found) else found  # type: ignore[return-value]

    @staticmethod
    def _try(call) -> GenerationResult:
        """A prompt's own failure as its entry; an unreadable cache fails the whole call, as it
        does in ``generate`` (it is not one query's failure)."""
        try:
            return call()
        except CacheCorruptError:
            raise
        except RagleakError as exc:
            return exc

    def _timed(self, call: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        try:
            return call()
        finally:
            self.model_seconds += time.perf_counter() - t0

    def _inner_many(self, batch: list[Sequence[ChatMessage]], params: DecodingParams) -> list[GenerationResult]:
        return self._timed(lambda: self._inner_many_untimed(batch, params))

    def _inner_many_untimed(self, batch: list[Sequence[ChatMessage]], params: DecodingParams) -> list[GenerationResult]:
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
        return self._lookup_key(cache_key(self.model_id, params, prompt))

    def _lookup_key(self, key: str) -> Generation | None:
        hit = self._read(key)
        return None if hit is None else self._serve([hit], False, [key])[0]

    def cached(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation | None:
        """The cached generation of ``messages`` (a hit), or None; never runs the model."""
        if self.cache is None:
            return None
        return self._lookup(self.render(messages), params or self.params)

    def next_token_logprobs(self, prompt: str) -> np.ndarray:
        return self.inner.next_token_logprobs(prompt)

    def _continuation_logprobs(self, prompt: str, text: str) -> list[tuple[str, float]]:
        """The inner model's ``continuation_logprobs``, through the cache: a likelihood is as
        deterministic as a greedy generation, so a resumed or repeated cell does not score the
        same text again. Stored as a ``Generation`` whose text is the JSON list of (piece, log p)
        under a key of its own kind; counted as a model call or a hit like a generation."""
        if self.cache is None:
            self.misses += 1
            return self._timed(lambda: self.inner.continuation_logprobs(prompt, text))
        key = digest({"model": self.model_id, "continuation_logprobs": prompt, "text": text,
                      "v": LIKELIHOOD_VERSION})
        hit = self._read(key)
        if hit is not None:
            self._count_hits([key], False)
            return [(piece, float(lp)) for piece, lp in json.loads(hit.text)]
        self._keys.add(key)
        self.misses += 1
        t0 = time.perf_counter()
        scored = self._timed(lambda: self.inner.continuation_logprobs(prompt, text))
        record = Generation(text=json.dumps([[piece, lp] for piece, lp in scored]), prompt_tokens=0,
                            completion_tokens=len(scored), finish_reason="likelihood",
                            seconds=time.perf_counter() - t0)
        self.cache.put(key, self.model_id, DecodingParams(max_tokens=1), prompt + "\x00" + text, record)
        return scored

    def __getattr__(self, name: str):
        if name == "continuation_logprobs" and callable(getattr(self.inner, name, None)):
            return self._continuation_logprobs  # only where the inner model can score a text
        return getattr(self.inner, name)
