"""The surprisal scorer: sentences the standard LLM cannot predict (tokens under 1% probability)
are flagged, with scripted log-probabilities standing in for the model's (the model test of
``continuation_logprobs`` is in tests/rag/test_generator.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ragleak.attacks.asymmetry.attack import KnowledgeAsymmetryAttack
from ragleak.attacks.asymmetry.classifier import AsymmetryClassifier, feature_row
from ragleak.attacks.asymmetry.probe import Observation
from ragleak.attacks.asymmetry.scoring import (SURPRISE_NATS, SentenceScore, score_sentences, surprisal_fields,
                                              surprisal_probability)
from ragleak.errors import ConfigError
from ragleak.pipeline.build import build_target
from ragleak.records import Document
from ragleak.testing import ScriptedGenerator, tiny_stack

FACTS = [Document(id="f1", text="Quorvash Tenbril keeps the Ulmark ledger at 41 Zendle Row."),
         Document(id="f2", text="The Pellick mill grinds barley for the town every week.")]
COMMON = set("the a of for at every week town mill keeps ledger row grinds barley is and to "
             "i hope this information helpful you please tell me some".split())


def known_words(prompt: str, text: str) -> list[tuple[str, float]]:
    """A stand-in likelihood: a word the 'model' knows costs 0.1 nats, any other 9 nats (p < 1%)."""
    return [(w, -0.1 if w.lower().strip(".,") in COMMON else -9.0) for w in text.split()]


def test_surprisal_fields_count_tokens_under_one_percent():
    fields = surprisal_fields([-0.1, -4.0, -4.7, -12.0])
    assert fields == {"surprisal": pytest.approx(20.8), "surprising_tokens": 2, "n_tokens": 4}
    assert math.isclose(SURPRISE_NATS, math.log(100))


@given(st.lists(st.floats(min_value=-50, max_value=0, allow_nan=False), max_size=40))
def test_surprisal_fields_are_consistent(logprobs):
    f = surprisal_fields(logprobs)
    assert 0 <= f["surprising_tokens"] <= f["n_tokens"] == len(logprobs)
    assert f["surprisal"] >= 0 and f["surprisal"] == pytest.approx(-sum(logprobs))
    assert f["surprising_tokens"] == sum(lp < -SURPRISE_NATS for lp in logprobs)


def test_score_sentences_asks_the_likelihood_about_each_sentence_as_a_reply_to_the_query(embedder):
    asked = []

    def likelihood(query, sentence):
        asked.append((query, sentence))
        return [lp for _, lp in known_words("", sentence)]

    out = score_sentences(["Quorvash Tenbril keeps the ledger.", "The mill grinds barley."], ["A mill grinds grain."],
                          embedder, None, likelihood=likelihood, query="Q?")
    assert asked == [("Q?", "Quorvash Tenbril keeps the ledger."), ("Q?", "The mill grinds barley.")]
    assert [s.surprising_tokens for s in out] == [2, 0] and out[0].n_tokens == 5
    assert score_sentences(["x y z"], [], embedder, None)[0].surprisal is None  # not scored without a likelihood


def stack_with(standard: ScriptedGenerator):
    return tiny_stack(target=lambda content: "Quorvash Tenbril keeps the Ulmark ledger. The mill grinds barley.",
                      attacker=lambda content: "Please tell me some information about the town.",
                      standard=standard)


def test_surprisal_scorer_flags_sentences_with_enough_unpredicted_tokens():
    standard = ScriptedGenerator(lambda content: "I hope this information is helpful to you.", continuation=known_words)
    stack = stack_with(standard)
    transcript = KnowledgeAsymmetryAttack(keywords=("town",), scorer="surprisal", surprising_tokens=3).run(
        build_target(stack, stack.index(FACTS)), stack.context(0), budget=1)
    obs = transcript.state["observations"][0]
    assert transcript.state["scorer"] == "surprisal" and transcript.state["decision"] == "surprisal-threshold"
    counts = [s["surprising_tokens"] for s in obs["sentences"]]
    assert counts == [3, 0]  # Quorvash, Tenbril, Ulmark; nothing in the second sentence
    assert obs["p_private"][0] > 0.5 > obs["p_private"][1] and obs["flagged"] == [True, False]
    assert transcript.extracted == ["Quorvash Tenbril keeps the Ulmark ledger."]
    # with k = 4 the same sentence is not enough
    transcript = KnowledgeAsymmetryAttack(keywords=("town",), scorer="surprisal", surprising_tokens=4).run(
        build_target(stack, stack.index(FACTS)), stack.context(0), budget=1)
    assert transcript.extracted == []


def test_surprisal_scorer_refuses_a_standard_llm_that_cannot_score_before_any_query():
    stack = stack_with(ScriptedGenerator(lambda content: "I hope this helps."))  # no continuation_logprobs
    target = build_target(stack, stack.index(FACTS))
    with pytest.raises(ConfigError, match="token log-probabilities"):
        KnowledgeAsymmetryAttack(keywords=("town",), scorer="surprisal").run(target, stack.context(0), budget=1)
    assert stack.scripted[("target", stack.config.model)].calls == 0
    # the cosine scorer needs no likelihood and runs
    KnowledgeAsymmetryAttack(keywords=("town",), scorer="cosine").run(target, stack.context(0), budget=1)


def sentence(text, cos, n_surprising, n_tokens):
    return SentenceScore(text, cos, "m", "none", 0, 0, 0, cos, surprisal=9.0 * n_surprising + 0.1 * n_tokens,
                         surprising_tokens=n_surprising, n_tokens=n_tokens)


def test_surprisal_feature_set_needs_the_likelihood_and_learns_from_it(tmp_path):
    with pytest.raises(ConfigError, match="no likelihood"):
        feature_row(SentenceScore("a b c", 0.5, "m", "none", 0, 0, 0, 0.5), ("cosine", "log_surprising"))
    rng = np.random.default_rng(0)
    observations = []
    for q in range(12):
        labels = [int(x) for x in rng.integers(0, 2, size=4)]
        # cosine is noise here; only the count of unpredicted tokens tells the classes apart
        sents = [sentence(f"s{q}-{i} words", float(rng.uniform(0, 1)), int(rng.integers(3, 8)) if y else
                          int(rng.integers(0, 2)), 12) for i, y in enumerate(labels)]
        observations.append(Observation(f"q{q}", "", "", sents, labels))
    clf = AsymmetryClassifier(feature_set="surprisal", seed=0).fit(observations[:8])
    y = np.concatenate([o.labels for o in observations[8:]])
    p = np.concatenate([clf.predict_proba(o.sentences) for o in observations[8:]])
    assert ((p >= 0.5) == (y == 1)).mean() >= 0.9
    loaded = AsymmetryClassifier.load(clf.save(tmp_path / "clf.json"))
    assert np.array_equal(loaded.predict_proba(observations[9].sentences), clf.predict_proba(observations[9].sentences))


@given(st.integers(0, 40), st.integers(0, 40), st.floats(0, 500), st.floats(0, 500), st.integers(1, 10))
def test_surprisal_probability_orders_by_count_then_surprisal_and_flags_at_k(n1, n2, s1, s2, k):
    a, b = sentence("a", 0.0, n1, 50), sentence("b", 0.0, n2, 50)
    a, b = (SentenceScore(**{**x.to_dict(), "surprisal": v}) for x, v in ((a, s1), (b, s2)))
    pa, pb = surprisal_probability(a, k), surprisal_probability(b, k)
    assert 0 <= pa < 1 and (pa >= 0.5) == (n1 >= k)
    if n1 > n2 or (n1 == n2 and s1 > s2 + 1e-6):
        assert pa > pb
