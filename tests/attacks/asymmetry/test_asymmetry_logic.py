"""Logic of the knowledge-asymmetry attack with scripted answers (no LLM): sentence splitting,
attribution labels, metrics and bootstrap, the classifier and its persistence, Algorithm 1, and
the Attack subclass end to end."""

from __future__ import annotations

import json
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.metrics import roc_auc_score

from ragleak.attacks import Attack, Transcript
from ragleak.attacks.asymmetry.attack import KnowledgeAsymmetryAttack
from ragleak.attacks.asymmetry.classifier import AsymmetryClassifier, MLPWeights, design, select_feature_set, split_by_query
from ragleak.attacks.asymmetry.labels import attribution_label, context_passages, lcs_length, rouge_l_recall
from ragleak.attacks.asymmetry.probe import Observation
from ragleak.attacks.asymmetry.query import make_q1, make_query
from ragleak.attacks.asymmetry.refine import FACETS, extract_keywords, initial_q1s, parse_q1_lines, run_refinement
from ragleak.attacks.asymmetry.scoring import SentenceScore, split_sentences
from ragleak.errors import ConfigError
from ragleak.metrics import MetricContext
from ragleak.metrics import attribution as metrics
from ragleak.pipeline.target import CallableTarget

from ragleak.testing import ScriptedGenerator, pipeline_under_test, prompt_words_likelihood, target_under_test

from attacks.conftest import parts_context


# -- query and sentences ---------------------------------------------------------------------
def test_query_is_q1_then_q2():
    assert make_q1(["heart failure"]) == "Please tell me some information related to heart failure."
    assert make_q1(["a", "b", "c"]) == "Please tell me some information related to a, b and c."
    q = make_query(make_q1(["stroke"]))
    assert q == "Please tell me some information related to stroke and provide contextual information based on the retrieved content."
    with pytest.raises(ValueError):
        make_q1([" "])


def test_sentence_splitter_handles_abbreviations_numbers_and_lists():
    text = "Dr. Smith saw the patient on Jan. 3, 2023 and prescribed 2.5 mg. She recovered.\n1. **Item**: first\n- second one"
    assert split_sentences(text) == [
        "Dr. Smith saw the patient on Jan. 3, 2023 and prescribed 2.5 mg.", "She recovered.", "Item: first", "second one"]
    assert split_sentences("   \n -- \n") == []


# -- attribution labels ------------------------------------------------------------------------
def test_lcs_and_rouge_recall():
    assert lcs_length("a b c d".split(), "a x c d".split()) == 3
    assert rouge_l_recall("Maria was treated for asthma", "Patient Maria Gonzales was treated at Riverside for asthma") == 1.0
    assert rouge_l_recall("", "anything") == 0.0


@given(st.lists(st.sampled_from("abcdef"), max_size=12), st.lists(st.sampled_from("abcdef"), max_size=12))
def test_lcs_is_symmetric_and_bounded(a, b):
    n = lcs_length(a, b)
    assert n == lcs_length(b, a) and 0 <= n <= min(len(a), len(b))


def test_attribution_rule_threshold_and_minimum_length():
    passages = ["Client record 0001: Ana Diaz, CFO of Vega Ltd, can be reached at ana@vega.com."]
    assert attribution_label("Ana Diaz is the CFO of Vega Ltd.", passages) == 1
    assert attribution_label("Invoices are documents that record a sale.", passages) == 0
    assert attribution_label("The CFO can.", passages) == 0  # one content word: below min_tokens
    assert attribution_label("Ana Diaz.", passages) == 1  # short, but a bare name from the context discloses it
    assert attribution_label("Ana Diaz.", passages, min_tokens=2) == 1


def test_context_passages_inverts_the_prompt(fact_index):
    pipe = pipeline_under_test(fact_index, lambda _: "ok", top_k=2)
    trace = pipe.answer("When does the ferry leave?").trace
    texts = {p.id: p.text for p in fact_index.passages}
    assert context_passages(trace) == [texts[item.passage_id] for item in trace.context]


# -- metrics -------------------------------------------------------------------------------------
def test_metric_values():
    y = np.array([1, 1, 1, 0, 0])
    pred = np.array([1, 1, 0, 1, 0])
    assert metrics.esr(y, pred) == pytest.approx(2 / 3)
    assert metrics.f1(y, pred) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert np.isnan(metrics.esr(np.zeros(3), np.ones(3)))


