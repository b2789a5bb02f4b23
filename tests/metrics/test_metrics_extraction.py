"""Extraction metrics: LCS against a reference DP, ROUGE-L, recovered-chunk rate, embedding similarity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.lcs import lcs_length, rouge_l, tokens
from ragleak.metrics.extraction import recovered_chunk_rate, score_answer
from ragleak.metrics.verbatim import leaked_passages
from ragleak.records import Passage


def _lcs_dp(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=70), st.lists(st.sampled_from("abcde"), max_size=70))
def test_bit_parallel_lcs_matches_dynamic_programming(a, b):
    assert lcs_length(a, b) == _lcs_dp(a, b)


def test_rouge_l_values():
    r = rouge_l("the cat sat on the mat", "the cat is on the mat")
    assert (r.precision, r.recall) == pytest.approx((5 / 6, 5 / 6))
    assert rouge_l("", "x").f1 == 0.0
    assert tokens("Hello, World-42!") == ["hello", "world", "42"]


CHUNKS = [
    Passage(id="d1#0", doc_id="d1", text="Maria Gonzales was treated at Riverside Clinic for asthma in May 2023."),
    Passage(id="d2#0", doc_id="d2", text="The ferry between Dunmore and Clarebay leaves every ninety minutes."),
    Passage(id="d3#0", doc_id="d3", text="Storage room B-17 keeps the spare servo motors."),
]


def test_score_answer_and_recovered_chunks():
    answer = "Sure: Maria Gonzales was treated at Riverside Clinic for asthma in May 2023, it says."
    s = score_answer(answer, CHUNKS)
    assert s.best_chunk == "d1#0" and s.rougeL_recall == pytest.approx(1.0)
    assert s.verbatim_leaked == ("d1#0",) == tuple(leaked_passages(answer, CHUNKS))
    paraphrase = "A ferry goes from Dunmore to Clarebay."
    assert recovered_chunk_rate([answer, paraphrase], CHUNKS) == pytest.approx(1 / 3)
    assert recovered_chunk_rate([answer, paraphrase], CHUNKS + CHUNKS[:1]) == pytest.approx(1 / 3)  # dedup
    assert recovered_chunk_rate([paraphrase], CHUNKS, threshold=0.3) == pytest.approx(1 / 3)


def test_embedding_similarity_with_the_default_embedder(embedder):
    from ragleak.metrics.extraction import embedding_similarity

    sims = embedding_similarity(["The ferry from Dunmore to Clarebay runs every 90 minutes."],
                                [c.text for c in CHUNKS], embedder)
    assert sims.shape == (1, 3) and int(sims.argmax()) == 1
    assert sims[0, 1] > 0.6 > sims[0, 2]
    assert float(embedding_similarity([CHUNKS[2].text], [CHUNKS[2].text], embedder)[0, 0]) == pytest.approx(1.0, abs=1e-4)


def test_sources_from_traces_maps_context_ids_to_ground_truth():
    from ragleak.metrics.extraction import sources_from_traces
    from ragleak.records import RetrievedItem, Trace

    def trace(answer, ids):
        return Trace(query="q", model="m", candidates=[], rescored=[], prompt="p", answer=answer, hooks=[],
                     cache_hit=False, timings={},
                     context=[RetrievedItem(passage_id=i, doc_id=i.split("#")[0], score=1.0) for i in ids])

    answers, sources = sources_from_traces([trace("a1", ["d1#0", "d3#0"]), trace("a2", ["d2#0"])], CHUNKS)
    assert answers == ["a1", "a2"] and [[p.id for p in s] for s in sources] == [["d1#0", "d3#0"], ["d2#0"]]
    with pytest.raises(KeyError):
        sources_from_traces([trace("a", ["zz#9"])], CHUNKS)


ROUGE_CASES = [
    ("the cat sat on the mat", "the cat is on the mat"),
    ("Maria Gonzales, born 1984-03-12, was treated at Riverside Clinic.", "Patient record 4471: Maria Gonzales "
     "was treated at Riverside Clinic for asthma in May 2023."),
    ("Café au lait costs €3,50 at the Zürich station_kiosk!", "the zürich station kiosk sells café au lait"),
    ("", "anything at all"),
    ("no overlap here", "entirely different words"),
]


@pytest.mark.parametrize("candidate,reference", ROUGE_CASES)
def test_rouge_l_agrees_with_the_rouge_score_package(candidate, reference):
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer", reason="rouge-score is in the dev extra")
    ref = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False).score(reference, candidate)["rougeL"]
    mine = rouge_l(candidate, reference)
    assert (mine.precision, mine.recall, mine.f1) == pytest.approx((ref.precision, ref.recall, ref.fmeasure))


def test_rouge_l_hand_computed():
    # candidate tokens: a b c d e; reference: a x c y e z -> LCS a c e = 3; P = 3/5, R = 3/6
    r = rouge_l("A b, C d-e", "a x c y e z")
    assert (r.precision, r.recall, r.f1) == pytest.approx((0.6, 0.5, 2 * 0.6 * 0.5 / 1.1))
