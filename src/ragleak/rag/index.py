"""A FAISS inner-product index over unit-normalised passage vectors, saved as a directory.

Layout of an index directory::

    manifest.json     schema version, embedder, dimension, kind, count, SHA-256 of the two files below
    index.faiss       the FAISS index of one ``kind`` (below); vector ids are the passages' FAISS ids
    passages.sqlite   one row per passage, keyed by its FAISS id (``passage_store``), read lazily

Inner product over unit vectors is cosine similarity. Kinds:

* ``flat``: ``IndexIDMap2(IndexFlatIP)``, exact; the default up to ``APPROXIMATE_ABOVE`` passages
  (0.2-4 ms per query up to 100k passages, measured on 2 CPU cores).
* ``ivf``: ``IndexIVFFlat`` (inner product, ``nlist`` ~ 4 sqrt(n) lists trained by spherical
  k-means on a seeded sample, ``nprobe`` lists searched); the ``auto`` choice above the threshold.
  Inverted-file search: Jegou, Douze & Schmid 2011, "Product quantization for nearest neighbor
  search" (IVF with exact residual-free vectors here); nlist ~ sqrt(n) scaling from the FAISS
  guidelines (Douze et al. 2024, "The Faiss library", arXiv:2401.08281).
* ``hnsw``: ``IndexIDMap2(IndexHNSWFlat)`` (Malkov & Yashunin 2016, arXiv:1603.09320); no removal.

The two approximate kinds keep every vector uncompressed, so ``search(..., exact=True)``,
``score_all`` and ``best_per_document`` can still score every passage exactly (IVF: all lists
probed; HNSW: its flat storage scanned). The DP retrieval defenses score their pool that way and
say so on their card (``defenses.corpus_pool``): an approximate top-k never reaches a DP mechanism.

``document_pool`` / ``passage_pool`` are that pool at scale: every stored vector scored in one
pass by FAISS's own inner-product kernel (``fvec_inner_products_ny``, the one its flat search
uses: bit-identical scores), over the flat/HNSW storage in place (no copy) or a copy of an IVF
index's lists, aggregated to documents with ``np.maximum.reduceat`` over a document-grouped order
kept once per index. No text is read for scoring: only the passages finally taken are read from
SQLite. Costs about one flat search per query (``benchmarks/bench_dp_selection.py``).

``save`` writes a complete new directory next to the target and renames it into place, so a
crash leaves either the old index or the new one, never a half-written mix. Indexes of schema 1
(passages in ``passages.jsonl``) still load; saving writes schema 2.
"""

from __future__ import annotations

import io
import logging
import json
import math
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Literal, Sequence

import numpy as np
from pydantic import ValidationError

from ragleak.errors import IndexStoreError, RagleakError
from ragleak.rag.embedder import Embedder
from ragleak.rag.passage_store import PassageStore
from ragleak.rag.score_pool import ScorePool, top_rows
from ragleak.files import atomic_write_bytes, atomic_write_text, sha256_file
from ragleak.records import Passage, Scored

log = logging.getLogger(__name__)

INDEX_SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)  # 1: passages in passages.jsonl (read into memory on load)
MANIFEST = "manifest.json"
FAISS_FILE = "index.faiss"
STORE_FILE = "passages.sqlite"
PASSAGES_FILE = "passages.jsonl"  # schema 1 only
EMBED_SLICE = 256  # passages embedded between two progress reports (a second or two on 2 cores)

IndexKind = Literal["flat", "ivf", "hnsw"]
KINDS: tuple[str, ...] = ("flat", "ivf", "hnsw")
#: ``kind="auto"`` builds a flat (exact) index up to this many passages and an IVF index above it
APPROXIMATE_ABOVE = 50_000
IVF_LISTS_PER_SQRT_N = 4  # nlist = 4 sqrt(n): 1,265 lists at 100k passages
IVF_TRAIN_PER_LIST = 40  # k-means sample: 40 points per list (FAISS warns below 39)
# nprobe = nlist / 8 (at least 16): ~12% of the vectors scored per query. At nlist/16 (min 8) recall@5
# against flat was 0.69 on bench_index_scale's random-word passages (N=600, no topical clusters: a
# worst case for IVF); the audit's retrieval should differ from exact search as little as it can.
IVF_PROBE_SHARE = 8
IVF_MIN_PROBE = 16
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 32, 80, 64

