"""The DP token-release mechanisms of ``dp-vote`` (Koga et al. DPVoteRAG / DPSparseVoteRAG),
as pure functions of vote histograms, so they can be tested without an LLM.

Setting. m voters, each holding a disjoint group of retrieved documents. At step t every voter
reads its next-token distribution given (query, its documents, the released prefix y_<t).

Candidate domain (public). The domain C_t is the top-c tokens of the *no-retrieval* distribution
(query and released prefix only, no documents) plus the end-of-turn tokens. It depends on no
private document, so choosing it costs nothing; restricting the vote to it is what keeps the
noise meaningful (over the full 150k-token vocabulary the noise of any useful epsilon drowns the
m votes). Each voter votes for its most likely token *within* C_t; H_t[v] = #{i : vote_i = v}.

Sensitivity. Adding or removing one document changes at most one voter's group (random
partition, see ``dp_vote``), hence at most one vote: H_t moves by -1 in one bin and +1 in
another, so every count has sensitivity Delta = 1.

DPVoteRAG release (``VoteReleaser``). Exponential mechanism with utility H_t:
P[y_t = v] = exp(eps * H_t[v] / 2) / sum_u exp(eps * H_t[u] / 2), sampled exactly by Gumbel-max
(argmax H_t[v] + Gumbel(scale 2/eps)). eps-DP per released token (the standard 2*Delta factor,
since counts are not monotone under one voter switching). T tokens compose to T*eps (pure DP,
adaptive basic composition; tighter accountants apply too).

DPSparseVoteRAG release (``SparseVoteReleaser``). Let b_t be the public greedy token and
s_t = H_t[b_t] (sensitivity 1). AboveThreshold (Dwork & Roth Alg. 1) with eps_svt = eps0/2:
noisy threshold theta_hat = theta + Lap(2/eps_svt); at each step a discovery ("the voters disagree
with the public token") is declared when s_t + Lap(4/eps_svt) <= theta_hat. Without a discovery
y_t = b_t, which depends on public data only. On a discovery y_t is released by the exponential
mechanism above with eps_em = eps0/2, and the SVT restarts with a fresh threshold. Each SVT round
costs eps_svt whether or not it halts and each discovery eps_em; with at most c discoveries (the
caller stops after the c-th) at most c rounds start, so the whole answer is c*eps0-DP (pure).
"""

from __future__ import annotations

import numpy as np


def candidate_domain(public_logprobs: np.ndarray, size: int, always: list[int]) -> np.ndarray:
    """The public top-``size`` tokens of the no-retrieval distribution, plus ``always`` (end tokens)."""
    top = np.argsort(-public_logprobs, kind="stable")[:size]
    extra = [t for t in always if t not in set(top.tolist())]
    return np.concatenate([top, np.array(extra, dtype=top.dtype)])


def vote_histogram(voter_logprobs: np.ndarray, domain: np.ndarray) -> np.ndarray:
    """H[j] = number of voters whose most likely token within ``domain`` is ``domain[j]``."""
    votes = np.argmax(voter_logprobs[:, domain], axis=1)
    return np.bincount(votes, minlength=len(domain)).astype(np.float64)


def em_probabilities(counts: np.ndarray, epsilon: float) -> np.ndarray:
    """The exponential mechanism's output distribution over the bins of ``counts`` (Delta = 1)."""
    scores = epsilon * np.asarray(counts, dtype=np.float64) / 2.0
    weights = np.exp(scores - scores.max())
    return weights / weights.sum()


def em_release(counts: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
    """One draw from ``em_probabilities`` via Gumbel-max: argmax(counts + Gumbel(2/eps))."""
    if epsilon <= 0:
        return int(rng.integers(len(counts)))
    noisy = np.asarray(counts, dtype=np.float64) + rng.gumbel(scale=2.0 / epsilon, size=len(counts))
    return int(np.argmax(noisy))


class VoteReleaser:
    """DPVoteRAG: every token is a private vote; eps_token-DP each."""

    def __init__(self, eps_token: float, rng: np.random.Generator) -> None:
        self.eps_token, self.rng = eps_token, rng
        self.private_releases = 0

    @property
    def exhausted(self) -> bool:
        return False

    def release(self, counts: np.ndarray, public_index: int) -> int:
        self.private_releases += 1
        return em_release(counts, self.eps_token, self.rng)


class SparseVoteReleaser:
    """DPSparseVoteRAG: pay only when the voters disagree with the public token (SVT + EM)."""

    def __init__(self, eps0: float, threshold: float, max_discoveries: int, rng: np.random.Generator) -> None:
        if eps0 <= 0:
            raise ValueError("eps0 must be positive")
        self.eps_svt = self.eps_em = eps0 / 2.0
        self.threshold, self.max_discoveries, self.rng = threshold, max_discoveries, rng
        self.private_releases = 0
        self._refresh()

    def _refresh(self) -> None:
        self.noisy_threshold = self.threshold + self.rng.laplace(scale=2.0 / self.eps_svt)

    @property
    def exhausted(self) -> bool:
        return self.private_releases >= self.max_discoveries

    def release(self, counts: np.ndarray, public_index: int) -> int:
        if self.exhausted:
            raise RuntimeError("the discovery budget is spent; the caller must stop")
        agree = float(counts[public_index])
        if agree + self.rng.laplace(scale=4.0 / self.eps_svt) > self.noisy_threshold:
            return public_index
        self.private_releases += 1
        self._refresh()
        return em_release(counts, self.eps_em, self.rng)
