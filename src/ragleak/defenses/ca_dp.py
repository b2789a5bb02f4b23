"""``ca-dp``: composition-aware DP retrieval with a budget per principal (the "CA-DP" defense
named by Mind the Hook, arXiv 2608.09001, which does not specify it; this is our version).

Each query that gets retrieval runs one per-turn mechanism - ``dp-retrieval``'s Laplace top-k
selection of documents over the whole corpus (one clipped score per document, eps_turn per turn,
substitution adjacency) - and a budget (eps_budget, delta) decides before the first query how many
such queries it affords:

    N = max { n : eps(n turns of Laplace(Delta / eps_turn), delta) <= eps_budget }

with eps(n) from the chosen accountant (``tight``: dp-accounting PLD, never above basic n *
eps_turn; or ``basic`` / ``rdp``). The per-turn parameter is fixed in advance, so ordinary
(non-adaptive) composition applies over the N turns. From the (N + 1)-th charged query on, the
defense falls back to a no-retrieval answer: ``rewrite_context`` hands the LLM no passages, so
that turn touches no document.

Who is charged (``budget_scope``):

* ``principal`` (the default): one budget per client id the target is told (``begin_query``'s
  ``principal``, from ``PipelineTarget(pipeline, principal=...)``); requests that name none share
  one budget, the whole stream's. New conversations (requests with an empty history) never reset
  a budget; a new client id starts a fresh one. An adversary who can present new ids gets
  eps_turn per query without a cap, so the card's eps(T) is that worst case - T turns composed,
  the same as ``dp-retrieval`` at eps_turn - and it states the per-id cap beside it.
* ``stream``: every query the target answers, from anyone, is charged to one budget whatever id
  it names. Nothing resets, so eps(T) <= eps_budget for the whole stream: a corpus-level bound,
  bought by answering every query after the N-th without retrieval.

Where the charges live: a ``budget_store.Ledger`` in the run context's ``budgets`` file (``ragleak
serve`` keeps it beside the index, so a restart or ``kill -9`` resets nothing; a query is charged,
durably, in ``begin_query``, before retrieval runs), or in memory for an audit. The card's scope
names the place.

``conversation_epsilon`` keeps its name (grids and presets set it) but is the budget of the scope
above, not of a conversation. Like every retrieval-side mechanism the claim covers the retrieved
ids, not the answer text, which quotes the selected passages.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Sequence

from pydantic import Field, model_validator

from ragleak.accounting.composition import DEFAULT_DELTA, epsilon_after, max_queries_within
from ragleak.accounting.guarantee import Assumption, DocumentUnit, Guarantee, PerResponse
from ragleak.context import RunContext
from ragleak.defenses.base import Defense, DefenseParams
from ragleak.defenses.budget_store import MEMORY, Ledger
from ragleak.defenses.corpus_pool import CorpusPool
from ragleak.defenses.dp_retrieval import retrieval_guarantee
from ragleak.defenses.dp_select import noisy_selection
from ragleak.records import Passage, Scored, Turn

ANONYMOUS = ""  # the shared budget of requests that name no principal


class CompositionAwareDPParams(DefenseParams):
    conversation_epsilon: float = Field(default=4.0, gt=0, description="eps budget of the budget scope (see budget_scope)")
    turn_epsilon: float = Field(default=1.0, gt=0, description="eps spent by each query answered with retrieval")
    delta: float = Field(default=DEFAULT_DELTA, gt=0, lt=1, description="delta of the budget")
    accountant: Literal["tight", "basic", "rdp"] = "tight"
    budget_scope: Literal["principal", "stream"] = Field(default="principal", description=(
        "principal: one budget per client id (requests without one share the stream's); stream: one budget for all"))
    clip_low: float = 0.0
    clip_high: float = 1.0
    k: int = Field(default=5, ge=1, description="documents selected per query (the pipeline's top_k)")
    pool: int | None = Field(default=None, ge=1, description="None: every document; n: the n best (voids the card)")

    @model_validator(mode="after")
    def _bounds(self):
        if not self.clip_high > self.clip_low:
            raise ValueError("clip_high must exceed clip_low")
        if self.turn_epsilon > self.conversation_epsilon:
            raise ValueError("turn_epsilon must not exceed conversation_epsilon")
        return self


class CompositionAwareDP(Defense):
    name: ClassVar[str] = "ca-dp"
    version: ClassVar[str] = "3"
    epsilon_param: ClassVar[str | None] = "conversation_epsilon"
    hooks = frozenset({"score_retrieval", "rewrite_context"})
    Params = CompositionAwareDPParams

    def __init__(self, params=None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self.max_turns = max_queries_within(self._turn_guarantee(), self.params.conversation_epsilon,
                                            method=self.params.accountant, delta=self.params.delta)
        self.corpus = CorpusPool(self.params.pool)
        self._ledger: Ledger | None = None  # queries answered with retrieval, per budget key
        self.conversations = 0
        self.refused_turns = 0
        self._key = ANONYMOUS
        self._refuse = False

    def prepare(self, ctx: RunContext) -> None:
        super().prepare(ctx)
        if self._ledger is not None and self._ledger.path != ctx.budgets:
            self._ledger = None  # opened in this context's budget store on first use
        if ctx.budgets is not None:
            self.ledger()  # a file is opened now: a bad file or changed terms fail before the first query

    def ledger(self) -> Ledger:
        """The charges, in the run context's budget store (memory when it names none). Its terms
        are what a count means: a turn's mechanism and the budget that caps the counts."""
        if self._ledger is None:
            terms = self.params.model_dump(mode="json", include={
                "turn_epsilon", "conversation_epsilon", "delta", "accountant", "budget_scope", "clip_low", "clip_high"})
            self._ledger = Ledger(self.ctx.budgets, self.name, terms)
        return self._ledger

    @property
    def charged(self) -> dict[str, int]:
        """Queries answered with retrieval, per budget key."""
        return self.ledger().counts()

    def _turn_guarantee(self) -> Guarantee:
        eps = self.params.turn_epsilon
        return Guarantee(unit=DocumentUnit(), boundary="retrieved-ids", retrieval_randomised=True,
                         scope=PerResponse(eps_q=eps, mechanism="laplace", noise_multiplier=1.0 / eps))

    def budget_key(self, principal: str | None) -> str:
        """Whose budget a request spends: the whole stream's, or its principal's."""
        if self.params.budget_scope == "stream":
            return "*"
        return ANONYMOUS if principal is None else principal

    def begin_query(self, index, history: Sequence[Turn], principal: str | None = None) -> None:
        self.corpus.observe(index)
        if not history:
            self.conversations += 1  # counted for the record; a new conversation resets nothing
        self._key = self.budget_key(principal)
        # durable before retrieval runs: a process killed after this line has paid for the query
        self._refuse = not self.ledger().charge([self._key], self.max_turns)
        if self._refuse:
            self.refused_turns += 1

    @property
    def turns_answered(self) -> int:
        """Queries answered with retrieval on the budget of the latest request."""
        return self.ledger().count(self._key)

    def spent(self, principal: str | None = None) -> float:
        """eps spent so far on ``principal``'s budget (the stream's in stream scope), by the accountant."""
        return epsilon_after(self._turn_guarantee(), self.ledger().count(self.budget_key(principal)),
                             method=self.params.accountant, delta=self.params.delta).eps

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        if self._refuse:
            return candidates  # the fallback turn uses no passages (rewrite_context)
        p = self.params
        # rank order keeps each row's draw where it was; only the k selected documents' text is read
        pool = self.corpus.document_pool(query, candidates).in_rank_order()
        return noisy_selection(pool, p.k, p.turn_epsilon, p.clip_low, p.clip_high,
                               "laplace", self.ctx.noise_rng(f"defense/{self.name}"))

    def rewrite_context(self, query: str, passages: list[Passage]) -> list[Passage]:
        return [] if self._refuse else passages

    def state(self) -> dict:
        return {"charged": self.charged, "refused_turns": self.refused_turns,
                "conversations": self.conversations, "truncated_queries": self.corpus.truncated_queries}

    def guarantee(self) -> Guarantee:
        p = self.params
        eps = p.turn_epsilon
        scope = PerResponse(eps_q=eps, mechanism="laplace", noise_multiplier=1.0 / eps,
                            max_queries=max(self.max_turns, 1), budget_scope=p.budget_scope,
                            ledger=MEMORY if self.ctx.budgets is None else str(self.ctx.budgets))
        if p.budget_scope == "stream":
            resets = (f"one budget eps={p.conversation_epsilon:g} for the whole stream: {self.max_turns} queries get "
                      "retrieval, then none for anyone; new conversations reset nothing")
        else:
            resets = (f"a budget eps={p.conversation_epsilon:g} per client id ({self.max_turns} queries each); new "
                      "conversations do not reset it, a new client id does: an adversary opening ids spends "
                      f"eps={eps:g} per query, uncapped (the curve)")
        g = retrieval_guarantee(eps, p, self.corpus, p.clip_high - p.clip_low, scope=scope, notes=(
            f"Laplace DP top-k of documents at eps={eps:g} per query (delta={p.delta:g}, {p.accountant} accountant); "
            f"{resets}; retrieval selection only, answers are not DP"))
        budget = Assumption(
            name="budget-scope", statement="every query answered with retrieval is charged to its scope's budget, "
                                           "and the scope is not reset by a new conversation",
            met=True, detail=resets)
        return g.model_copy(update={"assumptions": g.assumptions + (budget,), "noise": self.ctx.noise})
