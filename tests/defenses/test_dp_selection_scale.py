"""The DP pool at scale (issue 39): every passage scored from the index's stored vectors in one
pass, no passage text read for scoring, and the same scores and the same seeded selection as the
old path (a FAISS search of k = N, one passage per document read from SQLite) on a real index."""

from __future__ import annotations

import numpy as np
import pytest

from ragleak.context import RunContext
from ragleak.defenses import make_defense
from ragleak.defenses.corpus_pool import best_per_document
from ragleak.defenses.dp_select import noisy_selection
from ragleak.rag.index import PassageIndex
from ragleak.rag.score_pool import ScorePool, top_rows
from ragleak.records import Passage, Scored

TOPICS = ["ferry timetable", "orchard harvest", "violin repair", "glacier survey", "bakery recipe", "chess club",
          "railway signal", "beekeeping hive", "pottery kiln", "lighthouse keeper", "sailing regatta", "tax form"]
QUERIES = ["When does the ferry timetable change?", "How is a pottery kiln fired?", "tax form deadline"]


def _passages() -> list[Passage]:
    """Documents of 1-3 passages, added chunk round by chunk round (a document's passages are not
    adjacent in the index) and named so that id order differs from insertion order."""
    chunks = {f"doc-{(7 * i) % len(TOPICS):02d}": [f"A note about the {t}, part {j}: its weekly schedule and costs."
                                                  for j in range(1 + i % 3)] for i, t in enumerate(TOPICS)}
    return [Passage(id=f"{doc}#{j}", doc_id=doc, text=texts[j])
            for j in range(3) for doc, texts in chunks.items() if j < len(texts)]


@pytest.fixture(scope="module")
def index(embedder):
    return PassageIndex.build(_passages(), embedder, kind="flat")


def _old_documents(index, query):
    """The pre-issue-39 pool: exact search of k = N read from SQLite, best passage per document,
    here in document id order (the order the new pool draws its noise in)."""
    return sorted(best_per_document(index.search(query, len(index), exact=True)), key=lambda s: s.passage.doc_id)


def test_document_scores_equal_the_exact_search_bit_for_bit(index):
    assert index._scan_state().order is not None  # documents' passages interleaved: the regrouping is exercised
    for query in QUERIES:
        old = _old_documents(index, query)
        pool = index.document_pool(query)
        assert pool.scores.dtype == np.float32 and len(pool) == len(old) == len(TOPICS)
        assert np.array_equal(pool.scores, np.array([s.score for s in old], dtype=np.float32))
        assert [s.passage.id for s in pool.take(range(len(pool)))] == [s.passage.id for s in old]
        assert [s.passage.id for s in index.best_per_document(query)] == [
            s.passage.id for s in sorted(old, key=lambda s: -s.score)]


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_an_approximate_index_gives_the_flat_index_scores_exactly(index, kind):
    other = index.with_kind(kind)
    for query in QUERIES:
        assert np.array_equal(other.document_pool(query).scores, index.document_pool(query).scores)


@pytest.mark.parametrize("params", [{}, {"mode": "gumbel", "k": 3}, {"aggregate": "passage", "epsilon": 4.0}])
def test_dp_selection_is_the_old_paths_selection_given_the_same_seed(index, params):
    defense = make_defense("dp-retrieval", **params)
    defense.prepare(RunContext(seed=9))
    reference_rng = RunContext(seed=9).noise_rng("defense/dp-retrieval")
    order = {p.id: i for i, p in enumerate(_passages())}  # storage order of a flat index: insertion
    p = defense.params
    chosen = set()
    for _ in range(8):
        for query in QUERIES:
            defense.begin_query(index, ())
            new = defense.score_retrieval(query, [])
            old_pool = (_old_documents(index, query) if p.aggregate == "document" else
                        sorted(index.search(query, len(index), exact=True), key=lambda s: order[s.passage.id]))
            old = noisy_selection(old_pool, p.k, p.epsilon, p.clip_low, p.clip_high, p.mode, reference_rng)
            assert [(s.passage.id, s.score) for s in new] == [(s.passage.id, s.score) for s in old]
            chosen.update(s.passage.id for s in new)
    assert len(chosen) > p.k  # the noise moves the selection: the comparison is not of one fixed answer


def _counting_reads(index, monkeypatch) -> list[int]:
    """The passage ids the index's store reads from now on (text is read through ``get_many``)."""
    read: list[int] = []
    get_many = index._store.get_many

    def counted(ids):
        ids = list(ids)
        read.extend(ids)
        return get_many(ids)

    monkeypatch.setattr(index._store, "get_many", counted)
    return read


