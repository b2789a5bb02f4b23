"""``private-rag``: multi-query RAG with per-document privacy filters (MuRAG: Wu, Wang,
Zhang, Wang 2025, arXiv 2511.07637).

For the t-th query q_t (Wu et al. 2025, MuRAG with a fixed threshold):

    A_t  = {z : E_t(z) >= eps_q}              active documents (E_0(z) = M * eps_q)
    D_qt = {z in A_t : r(z, q_t) > tau}        tau is a public constant
    E(z) -= eps_q  for every z in D_qt         charged whether or not it is finally used
    voters = top-k of D_qt (one passage per document); empty voter slots abstain
    a_t  = an eps_q-DP answer from the voters  (``private_generation``: public-candidate
                                                token voting, eps_q / max_new_tokens per token)

Why this is a per-document filter: whether z passes tau depends only on z and q_t, so removing a
document changes no other document's charge or membership, and only adds, removes or changes one voter;
the answer is eps_q-DP in each voter; a retired document is never touched again. Hence for any
number T of (adaptive) queries each document's loss is at most min(T, M) * eps_q <= M * eps_q
(Feldman & Zrnic 2021, pure-DP case), which is the ``PerDocumentFilter`` guarantee.

Assumptions, checked on the card: documents are the unit (a document's passages share one
budget, and only its best passage can vote); every document is scored against tau on every query
(``corpus_pool``: the whole flat index, not the pipeline's top ``candidate_k``, whose exact
truncation would be data-dependent; a query whose pool did not cover the corpus is counted in
``truncated_queries`` and voids the card); which documents were used is not randomised, so
showing citations voids the claim.

Where the charges live: a ``budget_store.Ledger`` in the run context's ``budgets`` file (``ragleak
serve`` keeps it beside the index: a restart or ``kill -9`` resets no document's charges; a query's
charges are committed in ``score_retrieval``, before any token is generated), or in memory for an
audit. The card's scope names the place. The public prompt is decoded alone
(``private_generation``), so the candidate tokens cannot depend on the private documents.

Observability: ``log`` holds, per query index t, the number of relevant documents, how many were
charged, the active-set size (over the served index) and the voting agreement, so the audit can
plot utility against t as documents retire.
"""

from __future__ import annotations

from typing import ClassVar, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ragleak.accounting.filters import DocumentFilter
from ragleak.accounting.guarantee import Assumption, DocumentUnit, Guarantee, PerDocumentFilter
from ragleak.context import RunContext
from ragleak.defenses.base import Defense, DefenseParams
from ragleak.defenses.budget_store import MEMORY, Ledger
from ragleak.defenses.corpus_pool import CorpusPool
from ragleak.defenses.private_generation import VoteSettings, private_answer
from ragleak.rag.generator import Generator
from ragleak.rag.multiseq import LlamaMultiSequence, decoder_for
from ragleak.rag.prompt import ChatMessage, parse_rag_messages
from ragleak.records import Passage, Scored, Turn


class PrivateRAGParams(DefenseParams):
    eps_q: float = Field(default=20.0, gt=0, description="eps charged to each relevant document per query")
    max_charges: int = Field(default=2, ge=1, description="M: uses before a document retires")
    tau: float = Field(default=0.3, description="public relevance threshold on the similarity score")
    voters: int = Field(default=3, ge=1, description="k voters (passages) per answer")
    max_new_tokens: int = Field(default=10, ge=1, description="answer length; eps per token = eps_q / this")
    candidates: int = Field(default=20, ge=2, description="public candidate tokens per step")
    public_weight: float = Field(default=0.5, ge=0, description="public vote for the no-context model's top token")


class QueryLog(BaseModel):
    model_config = ConfigDict(frozen=True)

    t: int
    relevant: int
    charged: int
    active_docs: int | None
    real_voters: int = 0
    agreement: float | None = None
    tokens: int = 0


class LedgerFilter(DocumentFilter):
    """``DocumentFilter``'s bookkeeping with its charge counts in a ``Ledger`` (durable when the
    ledger is a file); a charge is re-checked against the stored count inside its transaction."""

    def __init__(self, eps_q: float, max_charges: int, ledger: Ledger) -> None:
        super().__init__(eps_q, max_charges)
        self.ledger = ledger

    def is_active(self, doc_id: str) -> bool:
        return self.ledger.count(doc_id) < self.max_charges

    def charge(self, doc_ids: Iterable[str]) -> list[str]:
        return self.ledger.charge(doc_ids, self.max_charges)

    def spent(self, doc_id: str) -> float:
        return self.ledger.count(doc_id) * self.eps_q

    def retired(self) -> list[str]:
        return sorted(d for d, c in self.ledger.counts().items() if c >= self.max_charges)

    def max_spent(self) -> float:
        return max(self.ledger.counts().values(), default=0) * self.eps_q


