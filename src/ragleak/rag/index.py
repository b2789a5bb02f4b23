"""A FAISS inner-product index over unit-normalised passage vectors, saved as a directory.

Layout of an index directory::

    manifest.json    schema version, embedder, dimension, count, SHA-256 of the two files below
    index.faiss      faiss.IndexIDMap2(IndexFlatIP): exact search, ids stable under removal
    passages.jsonl   one Passage per line, with its integer FAISS id

Inner product over unit vectors is cosine similarity. A flat index is exact and, at the corpus
sizes audited here (<= 100k passages), fast enough (0.2-4 ms per query, measured on 2 CPU cores).
``save`` writes a complete new directory next to the target and renames it into place, so a
crash leaves either the old index or the new one, never a half-written mix.
"""

from __future__ import annotations

import io
import logging
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
from pydantic import ValidationError

from ragleak.errors import IndexStoreError
from ragleak.rag.embedder import Embedder
from ragleak.files import atomic_write_bytes, atomic_write_text, sha256_file
from ragleak.records import Passage, Scored

log = logging.getLogger(__name__)

INDEX_SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
FAISS_FILE = "index.faiss"
PASSAGES_FILE = "passages.jsonl"
EMBED_SLICE = 256  # passages embedded between two progress reports (a second or two on 2 cores)

#: ``progress(done, total)``: passages embedded so far, of how many (the CLI draws a bar from it)
Progress = Callable[[int, int], None]
#: ``encode(texts) -> rows``: the same vectors as the index's embedder (a remembering one, say)
Encode = Callable[[Sequence[str]], np.ndarray]


def _pin_faiss_threads() -> None:
    """FAISS's OpenMP threads follow $RAGLEAK_THREADS, like the generator's: a one-query search
    over a small flat index spends 1000x longer spinning threads than scoring on a loaded machine."""
    import faiss

    value = os.environ.get("RAGLEAK_THREADS")
    if value and value.isdigit() and int(value) >= 1 and faiss.omp_get_max_threads() != int(value):
        faiss.omp_set_num_threads(int(value))