def test_scoring_reads_no_passage_text_only_the_selected(embedder, monkeypatch):
    index = PassageIndex.build(_passages(), embedder, kind="flat")
    read = _counting_reads(index, monkeypatch)
    defense = make_defense("dp-retrieval", k=2)
    defense.prepare(RunContext(seed=1))
    defense.begin_query(index, ())
    read.clear()  # the card's facts (chunk counts) are read once per index, without texts
    picked = defense.score_retrieval(QUERIES[0], [])
    assert len(picked) == 2 and len(read) == 2


def test_the_pool_follows_the_index_through_adds_and_removals(embedder):
    index = PassageIndex.build(_passages(), embedder, kind="flat")
    before = index.document_pool(QUERIES[0])  # builds the scan over the current FAISS storage
    extra = [Passage(id=f"zz#{j}", doc_id="zz", text=f"The ferry timetable changes in spring, note {j}.")
             for j in range(2)]
    index.add(extra)  # FAISS reallocates its storage: a stale view would read freed memory
    grown = index.document_pool(QUERIES[0])
    assert len(grown) == len(before) + 1
    assert np.array_equal(grown.scores, np.array([s.score for s in _old_documents(index, QUERIES[0])], np.float32))
    index.remove_documents(["doc-00"])
    after = index.document_pool(QUERIES[0])
    old = _old_documents(index, QUERIES[0])
    assert len(after) == len(before) == len(old)  # one document in, one out
    assert np.array_equal(after.scores, np.array([s.score for s in old], dtype=np.float32))
    ids = [s.passage.doc_id for s in after.take(range(len(after)))]
    assert "zz" in ids and "doc-00" not in ids


def test_a_passage_pool_cut_to_the_best_documents_keeps_only_their_passages(index):
    full = index.passage_pool(QUERIES[0])
    cut = index.passage_pool(QUERIES[0], documents=2)
    best = {s.passage.doc_id for s in index.best_per_document(QUERIES[0])[:2]}
    kept = cut.take(range(len(cut)))
    assert {s.passage.doc_id for s in kept} == best
    assert len(kept) == sum(1 for s in full.take(range(len(full))) if s.passage.doc_id in best)


def test_top_rows_is_a_stable_descending_argsort_ties_included():
    rng = np.random.default_rng(0)
    for n, k in [(7, 3), (1000, 5), (1000, 1), (40, 40), (5000, 12)]:
        for values in (rng.integers(0, 6, size=n).astype(float), rng.random(n)):
            assert np.array_equal(top_rows(values, k), np.argsort(-values, kind="stable")[:k])


def test_a_score_pool_over_a_list_keeps_its_order_and_subsets_map_back():
    items = [Passage(id=f"p{i}", doc_id=f"d{i}", text="t") for i in range(5)]
    pool = ScorePool.of_scored([Scored(passage=p, score=s) for p, s in zip(items, [0.1, 0.9, 0.5, 0.9, 0.2])])
    assert [s.passage.id for s in pool.ranked()] == ["p1", "p3", "p2", "p4", "p0"]
    sub = pool.subset(pool.best_rows(2))
    assert [s.passage.id for s in sub.take([0, 1])] == ["p1", "p3"]
    with pytest.raises(ValueError, match="1-d"):
        ScorePool(np.zeros((2, 2)), lambda rows: [])


@pytest.mark.parametrize("name, params, expected_reads", [("ca-dp", {"k": 2}, 2), ("dp-vote", {"k": 2}, 2),
                                                           ("private-rag", {"tau": 0.99}, 0)])
def test_every_document_level_dp_defense_reads_only_what_it_selects(embedder, monkeypatch, name, params,
                                                                     expected_reads):
    """ca-dp, dp-vote and private-rag score the whole corpus from the vectors as dp-retrieval does:
    text is read for the selected documents only (private-rag: those above its public threshold)."""
    index = PassageIndex.build(_passages(), embedder, kind="flat")
    read = _counting_reads(index, monkeypatch)
    defense = make_defense(name, **params)
    defense.prepare(RunContext(seed=1))
    defense.begin_query(index, ())
    read.clear()
    picked = defense.score_retrieval(QUERIES[0], [])
    assert len(picked) == expected_reads and len(read) == expected_reads


def test_ca_dp_draws_as_it_did_over_the_ranked_document_list(index):
    """Scoring from the vectors changed what is read, not a draw: the same seed selects what the old
    ranked list (every document's best passage, best first) selected."""
    defense = make_defense("ca-dp", k=3)
    defense.prepare(RunContext(seed=4))
    reference_rng = RunContext(seed=4).noise_rng("defense/ca-dp")
    p = defense.params
    for query in QUERIES:
        defense.begin_query(index, ())
        new = defense.score_retrieval(query, [])
        ranked = sorted(_old_documents(index, query), key=lambda s: -s.score)
        old = noisy_selection(ranked, p.k, p.turn_epsilon, p.clip_low, p.clip_high, "laplace", reference_rng)
        assert [(s.passage.id, s.score) for s in new] == [(s.passage.id, s.score) for s in old]
