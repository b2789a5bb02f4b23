"""Broken copies of the real DP defenses, each with the real card: what ``ragleak verify`` must
report ``broken`` (tests/verify/test_verify_verdicts.py runs the cheap ones, benchmarks/
bench_verify.py all of them at the default settings). Each is a real bug class: the mechanism
changed, the card not. They are loaded as file defenses (``path/broken_copies.py:Class``) too.
"""

from __future__ import annotations

from ragleak.defenses.ca_dp import CompositionAwareDP
from ragleak.defenses.dp_retrieval import DPRetrieval
from ragleak.defenses.dp_select import noisy_selection
from ragleak.defenses.dp_vote import DPVote
from ragleak.records import Passage, Scored


class HalfNoise(DPRetrieval):
    """Laplace selection with half the noise its card's epsilon needs (true eps 2 at a claim of 1)."""

    name = "dp-retrieval-half-noise"

    @property
    def sensitivity(self) -> float:
        return super().sensitivity / 2


class EightTenthsNoise(DPRetrieval):
    """0.8x the noise: true eps 1.25 at a claim of 1 (a 25% over-claim)."""

    name = "dp-retrieval-0.8-noise"

    @property
    def sensitivity(self) -> float:
        return super().sensitivity * 0.8


class TruncatedPool(DPRetrieval):
    """Selects among the pipeline's candidate_k passages instead of every document, while the
    card still claims the whole corpus (a data-dependent pool: infinite loss at the pool's edge)."""

    name = "dp-retrieval-truncated-pool"

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        best: dict[str, Scored] = {}
        for c in candidates:
            if c.passage.doc_id not in best or c.score > best[c.passage.doc_id].score:
                best[c.passage.doc_id] = c
        p = self.params
        return noisy_selection(sorted(best.values(), key=lambda s: -s.score), p.k, p.epsilon, p.clip_low,
                               p.clip_high, p.mode, self.ctx.noise_rng(f"defense/{self.name}"),
                               sensitivity=self.sensitivity)


class PassageNoise(DPRetrieval):
    """Noise per passage (every passage a unit) under the default card, which claims documents:
    a document of c passages gets c chances and moves c scores."""

    name = "dp-retrieval-passage-noise"

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        p = self.params
        return noisy_selection(self.corpus.passages(query, candidates), p.k, p.epsilon, p.clip_low, p.clip_high,
                               p.mode, self.ctx.noise_rng(f"defense/{self.name}"), sensitivity=self.sensitivity)


class EveryVoterReadsAll(DPVote):
    """Every voter's prompt holds every retrieved document: one document moves every vote."""

    name = "dp-vote-every-voter"

    def voter_groups(self, passages: list[Passage]) -> list[list[Passage]]:
        return [list(passages) for _ in range(self.params.voters)]


class NeverRefuses(CompositionAwareDP):
    """Charges the budget but answers every query with retrieval after it is spent."""

    name = "ca-dp-never-refuses"

    def begin_query(self, index, history, principal=None) -> None:
        super().begin_query(index, history, principal)
        self._refuse = False


COPIES = (HalfNoise, EightTenthsNoise, TruncatedPool, PassageNoise, EveryVoterReadsAll, NeverRefuses)
