"""DP retrieval selects over every document of the real flat index, one score per document,
through the real hooks (``RAGPipeline.retrieve``), and its card is checked against that index:
a narrower pool voids it, a passage-level mechanism pays group privacy over the chunks."""

from __future__ import annotations

from collections import Counter

import pytest

from ragleak.accounting import build_card, epsilon_after, log_ratio_interval
from ragleak.context import RunContext
from ragleak.defenses import make_defense
from ragleak.defenses.corpus_pool import CorpusFacts
from ragleak.rag.index import PassageIndex
from ragleak.records import Passage
from ragleak.testing import pipeline_under_test

TOPICS = ["ferry timetable", "orchard harvest", "violin repair", "glacier survey", "bakery recipe", "chess club",
          "railway signal", "beekeeping hive", "pottery kiln", "lighthouse keeper", "sailing regatta", "tax form",
          "opera ticket", "bicycle courier", "coral reef", "printing press", "volcano ash", "library archive",
          "river dam", "winter market"]
QUERY = "When does the ferry timetable change?"


def _passages(extra: list[Passage]) -> list[Passage]:
    base = [Passage(id=f"d{i}#0", doc_id=f"d{i}", text=f"A note about the {t} and its weekly schedule.")
            for i, t in enumerate(TOPICS)]
    return base + extra


@pytest.fixture(scope="module")
def embedder(stack):
    return stack.embedder()


@pytest.fixture(scope="module")
def chunked_index(embedder):
    """20 one-passage documents and one document 'x' of three passages about the query."""
    x = [Passage(id=f"x#{j}", doc_id="x", text=f"The ferry timetable changes in spring, note {j}.") for j in range(3)]
    return PassageIndex.build(_passages(x), embedder)


def _pipeline(index, defense, candidate_k=3, top_k=2, seed=0):
    return pipeline_under_test(index, "echo", defense, top_k=top_k, candidate_k=candidate_k, seed=seed)


def test_selection_reaches_documents_outside_the_pipelines_candidate_pool(chunked_index):
    d = make_defense("dp-retrieval", epsilon=0.5, k=2)
    pipe = _pipeline(chunked_index, d, candidate_k=3)
    outside, seen = 0, Counter()
    for _ in range(120):
        r = pipe.retrieve(QUERY)
        pool = {c.passage.doc_id for c in r.candidates}
        chosen = [s.passage.doc_id for s in r.selected]
        assert len(chosen) == len(set(chosen)) == 2  # one entry per document
        outside += any(doc not in pool for doc in chosen)
        seen.update(chosen)
    assert outside > 40  # at eps 0.5 most selections include a document the index ranked below 3
    assert len(seen) > 12
    card = build_card("dp-retrieval", d.guarantee(), shown="retrieved-ids")
    assumptions = {a.name: a for a in card.assumptions}
    assert not card.void and assumptions["pool-covers-corpus"].met is True
    assert "21 documents (23 passages)" in assumptions["pool-covers-corpus"].detail
    assert d.guarantee().max_chunks == 3 and d.state() == {"truncated_queries": 0}


def test_a_pool_narrower_than_the_corpus_voids_the_card_with_its_reason(chunked_index):
    d = make_defense("dp-retrieval", pool=5)
    pipe = _pipeline(chunked_index, d)
    for _ in range(3):
        pipe.retrieve(QUERY)
    card = build_card("dp-retrieval", d.guarantee(), shown="retrieved-ids")
    assert card.void and "pool=5 documents of 21" in card.void_reason
    assert d.state()["truncated_queries"] == 3
    wide = make_defense("dp-retrieval", pool=50)  # a pool that covers this corpus meets the assumption
    _pipeline(chunked_index, wide).retrieve(QUERY)
    assert not build_card("dp-retrieval", wide.guarantee(), shown="retrieved-ids").void


def test_passage_level_mode_pays_group_privacy_over_the_most_chunks(chunked_index):
    d = make_defense("dp-retrieval", epsilon=1.0, aggregate="passage", mode="gumbel", k=2)
    assert epsilon_after(d.guarantee(), 1).void  # no index seen: chunks per document unknown
    _pipeline(chunked_index, d).retrieve(QUERY)
    g = d.guarantee()
    assert g.mechanism_unit == "passage" and g.max_chunks == 3
    assert epsilon_after(g, 1, shown="retrieved-ids").eps == pytest.approx(3.0)


