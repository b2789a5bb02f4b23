"""Statistical tests of the DP mechanisms of lprag and dp-vote on neighbouring inputs.

Each test draws many outputs of the real mechanism function on two neighbouring inputs and
bounds the privacy loss from below with Clopper-Pearson intervals (Bonferroni over outcomes):
ln(lower(p_a(o)) / upper(p_b(o))) must not exceed the claimed epsilon for any outcome o. A
negative control shows the estimator flags a mechanism calibrated with the wrong scale.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy.stats import beta

from ragleak.defenses._ldp import choice_probabilities, choose
from ragleak.defenses._vote import (
    SparseVoteReleaser, VoteReleaser, candidate_domain, em_probabilities, em_release, vote_histogram,
)
from ragleak.defenses.lprag import CANDIDATES

ALPHA = 1e-3


def _cp(k: int, n: int, alpha: float) -> tuple[float, float]:
    lo = beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return lo, hi


def loss_lower_bound(a: list, b: list) -> float:
    """A high-confidence lower bound on max_o |ln P_a(o) / P_b(o)| from samples of both."""
    ca, cb, n = Counter(a), Counter(b), len(a)
    outcomes = set(ca) | set(cb)
    alpha = ALPHA / (2 * len(outcomes))
    best = 0.0
    for o in outcomes:
        lo_a, hi_a = _cp(ca[o], n, alpha)
        lo_b, hi_b = _cp(cb[o], n, alpha)
        if lo_a > 0:
            best = max(best, np.log(lo_a / hi_b))
        if lo_b > 0:
            best = max(best, np.log(lo_b / hi_a))
    return best


def empirical_loss(a: list, b: list, min_count: int = 500) -> float:
    ca, cb = Counter(a), Counter(b)
    return max(abs(np.log(ca[o] / cb[o])) for o in set(ca) & set(cb) if min(ca[o], cb[o]) >= min_count)


N = 60_000
# one voter moves from bin 0 to bin 1: the count vectors of neighbouring corpora
H = np.array([1.0, 5.0, 0.0])
H_NEIGHBOUR = np.array([0.0, 6.0, 0.0])


def test_em_token_release_stays_within_epsilon():
    eps = 1.0
    rng = np.random.default_rng(1)
    a = [em_release(H, eps, rng) for _ in range(N)]
    b = [em_release(H_NEIGHBOUR, eps, rng) for _ in range(N)]
    exact = np.max(np.abs(np.log(em_probabilities(H, eps) / em_probabilities(H_NEIGHBOUR, eps))))
    assert exact <= eps
    assert loss_lower_bound(a, b) <= eps
    # the sampler matches the exact distribution, and this pair is nearly worst case (power)
    assert abs(empirical_loss(a, b) - exact) < 0.1
    assert exact > 0.85 * eps


def test_the_estimator_flags_a_miscalibrated_release():
    eps = 1.0
    rng = np.random.default_rng(2)
    # Gumbel scale 1/eps instead of 2/eps: exp(eps * H), a 2*eps mechanism claimed as eps
    a = [em_release(H, 2 * eps, rng) for _ in range(N)]
    b = [em_release(H_NEIGHBOUR, 2 * eps, rng) for _ in range(N)]
    assert loss_lower_bound(a, b) > eps


def test_vote_releaser_is_the_exponential_mechanism_per_token():
    rng = np.random.default_rng(3)
    releaser = VoteReleaser(2.0, rng)
    draws = Counter(releaser.release(H, public_index=0) for _ in range(20_000))
    expected = em_probabilities(H, 2.0) * 20_000
    assert all(abs(draws[i] - expected[i]) < 5 * np.sqrt(expected[i]) + 5 for i in range(3))
    assert releaser.private_releases == 20_000 and not releaser.exhausted


def _sparse_run(counts: np.ndarray, steps: int, rng) -> tuple:
    releaser = SparseVoteReleaser(eps0=1.0, threshold=2.5, max_discoveries=2, rng=rng)
    out = []
    for _ in range(steps):
        out.append(releaser.release(counts, public_index=0))
        if releaser.exhausted:
            break
    return tuple(out)


def test_sparse_vote_answer_stays_within_its_budget():
    """Three steps; the same voter differs at every step; the answer is claimed 2 * 1.0-DP."""
    rng = np.random.default_rng(4)
    a_counts, b_counts = np.array([3.0, 2.0, 0.0]), np.array([2.0, 3.0, 0.0])
    a = [_sparse_run(a_counts, 3, rng) for _ in range(N)]
    b = [_sparse_run(b_counts, 3, rng) for _ in range(N)]
    assert loss_lower_bound(a, b) <= 2.0
    # the SVT does react: disagreement (public token 0 loses votes) makes discoveries likelier
    assert Counter(b)[(0, 0, 0)] < Counter(a)[(0, 0, 0)]


def test_sparse_releaser_refuses_after_its_discoveries():
    releaser = SparseVoteReleaser(eps0=4.0, threshold=2.5, max_discoveries=1, rng=np.random.default_rng(5))
    while not releaser.exhausted:
        releaser.release(np.array([0.0, 5.0]), public_index=0)
    with pytest.raises(RuntimeError):
        releaser.release(np.array([0.0, 5.0]), public_index=0)


def test_vote_domain_is_public_top_c_plus_end_tokens_and_votes_are_restricted_to_it():
    public = np.log(np.array([0.5, 0.3, 0.1, 0.06, 0.04]))
    domain = candidate_domain(public, 2, always=[4])
    assert domain.tolist() == [0, 1, 4]
    voters = np.log(np.array([
        [0.1, 0.2, 0.6, 0.05, 0.05],  # prefers 2 (outside the domain) -> votes for 1
        [0.7, 0.1, 0.1, 0.05, 0.05],
        [0.1, 0.1, 0.1, 0.1, 0.6],
    ]))
    assert vote_histogram(voters, domain).tolist() == [1.0, 1.0, 1.0]


def test_lprag_choice_stays_within_epsilon_per_entity():
    eps = 2.0
    candidates = CANDIDATES["PERSON"]
    x, x_neighbour = candidates[0], "Zqx Vvw"  # maximal utility gap: identical vs unrelated
    rng = np.random.default_rng(6)
    a = [choose(x, candidates, eps, rng) for _ in range(N)]
    b = [choose(x_neighbour, candidates, eps, rng) for _ in range(N)]
    exact = np.max(np.abs(np.log(choice_probabilities(x, candidates, eps)
                                 / choice_probabilities(x_neighbour, candidates, eps))))
    assert loss_lower_bound(a, b) <= eps
    assert abs(empirical_loss(a, b, min_count=300) - exact) < 0.15
    assert exact > eps / 3  # the pair is informative: the test is not vacuous


@pytest.mark.parametrize("value", ["Maria Gonzales", "Ingrid Pettersen", "maria.g@riverside-clinic.org", ""])
def test_lprag_exact_loss_is_bounded_for_every_output(value):
    for label, candidates in CANDIDATES.items():
        for other in (*candidates[:3], "Tomas Eriksen", "x"):
            for eps in (0.1, 1.0, 5.0):
                ratio = choice_probabilities(value, candidates, eps) / choice_probabilities(other, candidates, eps)
                assert np.all(np.abs(np.log(ratio)) <= eps + 1e-12), (label, value, other, eps)


def test_lprag_at_epsilon_zero_is_uniform():
    assert np.allclose(choice_probabilities("Maria", CANDIDATES["ORG"], 0.0), 1 / len(CANDIDATES["ORG"]))
