"""Budgets that survive a restart: a budgeted defense's charges in SQLite.

``ca-dp`` charges a query to its principal's (or the stream's) budget and ``private-rag`` charges
eps_q to every relevant document; their cards say nothing resets those charges, which holds only
if a restart does not either. A ``Ledger`` keeps one defense's charges - a count per key (a
principal, a document id) - in a SQLite file beside the served index (``ragleak serve``), or in
an in-memory SQLite database for an audit (grid cells, ``verify``): the same class, the same
code path, only the file differs.

Each charge is one ``BEGIN IMMEDIATE`` transaction that reads the counts it checks from the
database, raises them, and commits before it returns; the defense charges before the answer
exists, so a process killed at any instant (``kill -9``) has either paid for the query or not
answered it. WAL with ``synchronous=FULL``: a committed charge survives the process and the
machine. Reading inside the write transaction keeps a cap exact even when two processes share
the file (the in-process mirror serves only reads, e.g. private-rag's active set).

A ledger is bound to its defense's terms (the parameters its counts are measured in: a count of
eps_turn=1 queries is not one of eps_turn=0.5 queries): opening a file that holds another
namespace's charges under other terms is refused, so a changed configuration never resets or
reinterprets a budget silently; deleting the file (with the server stopped) is the reset.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable

from ragleak.errors import ConfigError

MEMORY = "memory"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledgers (namespace TEXT PRIMARY KEY, terms TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS charges (namespace TEXT NOT NULL, key TEXT NOT NULL, count INTEGER NOT NULL,
                                    PRIMARY KEY (namespace, key));
"""


def budgets_beside(index_dir: Path) -> Path:
    """Where ``ragleak serve`` keeps the budgets of the index in ``index_dir``: a sibling file, so
    rebuilding the index (which replaces its folder) does not reset them."""
    index_dir = Path(index_dir)
    return index_dir.with_name(f"{index_dir.name}.budgets.sqlite")


class Ledger:
    """Charge counts per key of one ``namespace`` (a defense) in ``path`` (None: in memory)."""

    def __init__(self, path: Path | None, namespace: str, terms: dict[str, Any]) -> None:
        self.path = None if path is None else Path(path)
        self.namespace = namespace
        self.terms = json.dumps(terms, sort_keys=True)
        self._lock = threading.Lock()
        self._db = self._open()
        self._counts = self._bind()

    @property
    def location(self) -> str:
        """What a card states as where the charges live."""
        return MEMORY if self.path is None else str(self.path)

    def _open(self) -> sqlite3.Connection:
        try:
            if self.path is None:
                db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # the server answers from a worker thread; the lock below serialises every use
                db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open the budget store {self.location}: {exc}") from None
        return db

    def _bind(self) -> dict[str, int]:
        """Register this namespace's terms (or check them against the file's) and read its counts."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT terms FROM ledgers WHERE namespace = ?", (self.namespace,)).fetchone()
                if row is None:
                    self._db.execute("INSERT INTO ledgers VALUES (?, ?)", (self.namespace, self.terms))
                elif row[0] != self.terms:
                    raise ConfigError(
                        f"the budget store {self.location} holds {self.namespace} charges made under other terms "
                        f"({row[0]}; now {self.terms}): keep the old configuration, or move the file aside to "
                        "start new budgets deliberately")
                counts = dict(self._db.execute("SELECT key, count FROM charges WHERE namespace = ?",
                                               (self.namespace,)).fetchall())
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return counts

    def count(self, key: str) -> int:
        """Charges on ``key`` as this process last saw them (exact in a single-server deployment)."""
        return self._counts.get(key, 0)

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def charge(self, keys: Iterable[str], cap: int) -> list[str]:
        """Add one charge to each distinct key of ``keys`` whose count is below ``cap``, durably, in
        one transaction; return the keys charged, in order (the others are spent)."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                now = {}
                for start in range(0, len(wanted), 500):  # SQLite's bound-parameter limit
                    part = wanted[start:start + 500]
                    now.update(self._db.execute(
                        f"SELECT key, count FROM charges WHERE namespace = ? AND key IN ({','.join('?' * len(part))})",
                        (self.namespace, *part)).fetchall())
                charged = [k for k in wanted if now.get(k, 0) < cap]
                self._db.executemany(
                    "INSERT INTO charges VALUES (?, ?, 1) ON CONFLICT (namespace, key) DO UPDATE SET count = count + 1",
                    [(self.namespace, k) for k in charged])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        paid = set(charged)
        for k in wanted:
            self._counts[k] = now.get(k, 0) + (k in paid)
        return charged

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # a defense is deep-copied (verify copies a prototype per trial): an in-memory ledger copies its
    # counts into a new database, a file ledger reopens the same file
    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "namespace": self.namespace, "terms": self.terms,
                "counts": self.counts() if self.path is None else None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.namespace, self.terms = state["path"], state["namespace"], state["terms"]
        self._lock = threading.Lock()
        self._db = self._open()
        self._counts = self._bind()
        if state["counts"]:
            with self._lock:
                self._db.executemany("INSERT INTO charges VALUES (?, ?, ?)",
                                     [(self.namespace, k, c) for k, c in state["counts"].items()])
            self._counts = dict(state["counts"])