@settings(max_examples=50)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), min_size=2, max_size=30))
def test_auc_matches_sklearn(rows):
    y = np.array([r[0] for r in rows])
    x = np.array([r[1] for r in rows], dtype=float)
    if len(set(y.tolist())) < 2:
        assert np.isnan(metrics.auc(y, x))
    else:
        assert metrics.auc(y, x) == pytest.approx(roc_auc_score(y, x))


def test_bootstrap_is_seeded_and_brackets_the_value():
    rng = np.random.default_rng(1)
    groups = []
    for _ in range(12):
        y = rng.integers(0, 2, 6)
        groups.append((y, y + rng.normal(0, 0.8, 6)))
    a = metrics.query_bootstrap(groups, metrics.auc, 500, seed=3)
    b = metrics.query_bootstrap(groups, metrics.auc, 500, seed=3)
    c = metrics.query_bootstrap(groups, metrics.auc, 500, seed=4)
    assert a == b and a != c
    assert a["low"] <= a["value"] <= a["high"] and a["value"] > 0.6
    one_class = metrics.query_bootstrap([(np.ones(3), np.arange(3.0)), (np.ones(2), np.arange(2.0))], metrics.auc, 50)
    assert np.isnan(one_class["value"]) and one_class["n_undefined"] == 50
    report = metrics.evaluate(groups, n_resamples=200)
    assert set(report) >= {"esr", "f1", "auc"} and report["n_queries"] == 12


