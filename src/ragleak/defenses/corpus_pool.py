"""The pool a document-level mechanism selects from: every document of the served index.

Two facts the DP proofs of the retrieval-side defenses need, and that a top-``candidate_k`` pool
breaks:

* **the pool is the whole corpus.** Noise added only to the exact top-n that the index hands
  over leaves a document just outside the pool with probability 0 of selection on one corpus and
  > 0 on its neighbour (unbounded privacy loss). ``CorpusPool.document_pool`` therefore scores
  every passage of the index exactly, whatever the index's kind: an IVF or HNSW index's own
  approximate top-k is never used here - its stored vectors are scanned exhaustively instead
  (``PassageIndex.document_pool``: one vectorised pass of FAISS's flat-search kernel over every
  stored vector, the same float32 scores as its exact search, no text read until the k selected
  passages), logged once and stated on the card. The index kinds built here keep their vectors
  uncompressed (no product or scalar quantisation), so that pass is exact on every kind. A
  user-set smaller ``pool``, an index beyond ``WHOLE_CORPUS_LIMIT`` passages or one that cannot
  score every passage make the assumption false, and the defense's card says so (void); such an
  index is refused outright.
* **one score per document.** A document split into c passages would move c scores (or reach c
  voters). The pool holds one entry per document: its best passage, scored by the maximum of its
  passages' scores. Substituting one document changes only its own entry, so after clipping to
  [a, b] the score vector moves in one coordinate by at most b - a, whatever c is.

``CorpusFacts`` records what a card is checked against: passages, documents, the most passages of
one document (for a passage-level proof's group privacy), whether the pool is scored exactly and
the index's kind.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragleak.accounting.guarantee import Assumption
from ragleak.errors import IndexStoreError
from ragleak.rag.score_pool import ScorePool
from ragleak.records import Scored

if TYPE_CHECKING:
    from ragleak.rag.index import PassageIndex

#: passages scored exactly on every query; beyond this the pool is the top passages only (and the card
#: void). The exact pass costs about one flat search (1.2x its CPU time at 100k and 1M passages,
#: benchmarks/bench_dp_selection.py); the bound keeps one query's scan under ~15 GB of 384-d vectors.
WHOLE_CORPUS_LIMIT = 10_000_000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CorpusFacts:
    passages: int
    documents: int
    max_chunks: int
    exact: bool  # the pool's scores are exact inner products of every passage
    kind: str = "flat"

    @classmethod
    def of_index(cls, index: "PassageIndex") -> "CorpusFacts":
        chunks = index.chunks_per_document()
        exact = bool(getattr(index, "scores_every_passage", getattr(index, "exact", False)))
        return cls(passages=len(index), documents=len(chunks), max_chunks=max(chunks.values(), default=1),
                   exact=exact, kind=str(getattr(index, "kind", "flat")))

    @classmethod
    def of_passages(cls, passages) -> "CorpusFacts":
        """Facts of a chunked corpus before indexing (an index built from it is flat and exact)."""
        chunks: dict[str, int] = {}
        for p in passages:
            chunks[p.doc_id] = chunks.get(p.doc_id, 0) + 1
        return cls(passages=sum(chunks.values()), documents=len(chunks), max_chunks=max(chunks.values(), default=1),
                   exact=True)


def best_per_document(scored: list[Scored]) -> list[Scored]:
    """One entry per document (its best passage, the document's max score), best first."""
    best: dict[str, Scored] = {}
    for s in scored:
        if s.passage.doc_id not in best or s.score > best[s.passage.doc_id].score:
            best[s.passage.doc_id] = s
    return sorted(best.values(), key=lambda s: -s.score)


class CorpusPool:
    """The documents one query selects from, and whether that pool is the whole corpus.

    The pipeline tells the defense its index in ``begin_query``; the defense calls ``observe``
    there and ``documents`` in ``score_retrieval``. Without an observed index (a hook called
    directly) the candidates handed in are taken as the corpus and nothing is checked.
    """

    def __init__(self, pool: int | None = None) -> None:
        self.pool = pool
        self.index: PassageIndex | None = None
        self.facts: CorpusFacts | None = None
        self._seen: tuple[int, int] | None = None
        self.truncated_queries = 0

    def observe(self, index: "PassageIndex") -> None:
        key = (id(index), len(index))
        if key != self._seen:  # facts are computed once per served index
            self.index, self.facts, self._seen = index, CorpusFacts.of_index(index), key
            if not self.facts.exact:
                raise IndexStoreError(f"the {self.facts.kind} index cannot score every passage exactly, and a DP "
                                      "retrieval mechanism needs every passage's exact score: rebuild it with "
                                      "`ragleak index build --kind flat`")
            if self.facts.kind != "flat":
                log.warning("the index is %s (approximate top-k); the DP selection pool is scored exactly "
                            "instead, every stored vector scanned (%d passages)", self.facts.kind, self.facts.passages)

    def assume(self, facts: CorpusFacts) -> None:
        """Check against a corpus not served yet (``ragleak account --corpus``): its facts, no index."""
        self.facts = facts

    def covers_corpus(self) -> bool | None:
        if self.facts is None:
            return None
        f = self.facts
        return (f.exact and f.passages <= WHOLE_CORPUS_LIMIT and (self.pool is None or self.pool >= f.documents))

    def document_pool(self, query: str, candidates: list[Scored]) -> ScorePool:
        """One exact score per document of the pool, in document id order (never by score: the
        noise a mechanism draws per row must not depend on the data); text read only when taken."""
        if self.index is None:
            pool = ScorePool.of_scored(sorted(best_per_document(candidates), key=lambda s: s.passage.doc_id))
        elif len(self.index) > WHOLE_CORPUS_LIMIT:
            pool = ScorePool.of_scored(sorted(self.index.best_per_document(query, WHOLE_CORPUS_LIMIT),
                                              key=lambda s: s.passage.doc_id))
        else:
            pool = self.index.document_pool(query)
        if self.pool is not None and self.pool < len(pool):
            pool = pool.subset(pool.best_rows(self.pool))
        self._count()
        return pool

    def passage_pool(self, query: str, candidates: list[Scored]) -> ScorePool:
        """Every passage of the pool's documents with its exact score (for a passage-level mechanism)."""
        if self.index is None or len(self.index) > WHOLE_CORPUS_LIMIT:
            scored = (candidates if self.index is None else
                      self.index.search(query, WHOLE_CORPUS_LIMIT, exact=True))
            if self.pool is not None:
                keep = {d.passage.doc_id for d in best_per_document(scored)[: self.pool]}
                scored = [s for s in scored if s.passage.doc_id in keep]
            pool = ScorePool.of_scored(scored)
        else:
            pool = self.index.passage_pool(query, self.pool)
        self._count()
        return pool

    def documents(self, query: str, candidates: list[Scored]) -> list[Scored]:
        """One entry per document of the pool, best first (reads every document's best passage)."""
        return self.document_pool(query, candidates).ranked()

    def passages(self, query: str, candidates: list[Scored]) -> list[Scored]:
        """Every passage of the pool's documents, best first (reads every passage)."""
        return self.passage_pool(query, candidates).ranked()

    def _count(self) -> None:
        if self.covers_corpus() is False:
            self.truncated_queries += 1

    def assumption(self) -> Assumption:
        """'pool-covers-corpus', checked against the observed index (unchecked before one is seen)."""
        statement = ("every document of the corpus is in the selection pool, scored exactly (a pool cut by exact "
                     "rank is a data-dependent step outside the mechanism: a document just outside it has "
                     "probability 0 of selection on one corpus and > 0 on its neighbour)")
        f = self.facts
        if f is None:
            if self.pool is not None:
                return Assumption(name="pool-covers-corpus", statement=statement, met=False,
                                  detail=f"pool={self.pool} documents set: a corpus larger than the pool is truncated")
            return Assumption(name="pool-covers-corpus", statement=statement, met=None,
                              detail="whole corpus by default; no index seen yet to confirm")
        if not f.exact:
            return Assumption(name="pool-covers-corpus", statement=statement, met=False,
                              detail=f"the {f.kind} index cannot score every passage: scores outside its probed "
                                     "cells are not computed")
        if f.passages > WHOLE_CORPUS_LIMIT:
            return Assumption(name="pool-covers-corpus", statement=statement, met=False,
                              detail=f"{f.passages} passages exceed the exact-scoring limit {WHOLE_CORPUS_LIMIT}: "
                                     "selection over the top passages only")
        if self.pool is not None and self.pool < f.documents:
            return Assumption(name="pool-covers-corpus", statement=statement, met=False,
                              detail=f"pool={self.pool} documents of {f.documents}: the rest are never candidates")
        return Assumption(name="pool-covers-corpus", statement=statement, met=True,
                          detail=f"all {f.documents} documents ({f.passages} passages) scored exactly"
                                 + ("" if f.kind == "flat" else
                                    f" (the {f.kind} index's stored vectors scanned exhaustively, not its "
                                    "approximate search)"))