class PrivateRAG(Defense):
    name: ClassVar[str] = "private-rag"
    version: ClassVar[str] = "3"
    epsilon_param: ClassVar[str | None] = "eps_q"
    hooks = frozenset({"score_retrieval", "generate"})
    Params = PrivateRAGParams

    def __init__(self, params=None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self._filter: LedgerFilter | None = None
        self.log: list[QueryLog] = []
        self.corpus = CorpusPool()
        self._corpus: list[str] | None = None
        self._decoder: LlamaMultiSequence | None = None

    def prepare(self, ctx: RunContext) -> None:
        super().prepare(ctx)
        if self._filter is not None and self._filter.ledger.path != ctx.budgets:
            self._filter = None  # opened in this context's budget store on first use
        if ctx.budgets is not None:
            _ = self.filter  # a file is opened now: a bad file or changed terms fail before the first query

    @property
    def filter(self) -> LedgerFilter:
        """Per-document charges, in the run context's budget store (memory when it names none);
        the ledger's terms are what a count means: eps_q per charge, retired after M."""
        if self._filter is None:
            p = self.params
            ledger = Ledger(self.ctx.budgets, self.name, {"eps_q": p.eps_q, "max_charges": p.max_charges})
            self._filter = LedgerFilter(p.eps_q, p.max_charges, ledger)
        return self._filter

    @property
    def truncated_queries(self) -> int:
        return self.corpus.truncated_queries

    def begin_query(self, index, history: Sequence[Turn], principal: str | None = None) -> None:
        self.corpus.observe(index)
        self._corpus = list(index.doc_ids)

    def active_set_size(self) -> int | None:
        return None if self._corpus is None else self.filter.active_count(self._corpus)

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        p = self.params
        pool = self.corpus.document_pool(query, candidates)
        rows = pool.best_rows()
        # text is read only for the documents above the public threshold (scores come from the vectors)
        relevant = [d for d in pool.take(rows[pool.scores[rows] > p.tau]) if self.filter.is_active(d.passage.doc_id)]
        # committed before any token is generated; only documents whose charge went through may
        # vote (another server sharing the ledger may have retired one since this one last read)
        charged = self.filter.charge([s.passage.doc_id for s in relevant])
        paid = set(charged)
        self.log.append(QueryLog(t=len(self.log) + 1, relevant=len(relevant), charged=len(charged),
                                 active_docs=self.active_set_size()))
        return [s for s in relevant if s.passage.doc_id in paid][: p.voters]

    def generate(self, messages: Sequence[ChatMessage], passages: list[Passage], generator: Generator) -> str:
        p = self.params
        system, query, history = parse_rag_messages(messages, passages)
        self._decoder = decoder_for(generator, self._decoder)
        settings = VoteSettings(eps_token=p.eps_q / p.max_new_tokens, max_new_tokens=p.max_new_tokens,
                                voters=p.voters, candidates=p.candidates, public_weight=p.public_weight)
        result = private_answer(system, query, history, passages, generator.render, self._decoder, settings,
                                self.ctx.noise_rng(f"defense/{self.name}"))
        if self.log:
            self.log[-1] = self.log[-1].model_copy(update={"real_voters": result.real_voters,
                                                           "agreement": result.agreement, "tokens": result.tokens})
        return result.text

    def state(self) -> dict:
        """What this run did, for the cell record: the per-query log U(t) and retirements."""
        return {"log": [entry.model_dump(mode="json") for entry in self.log],
                "retired": len(self.filter.retired()), "truncated_queries": self.truncated_queries}

    def guarantee(self) -> Guarantee:
        p = self.params
        pool = self.corpus.assumption()
        if self.truncated_queries:
            pool = pool.model_copy(update={"met": False, "detail": f"{self.truncated_queries} queries scored a truncated "
                                                                   f"pool ({pool.detail})"})
        return Guarantee(
            unit=DocumentUnit(), noise=self.ctx.noise,
            scope=PerDocumentFilter(eps_q=p.eps_q, max_charges=p.max_charges,
                                    ledger=MEMORY if self.ctx.budgets is None else str(self.ctx.budgets)),
            boundary="answers", retrieval_randomised=False, adjacency="add-remove",
            max_chunks=self.corpus.facts.max_chunks if self.corpus.facts else None,
            assumptions=(
                pool,
                Assumption(name="one-voter-per-document",
                           statement="a document is charged once per query and reaches at most one voter",
                           met=True, detail="one entry per document (its best passage) passes tau and votes"),
                Assumption(name="model-not-trained-on-corpus",
                           statement="the LLM's weights hold nothing of the corpus (its no-retrieval prompt is public)",
                           met=None, detail="cannot be checked in code"),
            ),
            notes=(f"per-document filter (MuRAG): tau={p.tau:g}, eps_q={p.eps_q:g} charged per relevant query, "
                   f"retired after M={p.max_charges}; answers by public-candidate token voting "
                   f"({p.voters} voters, eps {p.eps_q / p.max_new_tokens:g} per token)"),
        )
