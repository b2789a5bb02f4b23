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
from ragleak.verify.events import ceiling, choose_events, coarse, eps_bound, split, trials_to_reach
from ragleak.verify.run import charged_queries, claim_for, claimed_adjacency
from ragleak.verify.scenarios import STRESSES, build_scenarios

counts = st.integers(min_value=1, max_value=400).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(0, n)))
levels = st.floats(1e-5, 0.05)
# the first call imports scipy: no per-example deadline on a shared machine
relaxed = settings(deadline=None, max_examples=60)


@given(st.integers(1, 400).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), levels)
@relaxed
def test_equal_counts_certify_nothing(c, a):
    n, k = c
    assert eps_bound(k, n, k, n, 0.0, a) == 0.0


@given(counts, levels)
@relaxed
def test_no_event_certifies_more_than_the_ceiling(c, a):
    n, k, k2 = c
    assert eps_bound(k, n, k2, n, 0.0, a) <= ceiling(n, 0.0, a) + 1e-9


@given(counts, levels)
@relaxed
def test_a_stricter_level_never_raises_the_bound(c, a):
    n, k, k2 = c
    assert eps_bound(k, n, k2, n, 0.0, a / 4) <= eps_bound(k, n, k2, n, 0.0, a) + 1e-12


@given(counts, levels)
@relaxed
def test_a_larger_gap_never_lowers_the_bound(c, a):
    n, k, k2 = c
    if k < n:
        assert eps_bound(k + 1, n, k2, n, 0.0, a) >= eps_bound(k, n, k2, n, 0.0, a) - 1e-12


@given(st.floats(0.05, 4.0), st.integers(20, 5000), levels)
@relaxed
def test_an_exactly_eps_dp_event_at_its_expected_counts_never_exceeds_eps(eps, n, a):
    # randomised response: P_D(E) = e^eps / (1 + e^eps), P_D'(E) = 1 / (1 + e^eps), the tightest eps-DP pair
    p = math.exp(eps) / (1 + math.exp(eps))
    assert eps_bound(round(p * n), n, round((1 - p) * n), n, 0.0, a) <= eps + 1e-9


def test_a_disjoint_event_is_caught_with_enough_trials():
    # never on D', often on D: unbounded true loss, the bound grows with the trials
    assert eps_bound(60, 300, 0, 300, 1e-6, 0.005) > 1.0
    assert eps_bound(6, 30, 0, 30, 1e-6, 0.005) < 1.0


def test_trials_to_reach_makes_the_claim_testable():
    for eps in (0.5, 1.0, 3.0):
        n = int(trials_to_reach(eps, 1e-6, 0.001))
        assert ceiling(n - split(n), 1e-6, 0.001) > eps
    assert trials_to_reach(64.0, 0.0, 0.001) > 1e25  # a per-answer claim of 64: out of reach


def test_events_are_chosen_by_likelihood_ratio_from_the_data():
    # value "rare" is 10x likelier on D; "x" and "y" carry no signal; "gone" only on D'
    d = [("rare",)] * 30 + [("x",)] * 100 + [("y",)] * 70
    dn = [("rare",)] * 3 + [("x",)] * 100 + [("y",)] * 67 + [("gone",)] * 30
    forward, backward = choose_events(d, dn, 0.0)
    assert forward.forward and forward(("rare",)) and not forward(("x",))
    assert not backward.forward and backward(("gone",)) and not backward(("rare",))


def test_the_coarse_view_counts_a_documents_passages_whatever_their_positions():
    two_at_any_position = [((("doc-x", i), ("doc-x", j)),) for i, j in ((0, 1), (1, 3), (2, 4), (0, 4))] * 10
    one = [((("doc-x", i),),) for i in range(5)] * 16
    forward, _ = choose_events(two_at_any_position + one, one * 2, 0.0)
    # a pair of positions the selection trials never showed is in the event all the same
    assert forward.coarse and forward(((("doc-x", 3), ("doc-x", 4)),)) and not forward(((("doc-x", 3),),))
    assert coarse(((("doc-x", 3), ("doc-x", 0)),)) == ((("doc-x", 2),),)


def test_an_eps_dp_mechanism_is_not_certified_above_eps_on_held_out_trials():
    # randomised response at eps=1 over 3 values, certified on fresh trials at a strict level
    rng = np.random.default_rng(7)
    p = np.array([math.e, 1.0, 1.0]) / (math.e + 2)
    q = np.array([1.0, math.e, 1.0]) / (math.e + 2)
    draw = lambda probs, n: [(int(v),) for v in rng.choice(3, size=n, p=probs)]  # noqa: E731
    worst = 0.0
    for _ in range(20):
        events = choose_events(draw(p, 300), draw(q, 300), 0.0)
        held_d, held_n = draw(p, 700), draw(q, 700)
        for e in events:
            hit, other = (held_d, held_n) if e.forward else (held_n, held_d)
            worst = max(worst, eps_bound(sum(map(e, hit)), 700, sum(map(e, other)), 700, 0.0, 0.01))
    assert 0.3 < worst <= 1.0  # real power, and never above the truth here


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
        elif s.stress == "contested":
            assert len(s.world) == k + 1  # one slot contested
        else:
            assert len(s.world) == pool and ranked[0].passage.doc_id in s.focus
    assert {s.stress for s in build_scenarios(pool, k)} == set(STRESSES)


def test_the_chunk_count_pair_changes_a_documents_passages_not_its_score():
    (s,) = build_scenarios(20, 5, ("chunk-count",))  # substitution only
    assert s.adjacency == "substitution"
    chunks = [sum(d.passage.doc_id == "doc-x" for d in w) for w in (s.world, s.neighbour)]
    best = [max(d.score for d in w if d.passage.doc_id == "doc-x") for w in (s.world, s.neighbour)]
    assert chunks == [3, 1] and best == [1.0, 1.0]


def test_k_colluding_principals_are_charged_k_budgets():
    from ragleak.accounting.guarantee import PerResponse

    g = Guarantee(unit=DocumentUnit(), boundary="retrieved-ids", scope=PerResponse(
        eps_q=1.0, mechanism="laplace", noise_multiplier=1.0, max_queries=4, budget_scope="principal"))
    assert [charged_queries(g, 40, k) for k in (0, 1, 2, 8, 20)] == [4, 4, 8, 32, 40]
    stream = g.model_copy(update={"scope": g.scope.model_copy(update={"budget_scope": "stream"})})
    assert charged_queries(stream, 40, 8) == 40  # the stream cap is the accountant's own


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

    report = verify_defense("dp-retrieval", settings=VerifySettings(trials=12, stresses=("single",),
                                                                    adjacencies="card", queries=3))
    once, thrice = report.scenarios
    assert once.queries == 1 and thrice.queries == 3 and "x3 queries" in thrice.name
    assert thrice.claim.eps > once.claim.eps  # eps(3) of the card, not eps(1)


def test_what_a_query_shows_follows_the_boundary():
    from ragleak.records import RetrievedItem, Trace
    from ragleak.verify.run import _observe

    item = lambda doc: RetrievedItem.model_construct(doc_id=doc)  # noqa: E731
    trace = Trace.model_construct(context=[item("f"), item("doc-x")], answer="alpha", prompt="")
    assert _observe(trace, "answers", ["doc-x"], frozenset()) == "alpha"
    assert _observe(trace, "answers+citations", ["doc-x"], frozenset()) == ("alpha", (("doc-x", 1),))