class PassageIndex:
    def __init__(self, embedder: Embedder, metadata: dict | None = None) -> None:
        import faiss

        _pin_faiss_threads()
        self.embedder = embedder
        self.metadata = dict(metadata or {})
        self._faiss = faiss.IndexIDMap2(faiss.IndexFlatIP(embedder.dim))
        self._passages: dict[int, Passage] = {}
        self._by_passage_id: dict[str, int] = {}
        self._next_id = 0
        self._query_vectors: dict[str, np.ndarray] = {}  # a pipeline and its defense embed the same query

    # -- building -------------------------------------------------------------------------
    @classmethod
    def build(cls, passages: Sequence[Passage], embedder: Embedder, metadata: dict | None = None,
              progress: Progress | None = None, encode: Encode | None = None,
              work_dir: Path | None = None) -> "PassageIndex":
        """An index over ``passages``. With ``work_dir`` the vectors are kept there slice by slice
        as they are embedded (each slice written atomically), so a build killed part-way resumes
        at its first missing slice; the caller removes ``work_dir`` once the index is saved."""
        index = cls(embedder, metadata)
        if work_dir is None:
            index.add(passages, progress, encode)
        else:
            slices = _SliceStore(Path(work_dir), passages, embedder)
            index.add(passages, progress, encode, slices)
        return index

    def add(self, passages: Sequence[Passage], progress: Progress | None = None, encode: Encode | None = None,
            slices: "_SliceStore | None" = None) -> None:
        """Embed and add ``passages``, in slices of ``EMBED_SLICE``; ``progress(done, total)`` is
        called after each slice (and once with ``(0, total)`` before the first). ``encode``: how
        to embed the passages (default: the index's embedder; queries always use that one);
        ``slices``: where finished slices are kept and found again (``build``'s ``work_dir``)."""
        encode = encode or self.embedder.encode
        passages = list(passages)
        seen = set(self._by_passage_id)
        for p in passages:
            if p.id in seen:
                raise IndexStoreError(f"passage id {p.id!r} is already in the index")
            seen.add(p.id)
        if not passages:
            return
        if progress is not None:
            progress(0, len(passages))
        parts = []
        for start in range(0, len(passages), EMBED_SLICE):
            texts = [p.text for p in passages[start : start + EMBED_SLICE]]
            rows = slices.get(start, len(texts)) if slices is not None else None
            if rows is None:
                rows = encode(texts)
                if slices is not None:
                    slices.put(start, rows)
            parts.append(rows)
            if progress is not None:
                progress(min(start + EMBED_SLICE, len(passages)), len(passages))
        vectors = np.concatenate(parts, axis=0)
        ids = np.arange(self._next_id, self._next_id + len(passages), dtype=np.int64)
        self._faiss.add_with_ids(vectors, ids)
        for i, p in zip(ids.tolist(), passages):
            self._passages[i] = p
            self._by_passage_id[p.id] = i
        self._next_id += len(passages)

    def remove_documents(self, doc_ids: Iterable[str]) -> int:
        """Remove every passage of the given documents; returns how many passages went."""
        wanted = set(doc_ids)
        ids = [i for i, p in self._passages.items() if p.doc_id in wanted]
        if ids:
            self._faiss.remove_ids(np.array(ids, dtype=np.int64))
            for i in ids:
                del self._by_passage_id[self._passages.pop(i).id]
        return len(ids)

    # -- querying -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._passages)

    @property
    def passages(self) -> list[Passage]:
        return [self._passages[i] for i in sorted(self._passages)]

    @property
    def doc_ids(self) -> list[str]:
        return sorted({p.doc_id for p in self._passages.values()})

    @property
    def exact(self) -> bool:
        """True when the FAISS index scores every passage exactly (a flat index, not IVF/HNSW/PQ)."""
        import faiss

        inner = faiss.downcast_index(self._faiss.index) if hasattr(self._faiss, "index") else self._faiss
        return isinstance(inner, faiss.IndexFlat)

    def search(self, query: str, k: int) -> list[Scored]:
        return self.search_many([query], k)[0]

    def score_all(self, query: str) -> list[Scored]:
        """Every passage with its exact score for ``query``, best first (a flat index: one pass)."""
        return self.search(query, len(self._passages))

    def best_per_document(self, query: str, passages: int | None = None) -> list[Scored]:
        """One entry per document: its best passage, scored by the document's best (max) passage
        score, best first; over every passage (exact) or the ``passages`` top-scored ones only."""
        if not self._passages:
            return []
        k = len(self._passages) if passages is None else min(passages, len(self._passages))
        scores, ids = self._faiss.search(self._encode_queries([query]), k)
        best: dict[str, Scored] = {}
        for score, i in zip(scores[0].tolist(), ids[0].tolist()):
            if i >= 0 and self._passages[i].doc_id not in best:  # sorted best first: the first is the max
                best[self._passages[i].doc_id] = Scored(passage=self._passages[i], score=float(score))
        return list(best.values())

    def chunks_per_document(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for p in self._passages.values():
            counts[p.doc_id] = counts.get(p.doc_id, 0) + 1
        return counts

    def _encode_queries(self, queries: list[str]) -> np.ndarray:
        missing = [q for q in dict.fromkeys(queries) if q not in self._query_vectors]
        if missing:
            if len(self._query_vectors) + len(missing) > 256:
                self._query_vectors.clear()
            self._query_vectors.update(zip(missing, self.embedder.encode(missing)))
        return np.stack([self._query_vectors[q] for q in queries]).astype(np.float32, copy=False)

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Scored]]:
        if not self._passages:
            return [[] for _ in queries]
        q = self._encode_queries(list(queries))
        scores, ids = self._faiss.search(q, min(k, len(self._passages)))
        return [
            [Scored(passage=self._passages[int(i)], score=float(s)) for s, i in zip(row_s, row_i) if i >= 0]
            for row_s, row_i in zip(scores, ids)
        ]

    # -- persistence ----------------------------------------------------------------------
    def save(self, directory: Path) -> Path:
        import faiss

        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.building."))
        try:
            faiss.write_index(self._faiss, str(staging / FAISS_FILE))
            with open(staging / PASSAGES_FILE, "w", encoding="utf-8") as f:
                for i in sorted(self._passages):
                    f.write(json.dumps({"faiss_id": i, **self._passages[i].model_dump(mode="json")}, ensure_ascii=False) + "\n")
            manifest = {
                "schema_version": INDEX_SCHEMA_VERSION,
                "embedder": self.embedder.name,
                "dim": self.embedder.dim,
                "passages": len(self._passages),
                "documents": len(self.doc_ids),
                "next_id": self._next_id,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "sha256": {name: sha256_file(staging / name) for name in (FAISS_FILE, PASSAGES_FILE)},
                "metadata": self.metadata,
            }
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
            _swap_into_place(staging, directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return directory

    @classmethod
    def load(cls, directory: Path, embedder: Embedder) -> "PassageIndex":
        import faiss

        directory = Path(directory)
        manifest = read_manifest(directory)
        if manifest.get("embedder") != embedder.name or manifest.get("dim") != embedder.dim:
            raise IndexStoreError(
                f"{directory} was built with embedder {manifest.get('embedder')!r} (dim {manifest.get('dim')}), "
                f"not {embedder.name!r} (dim {embedder.dim}); rebuild it"
            )
        for name, expected in manifest["sha256"].items():
            path = member_file(directory, name)
            if sha256_file(path) != expected:
                raise IndexStoreError(f"corrupt index {directory}: {name} does not match its checksum; rebuild it")
        index = cls(embedder, manifest.get("metadata"))
        try:
            index._faiss = faiss.read_index(str(directory / FAISS_FILE))
            with open(directory / PASSAGES_FILE, encoding="utf-8") as f:
                for line_no, line in enumerate(f, start=1):
                    row = json.loads(line)
                    i = row.pop("faiss_id")
                    index._passages[i] = Passage.model_validate(row)
                    index._by_passage_id[index._passages[i].id] = i
        except (RuntimeError, ValueError, KeyError, ValidationError) as exc:
            raise IndexStoreError(f"corrupt index {directory}: {exc}") from exc
        if index._faiss.ntotal != len(index._passages) or len(index._passages) != manifest["passages"]:
            raise IndexStoreError(
                f"corrupt index {directory}: {index._faiss.ntotal} vectors, {len(index._passages)} passages, "
                f"manifest says {manifest['passages']}; rebuild it"
            )
        index._next_id = int(manifest["next_id"])
        return index


def read_manifest(directory: Path) -> dict:
    directory = Path(directory)
    if not directory.is_dir():
        raise IndexStoreError(f"no index at {directory}: not a directory (build one with `ragleak index build`)")
    path = directory / MANIFEST
    if not path.exists():
        raise IndexStoreError(f"{directory} is not a ragleak index: {MANIFEST} is missing")
    member_file(directory, MANIFEST)  # a regular file inside the folder (not a link to /dev/zero)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise IndexStoreError(f"corrupt index {directory}: {MANIFEST} is not valid JSON ({exc})") from exc
    required = {"schema_version", "embedder", "dim", "passages", "next_id", "sha256"}
    if not isinstance(manifest, dict) or not required <= set(manifest):
        raise IndexStoreError(f"corrupt index {directory}: {MANIFEST} lacks {sorted(required - set(manifest or {}))}")
    if manifest["schema_version"] != INDEX_SCHEMA_VERSION:
        raise IndexStoreError(
            f"index {directory} has schema version {manifest['schema_version']}, this ragleak reads {INDEX_SCHEMA_VERSION}; rebuild it"
        )
    checksums = manifest["sha256"]
    if not isinstance(checksums, dict) or not {FAISS_FILE, PASSAGES_FILE} <= set(checksums):
        raise IndexStoreError(f"corrupt index {directory}: {MANIFEST} lacks the checksums of {FAISS_FILE} "
                              f"and {PASSAGES_FILE}; rebuild it")
    return manifest


def member_file(directory: Path, name: object) -> Path:
    """The path of a file a manifest names, which must be a regular file inside ``directory``:
    a plain name (no folder part, ``..`` or absolute path), not a symlink leading outside, not a
    device or FIFO (reading ``/dev/zero`` never ends)."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise IndexStoreError(f"corrupt index {directory}: the manifest names {str(name)[:80]!r}, "
                              "not a file inside the index folder; rebuild it")
    path = directory / name
    try:
        inside = path.resolve(strict=True).is_relative_to(directory.resolve(strict=True))
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise IndexStoreError(f"corrupt index {directory}: {name} is missing; rebuild it") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise IndexStoreError(f"corrupt index {directory}: cannot open {name} ({exc}); rebuild it") from None
    if not inside:
        raise IndexStoreError(f"corrupt index {directory}: {name} links outside the index folder; rebuild it")
    if not stat.S_ISREG(mode):
        raise IndexStoreError(f"corrupt index {directory}: {name} is not a regular file; rebuild it")
    return path


class _SliceStore:
    """Embedded slices of one build, one ``.npy`` per slice under ``directory``. The folder is
    stamped with the digest of the passages and the embedder (cleared when the stamp differs),
    and each slice's name starts with it, so slices of another build are never mixed in. Keeping
    slices only saves work: a file error disables it (with a warning), never the build."""

    def __init__(self, directory: Path, passages: Sequence[Passage], embedder: Embedder) -> None:
        import hashlib

        self.directory = directory
        self.dim = embedder.dim
        h = hashlib.sha256(f"{embedder.name}/{embedder.dim}/{EMBED_SLICE}".encode())
        for p in passages:
            h.update(json.dumps([p.id, p.text]).encode("utf-8"))
        stamp, expected = directory / "build.sha256", h.hexdigest()
        self.build = expected[:16]  # in every slice's name too: a slice of another build is never read
        self.enabled = True
        try:  # best effort: two workers may build the same index at once, and one cleans up first
            if stamp.exists() and stamp.read_text(encoding="utf-8") != expected:
                shutil.rmtree(directory)
            directory.mkdir(parents=True, exist_ok=True)
            atomic_write_text(stamp, expected)
        except OSError as exc:
            log.warning("not keeping embedded slices in %s (%s): a killed build starts over", directory, exc)
            self.enabled = False

    def _path(self, start: int) -> Path:
        return self.directory / f"{self.build}-{start:010d}.npy"

    def get(self, start: int, rows: int) -> np.ndarray | None:
        path = self._path(start)
        if not self.enabled or not path.exists():
            return None
        try:
            vectors = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None  # a torn or foreign file: embed the slice again
        return vectors if vectors.shape == (rows, self.dim) and vectors.dtype == np.float32 else None

    def put(self, start: int, vectors: np.ndarray) -> None:
        if not self.enabled:
            return
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(vectors, dtype=np.float32), allow_pickle=False)
        try:
            atomic_write_bytes(self._path(start), buffer.getvalue())
        except OSError as exc:  # only the resume is lost (a full disk; a twin worker finished and cleaned up)
            log.warning("could not keep embedded slice %d in %s: %s", start, self.directory, exc)


def _swap_into_place(staging: Path, directory: Path) -> None:
    if directory.exists():
        if not (directory / MANIFEST).exists() and any(directory.iterdir()):
            raise IndexStoreError(f"refusing to overwrite {directory}: it exists and is not a ragleak index")
        old = directory.with_name(f".{directory.name}.old.{time.time_ns()}")
        directory.rename(old)
        staging.rename(directory)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(directory)
