"""``dp-synthetic``: serve every query from a one-time DP synthetic corpus (DP-SynRAG family).

On the first query the defense builds, once, a DP keyword-histogram synthetic corpus from the
index it serves (``synthetic_corpus``: Laplace(K/eps) on the counts of a public vocabulary, each
document contributing at most K words; the synthetic passages are post-processing). From then on
``rewrite_context`` replaces the retrieved passages by the k synthetic passages most similar to
the query under the public embedder, so the LLM never sees a private passage.

Guarantee: eps-DP for add/remove of one document, for the synthetic corpus and by
post-processing for every later answer and citation: ``OneTimeRelease(eps, 0)``, flat in T,
boundary ``synthetic-corpus``. The proof sketch and the utility caveat are in
``synthetic_corpus``. The private retrieval still runs in the pipeline, but nothing it returns
reaches the prompt or the answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np
from pydantic import Field

from ragleak.accounting.guarantee import Assumption, DocumentUnit, Guarantee, OneTimeRelease
from ragleak.defenses.base import Defense, DefenseParams
from ragleak.defenses.synthetic_corpus import (
    WORDNET_ROOT,
    document_keywords,
    load_vocabulary,
    noisy_keyword_histogram,
    synthesize_passages,
)
from ragleak.errors import RagleakError
from ragleak.records import Passage, Turn


class DPSyntheticParams(DefenseParams):
    epsilon: float = Field(default=2.0, gt=0, description="eps of the one-time release")
    keywords_per_doc: int = Field(default=8, ge=1, description="K: distinct words a document may contribute")
    n_passages: int = Field(default=6, ge=1, description="synthetic passages to build")
    words_per_passage: int = Field(default=8, ge=1)
    k: int = Field(default=3, ge=1, description="synthetic passages served per query")
    vocabulary_root: Path = Field(default=WORDNET_ROOT, description="folder with WordNet's index.<pos> files")


class DPSynthetic(Defense):
    name: ClassVar[str] = "dp-synthetic"
    version: ClassVar[str] = "2"
    epsilon_param: ClassVar[str | None] = "epsilon"
    hooks = frozenset({"rewrite_context"})
    Params = DPSyntheticParams

    def __init__(self, params=None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self.synthetic: list[Passage] | None = None
        self._vectors: np.ndarray | None = None
        self._embedder = None
        self.builds = 0

    def build(self, passages: Sequence[Passage], embedder) -> list[Passage]:
        """Build the synthetic corpus from the private passages (once; later calls reuse it)."""
        if self.synthetic is not None:
            return self.synthetic
        p = self.params
        vocabulary = load_vocabulary(Path(p.vocabulary_root))
        vocab_set = frozenset(vocabulary)
        by_doc: dict[str, list[str]] = {}
        for passage in passages:
            by_doc.setdefault(passage.doc_id, []).append(passage.text)
        keywords = [document_keywords("\n".join(texts), vocab_set, p.keywords_per_doc) for texts in by_doc.values()]
        noisy = noisy_keyword_histogram(keywords, vocabulary, p.keywords_per_doc, p.epsilon,
                                        self.ctx.noise_rng(f"defense/{self.name}"))
        self.synthetic = synthesize_passages(noisy, vocabulary, embedder, p.n_passages, p.words_per_passage)
        self._vectors = embedder.encode([s.text for s in self.synthetic])
        self._embedder = embedder
        self.builds += 1
        return self.synthetic

    def begin_query(self, index, history: Sequence[Turn], principal: str | None = None) -> None:
        if self.synthetic is None:
            self.build(index.passages, index.embedder)

    def rewrite_context(self, query: str, passages: list[Passage]) -> list[Passage]:
        if self.synthetic is None or self._embedder is None:
            raise RagleakError("dp-synthetic has no synthetic corpus yet: run it through RAGPipeline "
                               "(which calls begin_query) or call build(passages, embedder) first")
        q = self._embedder.encode([query])[0]
        order = np.argsort(-(self._vectors @ q), kind="stable")[: self.params.k]
        return [self.synthetic[int(i)] for i in order]

    def guarantee(self) -> Guarantee:
        p = self.params
        return Guarantee(
            unit=DocumentUnit(), scope=OneTimeRelease(eps0=p.epsilon, delta0=0.0), boundary="synthetic-corpus",
            noise=self.ctx.noise,
            retrieval_randomised=False, adjacency="add-remove",
            assumptions=(
                Assumption(name="contribution-bounded", statement="one document moves the keyword counts by at most K",
                           met=True, detail=f"a document's passages are joined and give at most K={p.keywords_per_doc} "
                                            "distinct words"),
                Assumption(name="public-vocabulary", statement="the vocabulary is fixed before any private data is seen",
                           met=True, detail=f"WordNet lemmas under {p.vocabulary_root}"),
            ),
            notes=(f"DP keyword-histogram synthetic corpus (simplified DP-SynRAG stage 1a): Laplace(K/eps) on "
                   f"public-vocabulary counts, K={p.keywords_per_doc}, eps={p.epsilon:g}; built once, every "
                   "query is post-processing; add/remove adjacency"),
        )
