"""The statistics of `ragleak verify` (hypothesis properties) and its designed corpora."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.accounting.guarantee import DocumentUnit, Guarantee, PerResponse
from ragleak.cli.verify import parse_params
from ragleak.errors import ConfigError
from ragleak.rag.index import PassageIndex
from ragleak.verify.embedding import DesignedEmbedder
from ragleak.verify.result import ceiling, event_lower_bound
from ragleak.verify.run import claim_for, claimed_adjacency
from ragleak.verify.scenarios import STRESSES, build_scenarios

counts = st.integers(min_value=1, max_value=400).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(0, n)))
events = st.integers(min_value=1, max_value=50)
# the first call imports scipy: no per-example deadline on a shared machine
relaxed = settings(deadline=None, max_examples=60)


@given(counts, events)
@relaxed
def test_the_bound_is_symmetric_in_the_two_worlds(c, e):
    n, a, b = c
    assert event_lower_bound(a, n, b, n, delta=0.0, alpha=0.05, events=e) == \
        event_lower_bound(b, n, a, n, delta=0.0, alpha=0.05, events=e)


@given(st.integers(1, 400).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), events)
@relaxed
def test_equal_counts_certify_nothing(c, e):
    n, k = c
    assert event_lower_bound(k, n, k, n, delta=0.0, alpha=0.05, events=e) == 0.0


@given(counts, events)
@relaxed
def test_no_event_certifies_more_than_the_ceiling(c, e):
    n, a, b = c
    assert event_lower_bound(a, n, b, n, delta=0.0, alpha=0.05, events=e) <= ceiling(n, 0.05, e) + 1e-9


@given(counts, events)
@relaxed
def test_bonferroni_over_more_events_never_raises_the_bound(c, e):
    n, a, b = c
    assert event_lower_bound(a, n, b, n, delta=0.0, alpha=0.05, events=e + 1) <= \
        event_lower_bound(a, n, b, n, delta=0.0, alpha=0.05, events=e) + 1e-12


@given(counts, events)
@relaxed
def test_a_larger_gap_never_lowers_the_bound(c, e):
    n, a, b = c
    lo, hi = min(a, b), max(a, b)
    if hi < n:
        assert event_lower_bound(hi + 1, n, lo, n, delta=0.0, alpha=0.05, events=e) >= \
            event_lower_bound(hi, n, lo, n, delta=0.0, alpha=0.05, events=e) - 1e-12


@given(st.floats(0.05, 4.0), st.integers(20, 5000), events)
@relaxed
def test_an_exactly_eps_dp_event_at_its_expected_counts_never_exceeds_eps(eps, n, e):
    # randomised response: P_D(E) = e^eps / (1 + e^eps), P_D'(E) = 1 / (1 + e^eps), the tightest eps-DP pair
    p = math.exp(eps) / (1 + math.exp(eps))
    k_w, k_n = round(p * n), round((1 - p) * n)
    assert event_lower_bound(k_w, n, k_n, n, delta=0.0, alpha=0.05, events=e) <= eps + 1e-9


def test_a_disjoint_event_is_caught_with_enough_trials():
    # never on D', often on D: unbounded true loss, the bound grows with the trials
    assert event_lower_bound(60, 300, 0, 300, delta=1e-6, alpha=0.05, events=10) > 1.0
    assert event_lower_bound(6, 30, 0, 30, delta=1e-6, alpha=0.05, events=10) < 1.0


@given(st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=30))
@relaxed
def test_the_designed_embedding_realises_its_scores_through_faiss(scores):
    from ragleak.records import Passage

    passages = [Passage(id=f"d{i}#0", doc_id=f"d{i}", text=f"text {i}") for i in range(len(scores))]
    embedder = DesignedEmbedder("the query", {p.text: s for p, s in zip(passages, scores)})
    found = {r.passage.doc_id: r.score for r in PassageIndex.build(passages, embedder).search("the query", len(scores))}
    assert all(abs(found[f"d{i}"] - s) < 1e-5 for i, s in enumerate(scores))
    # a text it was not designed for is orthogonal to the query, and the same every time
    other = embedder.encode(["never designed"])
    assert abs(float(other[0] @ embedder.encode(["the query"])[0])) < 1e-6
    assert np.array_equal(other, embedder.encode(["never designed"]))


@pytest.mark.parametrize("pool,k", [(20, 5), (6, 3), (40, 10)])
def test_scenarios_differ_in_one_document_and_fit_the_pool(pool, k):
    for s in build_scenarios(pool, k):
        docs_d = {d.passage.doc_id for d in s.world}
        docs_n = {d.passage.doc_id for d in s.neighbour}
        if s.adjacency == "add-remove":
            assert len(docs_d - docs_n) == 1 and docs_n <= docs_d
        else:
            assert docs_d == docs_n
            changed = {d.passage.doc_id for d in s.world} - {d.passage.doc_id for d in s.world if d in s.neighbour}
            assert len(changed) == 1
        ranked = sorted(s.world, key=lambda d: -d.score)
        if s.stress == "pool-edge":
            assert ranked[pool].passage.doc_id == "doc-y"  # first outside a pool of `pool` passages
        else:
            assert len(s.world) == pool and ranked[0].passage.doc_id in s.focus
    assert {s.stress for s in build_scenarios(pool, k)} == set(STRESSES)


def test_claims_follow_the_cards_adjacency():
    laplace = Guarantee(unit=DocumentUnit(), boundary="retrieved-ids", retrieval_randomised=True,
                        scope=PerResponse(eps_q=1.0, mechanism="laplace", noise_multiplier=1.0))
    assert claimed_adjacency(laplace)[0] == "substitution"
    claim, _ = claim_for(laplace, 1, "substitution", "substitution", 1e-6)
    assert claim is not None and claim.eps <= 1.0 + 1e-9
    none, why = claim_for(laplace, 1, "add-remove", "substitution", 1e-6)
    assert none is None and "substitution" in why
    vote = Guarantee(scope=PerResponse(eps_q=2.0), boundary="answers", notes="add/remove adjacency")
    assert claimed_adjacency(vote) == ("add-remove", "card notes")
    doubled, _ = claim_for(vote, 1, "substitution", "add-remove", 1e-6)
    single, _ = claim_for(vote, 1, "add-remove", "add-remove", 1e-6)
    assert doubled.eps == pytest.approx(2 * single.eps)
    assert claim_for(Guarantee(), 1, "substitution", "add-remove", 1e-6)[0] is None


def test_cli_params_are_read_as_yaml_values():
    assert parse_params(["epsilon=0.5", "mode=gumbel,k=3", "flag=true"]) == \
        {"epsilon": 0.5, "mode": "gumbel", "k": 3, "flag": True}
    with pytest.raises(ConfigError):
        parse_params(["epsilon"])


def test_repeated_queries_are_judged_against_the_cards_eps_of_t():
    from ragleak.verify import VerifySettings, verify_defense

    report = verify_defense("dp-retrieval", settings=VerifySettings(trials=10, stresses=("single",),
                                                                    adjacencies="card", queries=3))
    once, thrice = report.scenarios
    assert once.queries == 1 and thrice.queries == 3 and "x3 queries" in thrice.name
    assert thrice.claim.eps > once.claim.eps  # eps(3) of the card, not eps(1)
    assert [e.event for e in thrice.events] == [f"doc-x passages >= {j}" for j in (1, 2, 3)]
    assert all(e.n_world == e.n_neighbour == 10 for e in thrice.events)


def test_a_claim_on_answers_and_citations_watches_both():
    from ragleak.verify.run import _features

    scenario = build_scenarios(20, 5, ("multi-chunk",), ("substitution",))[0]
    both = _features(scenario, "answers+citations")
    assert both["doc-x passages"] == 2 and "first token alpha" in both
    assert "doc-x passages" not in _features(scenario, "answers")
