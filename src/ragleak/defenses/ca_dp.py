"""``ca-dp``: composition-aware DP over a multi-turn conversation (the "CA-DP"
defense named by Mind the Hook, arXiv 2608.09001, which does not specify it; this is our version).

Each conversation gets a budget (eps_conv, delta). Each turn runs one per-turn mechanism - here
DP top-k selection of the retrieved passages (``dp-retrieval``'s Laplace mechanism on clipped
scores, eps_turn per turn, substitution adjacency) - and the accountant decides before the
first turn how many turns the budget affords:

    N = max { n : eps(n turns of Laplace(Delta / eps_turn), delta) <= eps_conv }

with eps(n) from the chosen accountant (``tight``: dp-accounting PLD, never above basic n *
eps_turn; or ``basic`` / ``rdp``). The per-turn parameter is fixed in advance, so ordinary
(non-adaptive) composition applies over the N turns. From turn N + 1 on the conversation falls
back to a no-retrieval answer: ``rewrite_context`` hands the LLM no passages at all, so that turn
touches no document.

A conversation starts when the pipeline answers a query with an empty history (it tells the
defense through ``begin_query``): a single-turn query is a conversation of one turn.

Scope, honestly: the budget bounds what *one conversation* learns about the retrieval selection.
An attacker can open new conversations, so there is no corpus-level bound across conversations
and, like every retrieval-side mechanism, the answers quote the selected passages, so
the claim covers the retrieved ids, not the answer text. Earlier answers travel in the history;
they were built from DP-selected passages and are accounted as part of the same conversation.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Sequence

from pydantic import Field, model_validator

from ragleak.accounting.composition import DEFAULT_DELTA, epsilon_after, max_queries_within
from ragleak.accounting.guarantee import DocumentUnit, Guarantee, PerResponse
from ragleak.defenses.base import Defense, DefenseParams
from ragleak.defenses.dp_select import clip_scores, laplace_noisy_scores
from ragleak.records import Passage, Scored, Turn


class CompositionAwareDPParams(DefenseParams):
    conversation_epsilon: float = Field(default=4.0, gt=0, description="eps budget per conversation")
    turn_epsilon: float = Field(default=1.0, gt=0, description="eps spent by each answered turn")
    delta: float = Field(default=DEFAULT_DELTA, gt=0, lt=1, description="delta of the conversation budget")
    accountant: Literal["tight", "basic", "rdp"] = "tight"
    clip_low: float = 0.0
    clip_high: float = 1.0

    @model_validator(mode="after")
    def _bounds(self):
        if not self.clip_high > self.clip_low:
            raise ValueError("clip_high must exceed clip_low")
        if self.turn_epsilon > self.conversation_epsilon:
            raise ValueError("turn_epsilon must not exceed conversation_epsilon")
        return self


class CompositionAwareDP(Defense):
    name: ClassVar[str] = "ca-dp"
    version: ClassVar[str] = "1"
    epsilon_param: ClassVar[str | None] = "conversation_epsilon"
    hooks = frozenset({"score_retrieval", "rewrite_context"})
    Params = CompositionAwareDPParams

    def __init__(self, params=None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self.max_turns = max_queries_within(self._turn_guarantee(None), self.params.conversation_epsilon,
                                            method=self.params.accountant, delta=self.params.delta)
        self.turns_answered = 0     # in the current conversation
        self.conversations = 0
        self.refused_turns = 0
        self._refuse = False

    def _turn_guarantee(self, max_queries: int | None) -> Guarantee:
        eps = self.params.turn_epsilon
        return Guarantee(unit=DocumentUnit(), boundary="retrieved-ids", retrieval_randomised=True,
                         scope=PerResponse(eps_q=eps, mechanism="laplace", noise_multiplier=1.0 / eps,
                                           max_queries=max_queries))

    def begin_query(self, index, history: Sequence[Turn]) -> None:
        if not history:
            self.conversations += 1
            self.turns_answered = 0
        self._refuse = self.turns_answered >= self.max_turns
        if self._refuse:
            self.refused_turns += 1
        else:
            self.turns_answered += 1

    def spent(self) -> float:
        """eps spent so far in the current conversation (by the configured accountant)."""
        return epsilon_after(self._turn_guarantee(None), self.turns_answered, method=self.params.accountant,
                             delta=self.params.delta).eps

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        if self._refuse or not candidates:
            return candidates  # the fallback turn uses no passages (rewrite_context)
        p = self.params
        clipped = clip_scores([c.score for c in candidates], p.clip_low, p.clip_high)
        noisy = laplace_noisy_scores(clipped, p.turn_epsilon, p.clip_high - p.clip_low, self.ctx.rng(f"defense/{self.name}"))
        return [c.model_copy(update={"score": float(s)}) for c, s in zip(candidates, noisy)]

    def rewrite_context(self, query: str, passages: list[Passage]) -> list[Passage]:
        return [] if self._refuse else passages

    def guarantee(self) -> Guarantee:
        p = self.params
        g = self._turn_guarantee(max(self.max_turns, 1))
        return g.model_copy(update={"notes": (
            f"per conversation: budget eps={p.conversation_epsilon:g} (delta={p.delta:g}, {p.accountant} accountant) "
            f"affords {self.max_turns} turns of Laplace DP top-k at eps={p.turn_epsilon:g}; later turns answer "
            "without retrieval; a new conversation starts a fresh budget (no corpus-level bound); "
            "retrieval selection only, answers are not DP")})