def test_every_dp_retrieval_defense_reports_and_checks_the_served_corpus(chunked_index):
    for name in ("dp-retrieval", "ca-dp", "dp-vote", "private-rag"):
        d = make_defense(name)
        assert {a.name: a.met for a in d.guarantee().assumptions}["pool-covers-corpus"] is None
        _pipeline(chunked_index, d, candidate_k=3).retrieve(QUERY)
        g = d.guarantee()
        assert {a.name: a.met for a in g.assumptions}["pool-covers-corpus"] is True, name
        assert g.adjacency in ("substitution", "add-remove") and g.max_chunks == 3
    facts = CorpusFacts.of_index(chunked_index)
    assert facts == CorpusFacts(passages=23, documents=21, max_chunks=3, exact=True)


def test_private_rag_and_dp_vote_rank_documents_over_the_whole_corpus(chunked_index):
    pr = make_defense("private-rag", tau=-1.0, voters=3)  # every document relevant: no pool may truncate it
    pipe = _pipeline(chunked_index, pr, candidate_k=3, top_k=3)
    r = pipe.retrieve(QUERY)
    assert [s.passage.doc_id for s in r.selected][0] == "x" and len({s.passage.doc_id for s in r.selected}) == 3
    assert pr.log[-1].relevant == 21 and pr.truncated_queries == 0  # all 21 documents scored and charged
    vote = make_defense("dp-vote", k=4)
    r = _pipeline(chunked_index, vote, candidate_k=3, top_k=4).retrieve(QUERY)
    assert len({s.passage.doc_id for s in r.selected}) == 4


N = 4000


def _top1(index, defense_params, seed):
    """The defense's own hooks, as the pipeline calls them (begin_query, then score_retrieval)."""
    d = make_defense("dp-retrieval", **defense_params)
    d.prepare(RunContext(seed=seed))
    d.begin_query(index, ())
    return Counter(d.score_retrieval(QUERY, [])[0].passage.doc_id == "x" for _ in range(N))


def test_a_multi_chunk_document_moves_the_selection_by_at_most_eps(embedder):
    """Neighbours by substitution of document x: one unrelated passage vs three passages about the
    query. Document-level selection keeps the log ratio of 'x is selected' within eps; the
    passage-level mechanism at the same noise spends more (which its card pays as group privacy)."""
    plain = _passages([Passage(id="x#0", doc_id="x", text="Minutes of the knitting circle, nothing else.")])
    chunked = _passages([Passage(id=f"x#{j}", doc_id="x", text=f"The ferry timetable changes in spring, note {j}.")
                         for j in range(3)])
    a, b = PassageIndex.build(plain, embedder), PassageIndex.build(chunked, embedder)
    eps = 1.0
    params = {"epsilon": eps, "k": 1}
    pa, pb = _top1(a, params, 1), _top1(b, params, 2)
    est, low, _ = log_ratio_interval(pb[True], N, pa[True], N)
    assert low <= eps and est > 0.3  # distinguishable, within the claim
    passage = {**params, "aggregate": "passage"}
    qa, qb = _top1(a, passage, 3), _top1(b, passage, 4)
    est_p, _, _ = log_ratio_interval(qb[True], N, qa[True], N)
    assert est_p > est  # three noisy chances instead of one


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_on_an_approximate_index_the_dp_pool_is_still_scored_exactly(chunked_index, embedder, kind, caplog):
    """An IVF or HNSW index's approximate top-k never reaches a DP mechanism: the pool scans every
    stored vector, with the same selections as on the flat index, a warning and a card that says so."""
    import logging

    approximate = chunked_index.with_kind(kind)
    assert not approximate.exact and approximate.scores_every_passage
    for name in ("dp-retrieval", "ca-dp", "dp-vote", "private-rag"):
        picks = {}
        for index in (chunked_index, approximate):
            d = make_defense(name)
            pipe = _pipeline(index, d, candidate_k=3, seed=5)
            with caplog.at_level(logging.WARNING):
                picks[index.kind] = [[s.passage.id for s in pipe.retrieve(QUERY).selected] for _ in range(15)]
            pool = {a.name: a for a in d.guarantee().assumptions}["pool-covers-corpus"]
            assert pool.met is True, name
        assert picks[kind] == picks["flat"], name
        assert "scanned exhaustively" in pool.detail and kind in pool.detail
    assert f"the index is {kind} (approximate top-k)" in caplog.text


def test_an_index_that_cannot_score_every_passage_is_refused_by_a_dp_defense(chunked_index):
    from ragleak.errors import IndexStoreError

    class Compressed(PassageIndex):  # stands for an index keeping compressed codes only (PQ)
        scores_every_passage = False
        kind = "ivfpq"

    index = Compressed.build(chunked_index.passages, chunked_index.embedder)
    d = make_defense("dp-retrieval")
    with pytest.raises(IndexStoreError, match="ivfpq index cannot score every passage exactly.*--kind flat"):
        _pipeline(index, d).retrieve(QUERY)
    assert _pipeline(index, None).retrieve(QUERY).selected  # without a DP defense it serves as usual
