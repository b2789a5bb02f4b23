"""dp-synthetic: the noisy keyword histogram is eps-DP on neighbouring corpora, the corpus is built
once, only vocabulary words reach it, and on the real stack only the context hook changes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ragleak.accounting import epsilon_after, log_ratio_interval
from ragleak.defenses import make_defense
from ragleak.defenses.dp_synthetic import DPSynthetic
from ragleak.defenses.synthetic_corpus import document_keywords, load_vocabulary, noisy_keyword_histogram
from ragleak.testing import pipeline_under_test

VOCAB = ("alpha", "beta", "gamma", "delta", "omega", "sigma")
D = [["alpha", "beta"], ["alpha", "gamma"], ["beta", "gamma"]]
Z = ["omega", "sigma"]              # the neighbour D + {z} adds one document with K = 2 words
N = 100_000


def _runs(corpus, eps, rng, k):
    """N independent runs of the mechanism's own release function."""
    return np.array([noisy_keyword_histogram(corpus, VOCAB, k, eps, rng) for _ in range(N)])


@pytest.fixture(scope="module")
def worlds():
    eps = 1.0
    return eps, _runs(D, eps, np.random.default_rng(1), 2), _runs(D + [Z], eps, np.random.default_rng(2), 2)


def test_joint_tail_event_shows_the_loss_within_eps(worlds):
    eps, a, b = worlds
    # both of z's words well above their count without z: the worst event for the Laplace mechanism
    event_a = ((a[:, 4] > 1.0) & (a[:, 5] > 1.0)).sum()
    event_b = ((b[:, 4] > 1.0) & (b[:, 5] > 1.0)).sum()
    est, low, high = log_ratio_interval(int(event_b), N, int(event_a), N)
    assert low <= eps and est > 0.8 * eps  # the full budget is spent on this event, no more


def test_released_top_words_are_within_eps(worlds):
    eps, a, b = worlds
    ca = Counter(frozenset(r) for r in np.argsort(-a, axis=1)[:, :2].tolist())
    cb = Counter(frozenset(r) for r in np.argsort(-b, axis=1)[:, :2].tolist())
    losses = [log_ratio_interval(ca[k], N, cb[k], N) for k in ca if ca[k] >= 300 and cb[k] >= 300]
    losses += [log_ratio_interval(cb[k], N, ca[k], N) for k in ca if ca[k] >= 300 and cb[k] >= 300]
    assert losses and all(low <= eps for _, low, _ in losses)


def test_the_check_catches_noise_calibrated_for_one_word_per_document(worlds):
    eps = worlds[0]
    # a buggy release that scales the noise by 1/eps instead of K/eps (K = 2): loss ~ 2 eps
    rng = np.random.default_rng(3)
    counts = np.array([2, 2, 2, 0, 1, 1], dtype=float)
    buggy = counts + rng.laplace(0.0, 1.0 / eps, size=(N, len(VOCAB)))
    base = np.array([2, 2, 2, 0, 0, 0], dtype=float) + rng.laplace(0.0, 1.0 / eps, size=(N, len(VOCAB)))
    ev_b = ((buggy[:, 4] > 1.0) & (buggy[:, 5] > 1.0)).sum()
    ev_a = ((base[:, 4] > 1.0) & (base[:, 5] > 1.0)).sum()
    _, low, _ = log_ratio_interval(int(ev_b), N, int(ev_a), N)
    assert low > eps


def test_document_keywords_reads_only_vocabulary_words_up_to_k():
    vocab = frozenset(load_vocabulary())
    words = document_keywords("The Halvorsen Foundry in Skarvik cast the bells of the harbour church bells.", vocab, 4)
    assert len(words) == 4 and all(w in vocab for w in words) and "the" not in words
    assert words == ["foundry", "cast", "bell", "harbour"]
    with pytest.raises(ValueError):
        noisy_keyword_histogram([["alpha", "beta", "gamma"]], VOCAB, 2, 1.0, np.random.default_rng(0))


def test_guarantee_is_a_flat_one_time_release():
    g = make_defense("dp-synthetic", epsilon=3.0).guarantee()
    assert g.boundary == "synthetic-corpus"
    assert [epsilon_after(g, t, shown="answers+citations").eps for t in (1, 10, 100, 1000)] == [3.0] * 4


@pytest.mark.model
def test_on_the_real_stack_only_the_context_hook_changes_and_the_corpus_is_built_once(fact_index, generator):
    d = DPSynthetic(epsilon=2.0, n_passages=4, words_per_passage=5, k=2)
    pipe = pipeline_under_test(fact_index, generator, d, top_k=2, seed=4)
    trace = pipe.answer("Who founded the Halvorsen Foundry?").trace
    changed = {h.hook: h.changed for h in trace.hooks}
    assert changed == {"score_retrieval": False, "rewrite_context": True, "generate": False, "postprocess": False}
    assert all(item.doc_id.startswith("synthetic-") for item in trace.context) and len(trace.context) == 2
    assert "Ingrid" not in trace.prompt and "Pettersen" not in trace.prompt
    vocab = frozenset(load_vocabulary())
    for passage in d.synthetic:
        body = passage.text.split(":", 1)[1].strip(" .")
        assert all(w in vocab for w in body.split(", "))
    first = list(d.synthetic)
    d.begin_query(fact_index, ())
    assert len(d.rewrite_context("When does the garden open?", [])) == 2
    assert d.builds == 1 and d.synthetic == first