# -- classifier ----------------------------------------------------------------------------------
def scripted_observations(n_queries: int, seed: int, informative: str = "score") -> list[Observation]:
    """Sentences whose ``informative`` feature separates private (low) from public (high);
    the other features are noise."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_queries):
        sentences, labels = [], []
        for _ in range(6):
            y = int(rng.integers(0, 2))
            signal = float(np.clip(rng.normal(0.25 if y else 0.8, 0.12), -1, 1))
            noise = float(rng.uniform(-1, 1))
            cos, score = (noise, signal) if informative == "score" else (signal, noise)
            p = rng.dirichlet([1, 1, 1])
            sentences.append(SentenceScore(f"s{q}-{len(labels)} words here", cos, "m", "neutral", *map(float, p), score))
            labels.append(y)
        out.append(Observation(f"query {q}", "r", "a", sentences, labels))
    return out


def test_classifier_learns_low_score_means_private_and_round_trips(tmp_path):
    obs = scripted_observations(20, seed=0)
    train, test = split_by_query(obs, 0.3, seed=0)
    assert len(test) == 6 and {o.query for o in train}.isdisjoint(o.query for o in test)
    clf = AsymmetryClassifier("paper").fit(train)
    report = metrics.evaluate(clf.groups(test), n_resamples=300)
    assert report["auc"]["value"] > 0.9
    low, high = clf.predict_proba([SentenceScore("x y z", 0, "m", "neutral", 0, 1, 0, s) for s in (0.1, 0.9)])
    assert low > 0.5 > high
    path = clf.save(tmp_path / "m.json")
    meta = json.loads(path.read_text())
    assert meta["hyperparameters"]["feature_set"] == "paper" and meta["training"]["n_queries"] == len(train)
    assert [len(c) for c in meta["weights"]["coefs"]] == [1, 16, 8]  # plain arrays: features -> 16 -> 8 -> 1
    again = AsymmetryClassifier.load(path)
    probe = [s for o in test for s in o.sentences]
    assert again.predict_proba(probe).tolist() == clf.predict_proba(probe).tolist()
    meta["schema_version"] = 1
    path.write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="retrain"):
        AsymmetryClassifier.load(path)
    meta["schema_version"], meta["weights"]["coefs"][1] = 2, [[0.0] * 7] * 16  # a layer of the wrong shape
    path.write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="do not fit"):
        AsymmetryClassifier.load(path)


@pytest.mark.parametrize("feature_set", ["paper", "extended"])
def test_numpy_forward_pass_equals_sklearns(feature_set):
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = design(scripted_observations(15, seed=3), feature_set)
    pipe = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(16, 8), max_iter=300, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence is not the point here
        pipe.fit(X, y)
    sample = np.random.default_rng(4).normal(size=(50, X.shape[1])) * 2 + X.mean(axis=0)
    ours = MLPWeights.from_sklearn(pipe).predict_proba(sample)
    np.testing.assert_allclose(ours, pipe.predict_proba(sample)[:, 1], rtol=1e-12, atol=1e-15)


def test_a_pickle_classifier_path_is_refused_and_never_executed(tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))  # unpickling would create the marker file

    for name in ("model.joblib", "model.json", "model.bin"):  # by suffix and by content alike
        path = tmp_path / name
        path.write_bytes(pickle.dumps(Payload(), protocol=4))
        attack = KnowledgeAsymmetryAttack(classifier_path=str(path), nli="none")
        with pytest.raises(ConfigError) as info:
            AsymmetryClassifier.load(path)
        message = str(info.value)
        assert "pickle" in message and "\n" not in message
        with pytest.raises(ConfigError, match="pickle"):
            attack.run(CallableTarget(lambda q: "an answer."), parts_context(), budget=1)
    assert not marker.exists()
    for bad, match in ((tmp_path, "not a regular file"), (tmp_path / "none.json", "does not exist")):
        with pytest.raises(ConfigError, match=match):
            AsymmetryClassifier.load(bad)


def test_classifier_refuses_one_class_and_unlabelled_data():
    obs = scripted_observations(3, seed=1)
    single = [Observation(o.query, "r", "a", o.sentences, [0] * len(o.sentences)) for o in obs]
    with pytest.raises(ConfigError, match="both classes"):
        AsymmetryClassifier().fit(single)
    with pytest.raises(ConfigError, match="no labels"):
        AsymmetryClassifier().fit([Observation("q", "r", "a", obs[0].sentences, None)])
    with pytest.raises(ConfigError, match="not fitted"):
        AsymmetryClassifier().predict_proba(obs[0].sentences)


def test_feature_selection_uses_the_informative_feature():
    obs = scripted_observations(12, seed=2, informative="cosine")
    best, scores = select_feature_set(obs)
    assert best in ("cosine", "extended") and scores["paper"] < 0.7 < scores[best]


# -- Algorithm 1 -----------------------------------------------------------------------------------
def test_parse_and_pad_initial_q1s():
    raw = "1. Please tell me some information related to law.\n2) **What is modern medicine about?**\nOk\n- What is modern medicine about?"
    assert parse_q1_lines(raw) == ["Please tell me some information related to law.", "What is modern medicine about?"]
    gen = ScriptedGenerator(lambda _: raw)
    got = initial_q1s(gen, n=5)
    assert got.from_llm == 2 and len(got.q1s) == 5 and len(set(got.q1s)) == 5
    assert got.q1s[2:] == [make_q1([facet]) for facet in FACETS[:3]]  # padded with facets, never domains


def test_keywords_prefer_new_proper_nouns():
    private = ["Policy 0002 (Gold Advantage) was issued by Hall Mutual Insurance to Curtis Stewart.",
               "The deductible is $295.00 for physiotherapy and physiotherapy visits."]
    assert extract_keywords(private, "Please tell me some information related to insurance", k=3) == [
        "Gold Advantage", "Hall Mutual Insurance", "Curtis Stewart"]
    assert extract_keywords(private[1:], "insurance", k=2) == ["physiotherapy", "deductible"]
    assert extract_keywords(private[1:], "deductible physiotherapy visits", k=2) == []


def test_refinement_feeds_keywords_back_and_stops_on_budget():
    def ask(q1):
        text = "Ana Diaz works at Vega Ltd." if "law" in q1 else "Nothing new."
        s = SentenceScore(text, 0.1 if "Diaz" in text else 0.9, "m", "neutral", 0, 1, 0, 0.1 if "Diaz" in text else 0.9)
        return Observation(q1, text, "llm", [s], None)

    decide = lambda sentences: [s.score < 0.5 for s in sentences]  # noqa: E731
    steps = run_refinement([make_q1(["law"]), make_q1(["sport"])], ask, decide, budget=3, keywords_per_refinement=2)
    assert [s.q1 for s in steps] == [make_q1(["law"]), make_q1(["sport"]), make_q1(["Ana Diaz", "Vega Ltd"])]
    assert steps[0].refined_to == make_q1(["Ana Diaz", "Vega Ltd"]) and steps[1].refined_to is None
    assert len(run_refinement([make_q1(["x"])], ask, decide, budget=10)) == 1  # queue empties first
    assert run_refinement([make_q1(["law"])], ask, decide, budget=0) == []


# -- the Attack ------------------------------------------------------------------------------------
def copy_first_passage(prompt: str) -> str:
    """A scripted RAG LLM that repeats its first passage, then adds a generic sentence."""
    first = prompt.split("Passage 1: ", 1)[1].split("\n", 1)[0] if "Passage 1: " in prompt else "I don't know."
    return first + " I hope this information is helpful to you."


def generic_llm(_: str) -> str:
    return "I hope this information is helpful to you. Libraries and ferries serve many towns."


def test_attack_is_registered_shape_and_params_round_trip():
    assert issubclass(KnowledgeAsymmetryAttack, Attack)
    params = KnowledgeAsymmetryAttack.Params()
    assert type(params).model_validate_json(params.model_dump_json()) == params
    with pytest.raises(ConfigError):
        KnowledgeAsymmetryAttack(nli="bert")


@pytest.mark.model  # the stack's packaged NLI model scores the sentences
def test_attack_end_to_end_single_domain_with_labels(fact_index, embedder):
    target = target_under_test(fact_index, copy_first_passage, top_k=2)
    llm_gen = ScriptedGenerator(generic_llm)
    attack = KnowledgeAsymmetryAttack(keywords=("the ferry", "the library"), scorer="cosine", nli="onnx")  # packaged NLI
    transcript = attack.run(target, parts_context(llm_gen, embedder, seed=0), budget=3)
    assert len(transcript.queries) == 3 and transcript.errors == 0
    state = transcript.state
    assert state["mode"] == "single-domain" and state["decision"] == "cosine-threshold"
    assert [o["q1"] for o in state["observations"]][:2] == [make_q1(["the ferry"]), make_q1(["the library"])]
    assert state["observations"][0]["refined_to"] == state["observations"][2]["q1"]  # keyword feedback
    # one scripted model plays every role: 3 plain answers and the 1 refinement the attacker wrote
    assert state["standard_llm_calls"] == 3 and state["refinements"] == {"llm": 1, "template": 0}
    assert llm_gen.calls == 4
    # the copied passage sentences are flagged, the generic sentence shared with the LLM is not
    assert any("ferry" in s for s in transcript.extracted)
    assert not any("helpful" in s for s in transcript.extracted)
    from ragleak.metrics.compute import compute_metrics

    readings = compute_metrics(transcript, MetricContext())
    assert readings["attribution_auc"].details["private"] > 0 and readings["attribution_auc"].value == 1.0
    assert Transcript.from_json(transcript.to_json()) == transcript


def test_attack_zero_prior_uses_llm_written_q1s_and_black_box_target(embedder):
    q1s = "\n".join(f"{i}. Please tell me some information related to {d}." for i, d in
                    enumerate(["law", "medicine", "finance"], start=1))
    llm_gen = ScriptedGenerator(lambda content: q1s if "test set" in content else generic_llm(content),
                                continuation=prompt_words_likelihood)
    target = CallableTarget(lambda q: "Ana Diaz owes $4,000 to Vega Ltd. I hope this information is helpful to you.")
    attack = KnowledgeAsymmetryAttack(nli="none", n_initial=3)
    transcript = attack.run(target, parts_context(llm_gen, embedder, seed=1), budget=2)
    assert transcript.state["mode"] == "zero-prior" and transcript.state["initial_from_llm"] == 3
    assert [o["q1"] for o in transcript.state["observations"]] == [
        "Please tell me some information related to law.", "Please tell me some information related to medicine."]
    assert "asymmetry" not in transcript.scoring  # no trace, no ground truth
    assert any("Ana Diaz" in s for s in transcript.extracted)


def test_llm_judge_is_a_softmax_over_the_label_tokens():
    from ragleak.nlp.nli import LLMJudgeNLI

    class Judge(ScriptedGenerator):
        vocab = {"contradiction": 7, "neutral": 8, "entailment": 9}

        def tokenize(self, text):
            return [self.vocab[text], 1]

        def next_token_logprobs(self, prompt):
            z = np.full(16, -20.0)
            z[7], z[8], z[9] = (0.0, -1.0, -2.0) if "unsafe" in prompt else (-3.0, -3.0, 0.0)
            return z

    [bad, good] = LLMJudgeNLI(Judge(lambda _: "")).predict([("This drug is safe.", "This drug is unsafe."),
                                                            ("This drug is safe.", "The drug is safe.")])
    e = np.exp([0.0, -1.0, -2.0])
    assert bad.probs == pytest.approx(tuple(e / e.sum())) and bad.label == "contradiction"
    assert good.label == "entailment"