#: ``progress(done, total)``: passages embedded so far, of how many (the CLI draws a bar from it)
Progress = Callable[[int, int], None]
#: ``encode(texts) -> rows``: the same vectors as the index's embedder (a remembering one, say)
Encode = Callable[[Sequence[str]], np.ndarray]


def choose_kind(passages: int, requested: str = "auto") -> str:
    """The index kind to build for ``passages`` passages: ``requested``, or for ``auto`` flat up
    to ``APPROXIMATE_ABOVE`` and IVF above it."""
    if requested == "auto":
        return "flat" if passages <= APPROXIMATE_ABOVE else "ivf"
    if requested not in KINDS:
        raise IndexStoreError(f"unknown index kind {requested!r}; known: auto, {', '.join(KINDS)}")
    return requested


def ivf_lists(passages: int) -> int:
    return max(1, min(passages, round(IVF_LISTS_PER_SQRT_N * math.sqrt(passages))))


@dataclass(frozen=True)
class _Scan:
    """What scoring every stored vector needs, made once per index change (``PassageIndex._scan_state``)."""

    vectors: np.ndarray  # (n, d) float32 in FAISS's storage order: a view of its memory (flat, hnsw) or a copy (ivf)
    ids: np.ndarray  # the FAISS id at each storage position
    doc: np.ndarray  # the document number (row of ``names``) at each storage position
    order: np.ndarray | None  # storage positions grouped by document, by FAISS id within one; None: already so
    starts: np.ndarray  # where each document's group starts in that order (one per document)
    names: list[str]  # document ids, sorted: a document pool's rows


def _first_max(grouped: np.ndarray, starts: np.ndarray, best: np.ndarray, row: int | None = None):
    """Position (in the grouped order) of the first passage of document ``row`` that reaches its
    best score; for every document at once (one vectorised pass) when ``row`` is None."""
    if row is not None:
        end = starts[row + 1] if row + 1 < len(starts) else len(grouped)
        return int(starts[row]) + int(np.argmax(grouped[starts[row] : end]))
    counts = np.diff(np.r_[starts, len(grouped)])
    hits = np.flatnonzero(grouped == np.repeat(best, counts))
    segment = np.repeat(np.arange(len(starts)), counts)[hits]
    return hits[np.r_[True, segment[1:] != segment[:-1]]]


def _pin_faiss_threads() -> None:
    """FAISS's OpenMP threads follow $RAGLEAK_THREADS, like the generator's: a one-query search
    over a small flat index spends 1000x longer spinning threads than scoring on a loaded machine."""
    import faiss

    value = os.environ.get("RAGLEAK_THREADS")
    if value and value.isdigit() and int(value) >= 1 and faiss.omp_get_max_threads() != int(value):
        faiss.omp_set_num_threads(int(value))


