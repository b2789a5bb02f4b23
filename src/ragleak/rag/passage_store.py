"""Passages of an index in one SQLite table, looked up by FAISS id when a search returns them.

A saved index keeps its passages in ``passages.sqlite`` beside ``index.faiss``; loading opens the
file read-only and immutable (a checksummed file: no lock, no journal, nothing written into the
index folder) and a search reads only the rows of the ids it returned. A corpus of 100k passages
therefore costs no Python objects until they are asked for. A store being built, or a loaded one
that is changed (``add``/``remove``), lives in an in-memory SQLite database (a loaded file is
copied in on the first change, so the saved file stays what its checksum says); ``save_to``
writes it out with SQLite's online backup. Every lookup goes through the same SQL either way.

The connection is shared by the threads of one process (a served pipeline), serialised by a
lock; processes never share one (grid workers are spawned and open their own).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Iterable, Iterator, Sequence
from urllib.request import pathname2url

from ragleak.errors import IndexStoreError
from ragleak.records import Passage

_SCHEMA = """
CREATE TABLE passages (
    faiss_id INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE INDEX passages_doc ON passages (doc_id);
"""
_COLUMNS = "faiss_id, id, doc_id, text, metadata"
_PARAMS = 900  # bound parameters per statement (SQLite builds before 3.32 allow 999)


def _passage(row: tuple) -> Passage:
    # rows were validated as Passages when they were added; re-validating each hit costs more than the lookup
    metadata = {} if row[4] == "{}" else json.loads(row[4])  # most passages carry none: skip the parser
    return Passage.model_construct(id=row[1], doc_id=row[2], text=row[3], metadata=metadata)


class PassageStore:
    """Passages keyed by their integer FAISS id; ``open`` a saved file or start an empty one."""

    def __init__(self, connection: sqlite3.Connection | None = None, path: Path | None = None) -> None:
        if connection is None:
            connection = sqlite3.connect(":memory:", check_same_thread=False)
            connection.executescript(_SCHEMA)
        self._db = connection
        self.path = path  # the saved file this store reads, None once it lives in memory
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: Path) -> "PassageStore":
        """The saved store at ``path``, read-only and lazily (nothing is read until asked for)."""
        uri = f"file:{pathname2url(str(Path(path).resolve()))}?mode=ro&immutable=1"
        try:
            db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            columns = [r[1] for r in db.execute("PRAGMA table_info(passages)")]
        except sqlite3.DatabaseError as exc:
            raise IndexStoreError(f"corrupt passage store {path}: {exc}; rebuild the index") from exc
        if columns != _COLUMNS.split(", "):
            db.close()
            raise IndexStoreError(f"corrupt passage store {path}: no passages table of the expected shape; rebuild the index")
        return cls(db, Path(path))

    # -- reading -------------------------------------------------------------------------------
    def _query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise IndexStoreError(f"passage store {self.path or '(in memory)'} cannot be read: {exc}; "
                                      "rebuild the index") from exc

    def __len__(self) -> int:
        return self._query("SELECT COUNT(*) FROM passages")[0][0]

    def get_many(self, faiss_ids: Iterable[int]) -> dict[int, Passage]:
        """The passages of ``faiss_ids`` (ids the store lacks are left out)."""
        wanted = list(dict.fromkeys(int(i) for i in faiss_ids))
        out: dict[int, Passage] = {}
        for start in range(0, len(wanted), _PARAMS):
            part = wanted[start : start + _PARAMS]
            marks = ",".join("?" * len(part))
            for row in self._query(f"SELECT {_COLUMNS} FROM passages WHERE faiss_id IN ({marks})", part):
                out[row[0]] = _passage(row)
        return out

    def get(self, faiss_id: int) -> Passage:
        found = self.get_many([faiss_id])
        if faiss_id not in found:
            raise IndexStoreError(f"passage store {self.path or '(in memory)'} has no passage with FAISS id "
                                  f"{faiss_id}; rebuild the index")
        return found[faiss_id]

    def all(self) -> Iterator[tuple[int, Passage]]:
        """Every passage with its FAISS id, in id order (read in pages, not all at once)."""
        last = -1
        while True:
            rows = self._query(f"SELECT {_COLUMNS} FROM passages WHERE faiss_id > ? ORDER BY faiss_id LIMIT 5000",
                               (last,))
            if not rows:
                return
            for row in rows:
                yield row[0], _passage(row)
            last = rows[-1][0]

    def doc_of_ids(self) -> tuple[list[int], list[str]]:
        """(FAISS ids, their document ids), in id order: what a per-document pool needs, without texts."""
        rows = self._query("SELECT faiss_id, doc_id FROM passages ORDER BY faiss_id")
        return [r[0] for r in rows], [r[1] for r in rows]

    def chunks_per_document(self) -> dict[str, int]:
        return dict(self._query("SELECT doc_id, COUNT(*) FROM passages GROUP BY doc_id ORDER BY doc_id"))

    def existing_ids(self, passage_ids: Iterable[str]) -> set[str]:
        wanted = list(passage_ids)
        found: set[str] = set()
        for start in range(0, len(wanted), _PARAMS):
            part = wanted[start : start + _PARAMS]
            marks = ",".join("?" * len(part))
            found.update(r[0] for r in self._query(f"SELECT id FROM passages WHERE id IN ({marks})", part))
        return found

    def ids_of_documents(self, doc_ids: Iterable[str]) -> list[int]:
        wanted = list(set(doc_ids))
        out: list[int] = []
        for start in range(0, len(wanted), _PARAMS):
            part = wanted[start : start + _PARAMS]
            marks = ",".join("?" * len(part))
            out.extend(r[0] for r in self._query(f"SELECT faiss_id FROM passages WHERE doc_id IN ({marks})", part))
        return sorted(out)

    # -- writing -------------------------------------------------------------------------------
    def _writable(self) -> None:
        """Copy a loaded (read-only) file into memory before its first change."""
        if self.path is None:
            return
        memory = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.backup(memory)
        self._db.close()
        self._db, self.path = memory, None

    def add(self, rows: Sequence[tuple[int, Passage]]) -> None:
        with self._lock:
            self._writable()
            try:
                with self._db:
                    self._db.executemany(
                        f"INSERT INTO passages ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                        [(i, p.id, p.doc_id, p.text, json.dumps(p.metadata, ensure_ascii=False)) for i, p in rows])
            except sqlite3.IntegrityError as exc:
                raise IndexStoreError(f"passage already in the index: {exc}") from exc

    def remove(self, faiss_ids: Sequence[int]) -> None:
        with self._lock:
            self._writable()
            with self._db:
                for start in range(0, len(faiss_ids), _PARAMS):
                    part = [int(i) for i in faiss_ids[start : start + _PARAMS]]
                    self._db.execute(f"DELETE FROM passages WHERE faiss_id IN ({','.join('?' * len(part))})", part)

    def save_to(self, path: Path) -> None:
        """Write the whole store to a new file at ``path`` (SQLite's online backup; no journal left)."""
        target = sqlite3.connect(str(path))
        try:
            with self._lock:
                self._db.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")
            target.commit()
        finally:
            target.close()

    def close(self) -> None:
        with self._lock:
            self._db.close()
