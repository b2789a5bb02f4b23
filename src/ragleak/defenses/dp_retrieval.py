"""``dp-retrieval`` (DP-R): differentially private top-k selection of documents on clipped similarity scores.

Mechanism (Laplace noise on every clipped score, then top-k: post-processing of an eps-DP
release). For a query q, over *every document* d_1..d_n of the served index (``corpus_pool``:
the flat index scores every passage exactly; a document's score is the max over its passages):

    s_i = clip(max_{p in d_i} sim(q, p), a, b)     public bounds, default [0, 1] for cosine
    laplace mode:  s~_i = s_i + Lap((b - a) / eps)     keep the k largest s~
    gumbel  mode:  s~_i = s_i + Gumbel(2 k (b - a) / eps) keep the k largest s~

The k selected documents come back, each as its best passage: with s~ as its score (laplace) or
scored by rank (gumbel), so the pipeline's top-k by score *is* the DP selection.

At scale (issue 39): the s_i come from one vectorised pass over the index's stored vectors
(``PassageIndex.document_pool``: FAISS's own flat-search kernel, the same float32 scores as its
exact search, max per document by ``np.maximum.reduceat``), the noise is drawn per document in
document id order (fixed before any score is seen), the top k found in O(n), and only the k
selected passages are read from the passage store: about one flat search per query. Nothing of
the mechanism or its sensitivity argument changes; only which noise draw lands on which document
for a given seed (version 3: seeded runs of version 2 select differently, equally distributed).

Sensitivity argument. The query is public (the attacker chooses it). Neighbouring corpora differ
by *substituting* one document's content, ids being slots (add/remove is impossible for selection:
the neighbour lacks the candidate). Substitution moves one coordinate of the document score
vector - one coordinate however many passages the document has, since the score is per document
- and after clipping by at most Delta = b - a, so the L1 and L_inf sensitivities are both Delta.
Laplace(Delta/eps) on every coordinate is then an eps-DP release of the whole noisy vector and
its top-k is post-processing; the Gumbel mode is k exponential-mechanism rounds at eps/k each
(see ``dp_select``). Clipping bounds must not be chosen from the corpus.

Assumptions, stated and checked in ``guarantee()`` (a violated one voids the card):
* the pool is the whole corpus: the default; a user-set ``pool`` smaller than the corpus, an
  index beyond ``corpus_pool.WHOLE_CORPUS_LIMIT`` passages or an approximate index violate it;
* one unit per document: the default ``aggregate="document"``; ``aggregate="passage"`` noises
  every passage (the pre-issue-14 mechanism) and the card pays group privacy over the most
  passages of one document in the served index;
* the guarantee covers *which documents are selected* (boundary ``retrieved-ids``): the LLM then
  reads the selected passages verbatim, so answers are not DP;
* each query costs eps; T queries compose (Laplace mode is accounted exactly as a Laplace
  mechanism of noise multiplier 1/eps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal, Sequence

from pydantic import Field, model_validator

from ragleak.accounting.guarantee import Assumption, DocumentUnit, Guarantee, PerResponse
from ragleak.defenses.base import Defense, DefenseParams
from ragleak.defenses.corpus_pool import CorpusPool
from ragleak.defenses.dp_select import noisy_selection
from ragleak.records import Scored, Turn

if TYPE_CHECKING:
    from ragleak.rag.index import PassageIndex


class DPRetrievalParams(DefenseParams):
    epsilon: float = Field(default=1.0, gt=0, description="eps per query for the selection")
    mode: Literal["laplace", "gumbel"] = "laplace"
    clip_low: float = Field(default=0.0, description="a: public lower clip bound on the similarity")
    clip_high: float = Field(default=1.0, description="b: public upper clip bound on the similarity")
    k: int = Field(default=5, ge=1, description="documents selected per query (the pipeline's top_k)")
    pool: int | None = Field(default=None, ge=1, description=(
        "None: select over every document (the guarantee needs it); n: only the n best documents "
        "(voids the card when the corpus is larger)"))
    aggregate: Literal["document", "passage"] = Field(default="document", description=(
        "document: one score per document (max over its passages); passage: noise per passage, the "
        "card pays group privacy over the most passages per document"))

    @model_validator(mode="after")
    def _bounds(self):
        if not self.clip_high > self.clip_low:
            raise ValueError("clip_high must exceed clip_low")
        return self


class DPRetrieval(Defense):
    name: ClassVar[str] = "dp-retrieval"
    version: ClassVar[str] = "3"
    epsilon_param: ClassVar[str | None] = "epsilon"
    hooks = frozenset({"score_retrieval"})
    Params = DPRetrievalParams

    def __init__(self, params=None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self.corpus = CorpusPool(self.params.pool)

    @property
    def sensitivity(self) -> float:
        return self.params.clip_high - self.params.clip_low

    def begin_query(self, index: "PassageIndex", history: Sequence[Turn], principal: str | None = None) -> None:
        self.corpus.observe(index)

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        p = self.params
        pool = (self.corpus.document_pool(query, candidates) if p.aggregate == "document"
                else self.corpus.passage_pool(query, candidates))
        return noisy_selection(pool, p.k, p.epsilon, p.clip_low, p.clip_high, p.mode, self.ctx.noise_rng(f"defense/{self.name}"),
                               sensitivity=self.sensitivity)

    def state(self) -> dict:
        return {"truncated_queries": self.corpus.truncated_queries}

    def guarantee(self) -> Guarantee:
        g = retrieval_guarantee(self.params.epsilon, self.params, self.corpus, self.sensitivity)
        return g.model_copy(update={"noise": self.ctx.noise})


def retrieval_guarantee(eps: float, p: DPRetrievalParams, corpus: CorpusPool, sensitivity: float,
                        scope: PerResponse | None = None, notes: str = "") -> Guarantee:
    """The card of a DP top-k selection over ``corpus`` (dp-retrieval; ca-dp passes its budgeted scope)."""
    mode = getattr(p, "mode", "laplace")
    aggregate = getattr(p, "aggregate", "document")
    if scope is None:
        scope = (PerResponse(eps_q=eps, mechanism="laplace", noise_multiplier=1.0 / eps) if mode == "laplace"
                 else PerResponse(eps_q=eps, mechanism="exponential"))
    facts = corpus.facts
    unit = Assumption(
        name="one-unit-per-document",
        statement="one document moves one score (a document's passages are aggregated, or group privacy is paid)",
        met=True, detail=("one score per document (max over its passages)" if aggregate == "document" else
                          "noise per passage; group privacy over "
                          + (f"max {facts.max_chunks} passages per document" if facts else "an unknown chunk count")))
    clip = Assumption(name="public-clip-bounds", statement="the clip bounds are fixed without looking at the corpus",
                      met=(p.clip_low, p.clip_high) == (0.0, 1.0) or None,
                      detail=f"[{p.clip_low:g}, {p.clip_high:g}]" + (" (the default constants)"
                                                                     if (p.clip_low, p.clip_high) == (0.0, 1.0) else
                                                                     ": user-set, cannot be checked"))
    return Guarantee(
        unit=DocumentUnit(), scope=scope, boundary="retrieved-ids", retrieval_randomised=True,
        retrieval_eps_q=eps, adjacency="substitution", mechanism_unit=aggregate,
        max_chunks=facts.max_chunks if facts else None, assumptions=(corpus.assumption(), unit, clip),
        notes=notes or (f"DP for the retrieval selection only ({mode}, scores clipped to [{p.clip_low:g}, "
                        f"{p.clip_high:g}], Delta={sensitivity:g}) over every document; answers quote the "
                        "selected passages and are not DP"),
    )