class PassageIndex:
    def __init__(self, embedder: Embedder, metadata: dict | None = None, kind: str = "flat") -> None:
        _pin_faiss_threads()
        if kind not in KINDS:
            raise IndexStoreError(f"unknown index kind {kind!r}; known: {', '.join(KINDS)}")
        self.embedder = embedder
        self.metadata = dict(metadata or {})
        self._kind = kind
        self.params: dict = {}  # the kind's parameters (nlist, nprobe; M, efSearch), saved in the manifest
        self._faiss = None  # made at the first add (an IVF index's lists depend on the corpus size)
        self._store = PassageStore()
        self._count = 0
        self._docs: tuple[np.ndarray, np.ndarray, list[str]] | None = None  # FAISS id -> document, for pools
        self._scan: _Scan | None = None  # the stored vectors grouped by document, for exact pools
        self._next_id = 0
        self._query_vectors: dict[str, np.ndarray] = {}  # a pipeline and its defense embed the same query
        #: of the last ``add``: passages embedded, passages found in kept slices, seconds spent embedding
        self.build_stats: dict[str, float] = {}
        if kind != "ivf":
            self._faiss = self._new_faiss(0)

    # -- the FAISS index of each kind ---------------------------------------------------------
    def _new_faiss(self, n: int):
        import faiss

        d = self.embedder.dim
        if self._kind == "flat":
            return faiss.IndexIDMap2(faiss.IndexFlatIP(d))
        if self._kind == "hnsw":
            inner = faiss.IndexHNSWFlat(d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
            inner.hnsw.efSearch = HNSW_EF_SEARCH
            self.params = {"M": HNSW_M, "efConstruction": HNSW_EF_CONSTRUCTION, "efSearch": HNSW_EF_SEARCH}
            return faiss.IndexIDMap2(inner)
        nlist = ivf_lists(n)
        quantizer = faiss.IndexFlatIP(d)
        ivf = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.cp.spherical = True  # unit vectors: centroids on the sphere
        ivf.cp.min_points_per_centroid = 1  # small corpora (tests) train without FAISS's warning
        ivf.nprobe = max(1, min(nlist, max(IVF_MIN_PROBE, nlist // IVF_PROBE_SHARE)))
        self.params = {"nlist": nlist, "nprobe": ivf.nprobe}
        return ivf

    def _train(self, vectors: np.ndarray) -> None:
        """Train an IVF index's lists on a seeded sample of the first vectors it is given."""
        nlist = self._faiss.nlist
        size = min(len(vectors), IVF_TRAIN_PER_LIST * nlist)
        rows = np.sort(np.random.default_rng(0).choice(len(vectors), size=size, replace=False))
        t0 = time.perf_counter()
        self._faiss.train(np.ascontiguousarray(vectors[rows]))
        self.params["trained_on"] = int(size)
        log.info("trained %d IVF lists on %d vectors in %.1fs", nlist, size, time.perf_counter() - t0)

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def exact(self) -> bool:
        """True when ``search`` scores every passage exactly (a flat index, not IVF/HNSW)."""
        return self._kind == "flat"

    @property
    def scores_every_passage(self) -> bool:
        """True when ``search(exact=True)``, ``score_all`` and ``best_per_document`` score every
        passage exactly: every kind built here keeps its vectors uncompressed."""
        return self._kind in KINDS

    # -- building -------------------------------------------------------------------------
    @classmethod
    def build(cls, passages: Sequence[Passage], embedder: Embedder, metadata: dict | None = None,
              progress: Progress | None = None, encode: Encode | None = None,
              work_dir: Path | None = None, kind: str = "auto") -> "PassageIndex":
        """An index over ``passages`` of ``kind`` (``auto``: ``choose_kind``). With ``work_dir``
        the vectors are kept there slice by slice as they are embedded (each slice written
        atomically), so a build killed part-way resumes at its first missing slice; the caller
        removes ``work_dir`` once the index is saved."""
        index = cls(embedder, metadata, choose_kind(len(passages), kind))
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
        seen: set[str] = set()
        for p in passages:
            if p.id in seen:
                raise IndexStoreError(f"passage id {p.id!r} is already in the index")
            seen.add(p.id)
        taken = self._store.existing_ids(seen)
        if taken:
            raise IndexStoreError(f"passage id {sorted(taken)[0]!r} is already in the index")
        if not passages:
            return
        if progress is not None:
            progress(0, len(passages))
        parts = []
        embedded = resumed = 0
        seconds = 0.0
        for start in range(0, len(passages), EMBED_SLICE):
            texts = [p.text for p in passages[start : start + EMBED_SLICE]]
            rows = slices.get(start, len(texts)) if slices is not None else None
            if rows is None:
                t0 = time.perf_counter()
                rows = encode(texts)
                seconds += time.perf_counter() - t0
                embedded += len(texts)
                if slices is not None:
                    slices.put(start, rows)
            else:
                resumed += len(texts)
            parts.append(rows)
            if progress is not None:
                progress(min(start + EMBED_SLICE, len(passages)), len(passages))
        ids = np.arange(self._next_id, self._next_id + len(passages), dtype=np.int64)
        t0 = time.perf_counter()
        self._add_vectors(ids, np.concatenate(parts, axis=0), passages)
        self.build_stats = {"embedded": embedded, "resumed": resumed, "embed_s": round(seconds, 3),
                            "index_s": round(time.perf_counter() - t0, 3)}

    def _add_vectors(self, ids: np.ndarray, vectors: np.ndarray, passages: Sequence[Passage]) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self._faiss is None:
            self._faiss = self._new_faiss(len(vectors))
        if self._kind == "ivf" and not self._faiss.is_trained:
            self._train(vectors)
        self._faiss.add_with_ids(vectors, ids)
        self._store.add(list(zip(ids.tolist(), passages)))
        self._count += len(passages)
        self._next_id = max(self._next_id, int(ids.max()) + 1) if len(ids) else self._next_id
        self._docs = self._scan = None  # the scan may view FAISS memory that the add reallocated

    def remove_documents(self, doc_ids: Iterable[str]) -> int:
        """Remove every passage of the given documents; returns how many passages went."""
        ids = self._store.ids_of_documents(doc_ids)
        if ids:
            if self._kind == "hnsw":
                raise IndexStoreError("an hnsw index cannot remove passages (FAISS's HNSW graph has no deletion); "
                                      "rebuild the index without those documents, or build it as flat or ivf")
            self._faiss.remove_ids(np.array(ids, dtype=np.int64))
            self._store.remove(ids)
            self._count -= len(ids)
            self._docs = self._scan = None
        return len(ids)

    def with_kind(self, kind: str) -> "PassageIndex":
        """The same passages and vectors in an index of another ``kind`` (nothing is embedded again)."""
        other = type(self)(self.embedder, self.metadata, choose_kind(len(self), kind))
        ids, vectors = self.vectors()
        order = np.argsort(ids)
        ids, vectors = ids[order], vectors[order]
        found = self._store.get_many(ids.tolist())
        if len(ids):
            other._add_vectors(ids, vectors, [found[i] for i in ids.tolist()])
        other._next_id = self._next_id
        return other

    # -- the stored vectors -----------------------------------------------------------------
    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(FAISS ids, their vectors) as held by the FAISS index, in its internal order."""
        import faiss

        d = self.embedder.dim
        if self._faiss is None or self._faiss.ntotal == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, d), dtype=np.float32)
        if self._kind == "ivf":
            lists = self._faiss.invlists
            ids, rows = [], []
            for number in range(self._faiss.nlist):
                size = lists.list_size(number)
                if size:
                    ids.append(faiss.rev_swig_ptr(lists.get_ids(number), size).copy())
                    codes = faiss.rev_swig_ptr(lists.get_codes(number), size * lists.code_size).copy()
                    rows.append(codes.view(np.float32).reshape(size, d))
            return np.concatenate(ids).astype(np.int64), np.concatenate(rows)
        inner = faiss.downcast_index(self._faiss.index)
        storage = faiss.downcast_index(inner.storage) if self._kind == "hnsw" else inner
        return (faiss.vector_to_array(self._faiss.id_map).astype(np.int64),
                storage.reconstruct_n(0, storage.ntotal))

    def _stored_view(self) -> tuple[np.ndarray, np.ndarray]:
        """(FAISS ids, vectors) in storage order, the vectors read in place where FAISS keeps them
        in one array (flat, hnsw: a view valid until the index changes) and copied otherwise (ivf)."""
        import faiss

        if self._kind == "ivf" or self._faiss is None or self._faiss.ntotal == 0:
            return self.vectors()
        inner = faiss.downcast_index(self._faiss.index)
        storage = faiss.downcast_index(inner.storage) if self._kind == "hnsw" else inner
        n, d = storage.ntotal, storage.d
        view = faiss.rev_swig_ptr(storage.get_xb(), n * d).reshape(n, d)
        return faiss.vector_to_array(self._faiss.id_map).astype(np.int64), view

    def _scan_state(self) -> _Scan:
        """The stored vectors with each position's document and a document-grouped order, made
        once per change (a flat index's chunks are usually added document by document: no reorder)."""
        if self._scan is None:
            ids, vectors = self._stored_view()
            sorted_ids, doc_number, names = self._documents()
            at = np.searchsorted(sorted_ids, ids)
            if len(ids) != len(sorted_ids) or not np.array_equal(sorted_ids[np.minimum(at, len(sorted_ids) - 1)], ids):
                raise IndexStoreError(f"the index holds {len(ids)} vectors and its passage store {len(sorted_ids)} "
                                      "passages, not the same ids; rebuild the index")
            doc = doc_number[at]
            order = np.lexsort((ids, doc))
            grouped = doc[order]
            starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
            identity = bool(np.array_equal(order, np.arange(len(order))))
            self._scan = _Scan(vectors=np.ascontiguousarray(vectors, dtype=np.float32), ids=ids, doc=doc,
                               order=None if identity else order, starts=starts, names=names)
        return self._scan

    def _exact_scores(self, scan: _Scan, query: str) -> np.ndarray:
        """Every stored vector's inner product with ``query``'s vector, in storage order: FAISS's
        ``fvec_inner_products_ny``, the kernel of its flat search (the same float32 scores)."""
        import faiss

        q = np.ascontiguousarray(self._encode_queries([query])[0], dtype=np.float32)
        n, d = scan.vectors.shape
        out = np.empty(n, dtype=np.float32)
        if n:
            faiss.fvec_inner_products_ny(faiss.swig_ptr(out), faiss.swig_ptr(q), faiss.swig_ptr(scan.vectors), d, n)
        return out

    def _scored(self, ids: np.ndarray, scores: Sequence[float]) -> list[Scored]:
        found = self._store.get_many(ids.tolist())
        missing = [int(i) for i in ids.tolist() if int(i) not in found]
        if missing:
            raise IndexStoreError(f"passage store {self._store.path or '(in memory)'} has no passage with FAISS id "
                                  f"{missing[0]}; rebuild the index")
        return [Scored(passage=found[int(i)], score=float(s)) for i, s in zip(ids.tolist(), scores)]

    def document_pool(self, query: str) -> ScorePool:
        """One exact score per document (its best passage's), rows in document id order; taking a
        row reads that document's best passage (ties: the lowest FAISS id) scored by it."""
        if not len(self):
            return ScorePool(np.zeros(0, dtype=np.float32), lambda rows: [])
        scan = self._scan_state()
        scores = self._exact_scores(scan, query)
        grouped = scores if scan.order is None else scores[scan.order]
        best = np.maximum.reduceat(grouped, scan.starts)

        def fetch(rows: Sequence[int]) -> list[Scored]:
            at = _first_max(grouped, scan.starts, best)[rows] if len(rows) > 64 else np.array(
                [_first_max(grouped, scan.starts, best, r) for r in rows], dtype=np.int64)
            positions = at if scan.order is None else scan.order[at]
            return self._scored(scan.ids[positions], [best[r] for r in rows])

        return ScorePool(best, fetch)

    def passage_pool(self, query: str, documents: int | None = None) -> ScorePool:
        """Every passage's exact score, rows in storage order; with ``documents`` only the passages
        of the ``documents`` best documents (by their best passage)."""
        if not len(self):
            return ScorePool(np.zeros(0, dtype=np.float32), lambda rows: [])
        scan = self._scan_state()
        scores = self._exact_scores(scan, query)
        pool = ScorePool(scores, lambda rows: self._scored(scan.ids[np.asarray(rows, dtype=np.int64)],
                                                           [scores[r] for r in rows]))
        if documents is None or documents >= len(scan.names):
            return pool
        grouped = scores if scan.order is None else scores[scan.order]
        best = top_rows(np.maximum.reduceat(grouped, scan.starts), documents)
        return pool.subset(np.flatnonzero(np.isin(scan.doc, best)))

    def _search_faiss(self, q: np.ndarray, k: int, exact: bool) -> tuple[np.ndarray, np.ndarray]:
        """FAISS's (scores, ids) of the best ``k``: the index's own search, or with ``exact`` every
        stored vector scored (IVF: all lists probed; HNSW: its flat storage scanned)."""
        import faiss

        if not exact or self._kind == "flat":
            return self._faiss.search(q, k)
        if self._kind == "ivf":
            return self._faiss.search(q, k, params=faiss.SearchParametersIVF(nprobe=self._faiss.nlist))
        if self._kind == "hnsw":
            storage = faiss.downcast_index(faiss.downcast_index(self._faiss.index).storage)
            scores, internal = storage.search(q, k)
            id_map = faiss.vector_to_array(self._faiss.id_map)
            return scores, np.where(internal >= 0, id_map[np.clip(internal, 0, None)], -1)
        raise IndexStoreError(f"a {self._kind} index cannot score every passage exactly")

    # -- querying -------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._count

    @property
    def passages(self) -> list[Passage]:
        return [p for _, p in self._store.all()]

    @property
    def doc_ids(self) -> list[str]:
        return sorted(self._store.chunks_per_document())

    def search(self, query: str, k: int, exact: bool = False) -> list[Scored]:
        return self.search_many([query], k, exact)[0]

    def score_all(self, query: str) -> list[Scored]:
        """Every passage with its exact score for ``query``, best first (one exhaustive pass)."""
        return self.search(query, len(self), exact=True)

    def _documents(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(sorted FAISS ids, the document number of each, document names), built once per change."""
        if self._docs is None:
            ids, docs = self._store.doc_of_ids()
            names = sorted(set(docs))
            number = {name: i for i, name in enumerate(names)}
            self._docs = (np.array(ids, dtype=np.int64), np.array([number[d] for d in docs], dtype=np.int64), names)
        return self._docs

    def best_per_document(self, query: str, passages: int | None = None) -> list[Scored]:
        """One entry per document: its best passage, scored by the document's best (max) passage
        score, best first; over every passage, or the ``passages`` top-scored ones only - scored
        exactly whatever the index's kind (this is a DP mechanism's pool). Reads every listed
        document's passage: a mechanism that takes only k of them uses ``document_pool``."""
        if not len(self):
            return []
        if passages is None or passages >= len(self):
            return self.document_pool(query).ranked()
        k = len(self) if passages is None else min(passages, len(self))
        scores, ids = self._search_faiss(self._encode_queries([query]), k, exact=True)
        scores, ids = scores[0], ids[0]
        keep = ids >= 0
        scores, ids = scores[keep], ids[keep]
        sorted_ids, doc_number, _ = self._documents()
        docs = doc_number[np.searchsorted(sorted_ids, ids)]
        _, first = np.unique(docs, return_index=True)  # results are best first: a document's first hit is its max
        first = np.sort(first)
        found = self._store.get_many(ids[first].tolist())
        return [Scored(passage=found[int(ids[j])], score=float(scores[j])) for j in first.tolist()]

    def chunks_per_document(self) -> dict[str, int]:
        return self._store.chunks_per_document()

    def _encode_queries(self, queries: list[str]) -> np.ndarray:
        missing = [q for q in dict.fromkeys(queries) if q not in self._query_vectors]
        if missing:
            if len(self._query_vectors) + len(missing) > 256:
                self._query_vectors.clear()
            self._query_vectors.update(zip(missing, self.embedder.encode(missing)))
        return np.stack([self._query_vectors[q] for q in queries]).astype(np.float32, copy=False)

    def search_many(self, queries: Sequence[str], k: int, exact: bool = False) -> list[list[Scored]]:
        """The best ``k`` passages of each query, best first: by the index's own search, or with
        ``exact`` by scoring every passage (the same as ``search`` on a flat index)."""
        if not len(self):
            return [[] for _ in queries]
        q = self._encode_queries(list(queries))
        scores, ids = self._search_faiss(q, min(k, len(self)), exact)
        found = self._store.get_many(i for i in ids.ravel().tolist() if i >= 0)
        return [
            [Scored(passage=found[int(i)], score=float(s)) for s, i in zip(row_s, row_i) if i >= 0]
            for row_s, row_i in zip(scores, ids)
        ]

    # -- persistence ----------------------------------------------------------------------
    def save(self, directory: Path) -> Path:
        import faiss

        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.building."))
        try:
            if self._faiss is None:
                self._faiss = self._new_faiss(0)
            faiss.write_index(self._faiss, str(staging / FAISS_FILE))
            self._store.save_to(staging / STORE_FILE)
            manifest = {
                "schema_version": INDEX_SCHEMA_VERSION,
                "embedder": self.embedder.name,
                "dim": self.embedder.dim,
                "kind": self._kind,
                "params": self.params,
                "passages": len(self),
                "documents": len(self.doc_ids),
                "next_id": self._next_id,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "sha256": {name: sha256_file(staging / name) for name in (FAISS_FILE, STORE_FILE)},
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
        kind = manifest.get("kind", "flat")
        if kind not in KINDS:
            raise IndexStoreError(f"index {directory} is of kind {kind!r}, this ragleak reads {', '.join(KINDS)}; "
                                  "rebuild it")
        index = cls(embedder, manifest.get("metadata"), kind)
        try:
            index._faiss = faiss.read_index(str(directory / FAISS_FILE))
            if manifest["schema_version"] == 1:
                index._store = _store_from_jsonl(directory / PASSAGES_FILE)
            else:
                index._store = PassageStore.open(directory / STORE_FILE)
            index._count = len(index._store)
        except (RuntimeError, ValueError, KeyError, ValidationError) as exc:
            raise IndexStoreError(f"corrupt index {directory}: {exc}") from exc
        expected_type = {"flat": faiss.IndexIDMap2, "hnsw": faiss.IndexIDMap2, "ivf": faiss.IndexIVFFlat}[kind]
        if not isinstance(index._faiss, expected_type):
            raise IndexStoreError(f"corrupt index {directory}: the manifest says {kind}, {FAISS_FILE} holds a "
                                  f"{type(index._faiss).__name__}; rebuild it")
        index.params = dict(manifest.get("params") or {})
        if kind == "ivf" and "nprobe" in index.params:
            index._faiss.nprobe = int(index.params["nprobe"])
        if kind == "hnsw" and "efSearch" in index.params:
            faiss.downcast_index(index._faiss.index).hnsw.efSearch = int(index.params["efSearch"])
        if index._faiss.ntotal != len(index) or len(index) != manifest["passages"]:
            raise IndexStoreError(
                f"corrupt index {directory}: {index._faiss.ntotal} vectors, {len(index)} passages, "
                f"manifest says {manifest['passages']}; rebuild it"
            )
        index._next_id = int(manifest["next_id"])
        return index


def load_or_build(directory: Path, embedder: Embedder,
                  build: Callable[[Path | None], PassageIndex]) -> tuple[PassageIndex, bool]:
    """The index saved in ``directory`` (checksums verified) and True, else ``build(work_dir)``
    saved there and False. The build embeds slice by slice into a work folder beside
    ``directory``, so a killed builder's successor resumes it; a save that fails (a full disk, a
    race with another worker) costs only the reuse."""
    directory = Path(directory)
    if (directory / MANIFEST).exists():
        try:
            return PassageIndex.load(directory, embedder), True
        except (RagleakError, OSError, ValueError, RuntimeError) as exc:  # faiss raises RuntimeError
            log.warning("stored index %s is unusable (%s); building it again", directory, exc)
    work_dir = directory.with_name(f".{directory.name}.slices")
    index = build(work_dir)
    try:
        index.save(directory)
    except (OSError, RagleakError) as exc:
        log.warning("could not store index %s for other workers: %s", directory, exc)
    else:
        shutil.rmtree(work_dir, ignore_errors=True)
    return index, False


def _store_from_jsonl(path: Path) -> PassageStore:
    """A schema-1 index's ``passages.jsonl`` read into an in-memory store."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            i = row.pop("faiss_id")
            rows.append((int(i), Passage.model_validate(row)))
    store = PassageStore()
    store.add(rows)
    return store


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
    if manifest["schema_version"] not in READABLE_SCHEMAS:
        raise IndexStoreError(
            f"index {directory} has schema version {manifest['schema_version']}, this ragleak reads "
            f"{', '.join(map(str, READABLE_SCHEMAS))}; rebuild it"
        )
    files = {FAISS_FILE, PASSAGES_FILE if manifest["schema_version"] == 1 else STORE_FILE}
    checksums = manifest["sha256"]
    if not isinstance(checksums, dict) or not files <= set(checksums):
        raise IndexStoreError(f"corrupt index {directory}: {MANIFEST} lacks the checksums of "
                              f"{' and '.join(sorted(files))}; rebuild it")
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
