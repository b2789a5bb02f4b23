"""dp-retrieval: the selection is eps-DP on neighbouring score vectors, and on the real stack it
changes the score hook only."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from ragleak.accounting import epsilon_after, log_ratio_interval
from ragleak.context import RunContext
from ragleak.defenses import make_defense
from ragleak.defenses.dp_retrieval import DPRetrieval
from ragleak.defenses.dp_select import clip_scores, gumbel_top_k, laplace_noisy_scores, laplace_top_k
from ragleak.records import Passage, Scored
from ragleak.testing import pipeline_under_test

N = 40_000
# neighbouring corpora under substitution: document 3 is replaced by one that matches the query
SCORES = np.array([0.8, 0.55, 0.5, 0.05])
NEIGHBOUR = np.array([0.8, 0.55, 0.5, 0.95])


def _outcome_losses(sample_a, sample_b, min_count=300):
    ca, cb = Counter(sample_a), Counter(sample_b)
    out = []
    for key in set(ca) & set(cb):
        if ca[key] >= min_count and cb[key] >= min_count:
            out.append(log_ratio_interval(ca[key], len(sample_a), cb[key], len(sample_b)))
            out.append(log_ratio_interval(cb[key], len(sample_b), ca[key], len(sample_a)))
    assert out, "no outcome frequent enough in both worlds"
    return out


def _selections(fn, scores, seed, **kw):
    rng = np.random.default_rng(seed)
    return [tuple(int(i) for i in fn(scores, rng=rng, **kw)) for _ in range(N)]


@pytest.mark.parametrize("eps", [1.0, 3.0])
def test_laplace_top_k_selection_loss_is_within_eps(eps):
    a = _selections(laplace_top_k, SCORES, 1, k=2, eps=eps, sensitivity=1.0)
    b = _selections(laplace_top_k, NEIGHBOUR, 2, k=2, eps=eps, sensitivity=1.0)
    losses = _outcome_losses(a, b)
    assert all(low <= eps for _, low, _ in losses), max(losses)
    assert max(est for est, _, _ in losses) > 0.3 * eps  # the neighbour is distinguishable at all


@pytest.mark.parametrize("eps", [1.0, 3.0])
def test_gumbel_top_k_selection_loss_is_within_eps(eps):
    a = _selections(gumbel_top_k, SCORES, 3, k=2, eps=eps, sensitivity=1.0)
    b = _selections(gumbel_top_k, NEIGHBOUR, 4, k=2, eps=eps, sensitivity=1.0)
    assert all(low <= eps for _, low, _ in _outcome_losses(a, b))


def _tail_loss(noise_eps):
    """The released noisy vector, tail event 'coordinate 3 above 1.5': the worst event for Laplace."""
    clipped_a, clipped_b = clip_scores(SCORES, 0, 1), clip_scores([0.8, 0.55, 0.5, 5.0], 0, 1)  # clip caps the move at 1
    rng = np.random.default_rng(7)
    a = laplace_noisy_scores(np.tile(clipped_a, (4 * N, 1)), noise_eps, 1.0, rng)[:, 3] > 1.5
    b = laplace_noisy_scores(np.tile(clipped_b, (4 * N, 1)), noise_eps, 1.0, rng)[:, 3] > 1.5
    # clipped_a[3] = 0.05, clipped_b[3] = 1.0: the move is 0.95 of Delta = 1
    return log_ratio_interval(int(b.sum()), 4 * N, int(a.sum()), 4 * N)


def test_noisy_vector_tail_event_reaches_but_does_not_exceed_eps():
    est, low, high = _tail_loss(1.0)
    assert low <= 1.0 <= high + 0.1  # tight: the tail event shows ~0.95 of the budget
    assert est > 0.8


def test_the_statistical_check_catches_a_mechanism_with_too_little_noise():
    # noise calibrated for eps = 2 but claimed as eps = 1: the test must fail it
    _, low, _ = _tail_loss(2.0)
    assert low > 1.0


def _candidates(scores):
    return [Scored(passage=Passage(id=f"d{i}#0", doc_id=f"d{i}", text=f"text {i}"), score=float(s))
            for i, s in enumerate(scores)]


def test_defense_uses_the_context_rng_and_declares_its_hook():
    d = make_defense("dp-retrieval", epsilon=1.0)
    assert isinstance(d, DPRetrieval) and d.hooks == frozenset({"score_retrieval"})
    assert all(d.overrides(h) == (h == "score_retrieval") for h in
               ("score_retrieval", "rewrite_context", "generate", "postprocess"))
    runs = []
    for _ in range(2):
        d = DPRetrieval(epsilon=1.0)
        d.prepare(RunContext(seed=11))
        runs.append([c.score for c in d.score_retrieval("q", _candidates(SCORES))])
    assert runs[0] == runs[1]  # reproducible from the run's seed
    assert runs[0] != list(SCORES)


def test_large_epsilon_keeps_the_exact_ranking_and_gumbel_returns_k():
    d = DPRetrieval(epsilon=1e6)
    out = d.score_retrieval("q", _candidates(SCORES))
    assert [c.passage.doc_id for c in sorted(out, key=lambda c: -c.score)] == ["d0", "d1", "d2", "d3"]
    g = DPRetrieval(epsilon=1.0, mode="gumbel", k=2)
    picked = g.score_retrieval("q", _candidates(SCORES))
    assert len(picked) == 2 and [c.score for c in picked] == [2.0, 1.0]


def test_guarantee_is_per_query_laplace_on_the_retrieval_selection():
    g = DPRetrieval(epsilon=1.0).guarantee()
    assert g.boundary == "retrieved-ids" and g.retrieval_randomised
    assert epsilon_after(g, 10, method="basic").eps == pytest.approx(10.0)
    assert epsilon_after(g, 100).eps < 100.0
    voided = epsilon_after(g, 1, shown="answers")
    assert voided.void and voided.delta == 1.0 and math.isinf(voided.eps)


@pytest.mark.model
def test_on_the_real_stack_only_the_score_hook_changes(fact_index, generator):
    pipe = pipeline_under_test(fact_index, generator, DPRetrieval(epsilon=1.0), top_k=3, seed=3)
    trace = pipe.answer("Who founded the Halvorsen Foundry?").trace
    changed = {h.hook: h.changed for h in trace.hooks}
    assert changed == {"score_retrieval": True, "rewrite_context": False, "generate": False, "postprocess": False}
    assert [i.score for i in trace.rescored] != [i.score for i in trace.candidates]
