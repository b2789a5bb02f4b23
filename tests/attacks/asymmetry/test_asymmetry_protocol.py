"""The knowledge-asymmetry attack's protocol with scripted models (no LLM, no NLI model): the
standard LLM follows the stack, zero-prior prompts name no domain, refinement goes through the
attacker LLM, labels catch recombination and ignore boilerplate, ``train`` fits the MLP on a 7:3
split and scores only the held-out queries, and ESR comes with precision and the flag-all
baseline."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from ragleak.attacks.asymmetry.attack import KnowledgeAsymmetryAttack
from ragleak.attacks.asymmetry.classifier import AsymmetryClassifier
from ragleak.attacks.asymmetry.labels import Boilerplate, attribution, attribution_label, specific_tokens
from ragleak.attacks.asymmetry.query import make_q1
from ragleak.attacks.asymmetry.refine import FACETS, INITIAL_PROMPT, REFINE_PROMPT, initial_q1s, refine_q1
from ragleak.config import StackConfig
from ragleak.metrics import MetricContext
from ragleak.metrics import attribution as metrics
from ragleak.pipeline.build import build_target
from ragleak.records import Document
from ragleak.testing import ScriptedGenerator, tiny_stack

# words naming the subject of a built-in corpus (ragleak.corpora): none may reach a zero-prior prompt
BUILT_IN_DOMAIN_WORDS = ("medic", "health", "patient", "clinic", "insur", "claim", "e-mail", "email", "mail",
                         "corporat", "compan", "invoice", "personnel", "salary", "policy", "policies", "law",
                         "legal", "financ", "biomed", "pubmed", "wordnet", "employ")


def test_zero_prior_prompts_and_padding_name_no_built_in_domain():
    text = " ".join([INITIAL_PROMPT, REFINE_PROMPT, *FACETS]).lower()
    assert not [w for w in BUILT_IN_DOMAIN_WORDS if w in text]
    got = initial_q1s(ScriptedGenerator(lambda _: "Sure, here are some requests:\n1. Tell me about rivers and towns"), n=4)
    assert got.from_llm == 1 and got.q1s[0] == "Tell me about rivers and towns"
    assert got.q1s[1:] == [make_q1([f]) for f in FACETS[:3]]


def test_refinement_is_written_by_the_attacker_llm_with_template_fallback():
    seen = []

    def writer(prompt):
        seen.append(prompt)
        return "Request: Tell me more about Ana Diaz and her role at Vega Ltd."

    q1, by = refine_q1(ScriptedGenerator(writer), ["Ana Diaz is the CFO of Vega Ltd."], ["Ana Diaz", "Vega Ltd"])
    assert (q1, by) == ("Tell me more about Ana Diaz and her role at Vega Ltd.", "llm")
    assert "Ana Diaz is the CFO of Vega Ltd." in seen[0] and "Vega Ltd" in seen[0]
    assert refine_q1(ScriptedGenerator(lambda _: "ok"), ["x y z"], ["Vega Ltd"]) == (make_q1(["Vega Ltd"]), "template")
    assert refine_q1(ScriptedGenerator(lambda _: "ok"), ["x y z"], []) == (None, None)


# -- labels -----------------------------------------------------------------------------------------
PASSAGES = ["Ana Diaz is the CFO of Vega Ltd and signs every wire transfer.",
            "Orlo Quint lives at 14 Brindle Lane, Tessford, and owns Quint Mills."]


def test_recombined_facts_are_private_though_no_single_passage_contains_them():
    recombined = "Vega Ltd's finance chief Ana Diaz has her home on 14 Brindle Lane, Tessford."
    assert attribution(recombined, PASSAGES) < 0.5  # the ROUGE-only rule missed this leak
    assert attribution_label(recombined, PASSAGES) == 1
    assert attribution_label("Wire transfers are a common way to move money between banks.", PASSAGES) == 0
    # the names come from the query, not the context: no leak by recombination
    assert attribution_label("Ana Diaz and Vega Ltd are well known in business.", PASSAGES,
                             query="Tell me about Ana Diaz at Vega Ltd") == 0
    assert {"14", "brindle", "tessford", "diaz"} <= specific_tokens(PASSAGES[0] + " " + PASSAGES[1])


def test_template_boilerplate_shared_by_every_record_is_not_private():
    pool = [f"Record {i}: {name} was seen on {day} May. The next review is due in six months and the file "
            f"stays open until then." for i, (name, day) in
            enumerate([("Orlo Quint", 3), ("Ana Diaz", 9), ("Bel Varro", 12), ("Ido Krane", 20), ("Sef Tolm", 28)])]
    boiler = Boilerplate.from_passages(pool)
    template = "The next review is due in six months and the file stays open until then."
    assert attribution(template, pool[:2]) == 1.0  # ROUGE alone calls it private
    assert attribution_label(template, pool[:2], boilerplate=boiler) == 0
    assert attribution_label("Orlo Quint was seen on 3 May.", pool[:2], boilerplate=boiler) == 1
    assert Boilerplate.from_passages(pool[:3]).ngrams == frozenset()  # too few passages to call anything shared


def test_a_name_and_address_repeated_on_every_header_stay_private():
    pool = [f"From: Orla Brenn <orla.brenn@kestrel.test>\nTo: the desk team\nSubject: week {i}\n{body}" for i, body in
            enumerate(["The barge leaves at noon.", "Invoices are late again.", "Gate 4 is closed.",
                       "The crane needs oil.", "Two pallets went missing."])]
    boiler = Boilerplate.from_passages(pool)
    assert any("orla" in g for g in boiler.ngrams)  # the header is boilerplate text ...
    # ... but the person in it is not: her name and address are still a leak
    assert attribution_label("Orla Brenn <orla.brenn@kestrel.test>", pool[:2], boilerplate=boiler) == 1
    assert attribution_label("To: the desk team", pool[:2], boilerplate=boiler) == 0


# -- the attack on a scripted stack ---------------------------------------------------------------------
FACTS = [Document(id=f"d{i}", text=f"Town {t} has {n} mills; its keeper {k} lives at {a} Orn Lane.")
         for i, (t, n, k, a) in enumerate([("Vessor", 41, "Ana Driel", 12), ("Quorth", 17, "Bel Sarn", 5),
                                          ("Maldry", 63, "Ido Venn", 88), ("Tressa", 29, "Uma Colt", 31),
                                          ("Brisk", 52, "Ola Frey", 7), ("Kelth", 11, "Rin Moss", 64)])]


def copy_first_passage(prompt: str) -> str:
    first = prompt.split("Passage 1: ", 1)[1].split("\n", 1)[0] if "Passage 1: " in prompt else "I don't know."
    return first + "\nI hope this information is helpful to you."


def writer(prompt: str) -> str:
    if "test set" in prompt:
        return "\n".join(f"{i}. Tell me about topic number {i} please" for i in range(1, 4))
    names = re.findall(r"keeper (\w+ \w+)", prompt)
    return f"Tell me more about {names[0]} and the mills." if names else "ok"


def standard(_: str) -> str:
    return "I hope this information is helpful to you. Towns often have mills and lanes."


def scripted_stack(config: StackConfig | None = None):
    return tiny_stack(config=config, target=copy_first_passage, attacker=writer, standard=standard)


def test_standard_llm_follows_the_stack_config_and_its_max_tokens():
    cfg = StackConfig(model="smollm2-135m", n_threads=1, top_k=2, candidate_k=4, decoding={"max_tokens": 77})
    stack = scripted_stack(cfg)
    llm, writer_gen, _, nli = KnowledgeAsymmetryAttack()._parts(stack.context(0))
    assert llm.generator is stack.generator("standard") and llm.params is None  # the stack's decoding
    assert stack.scripted[("standard", "smollm2-135m")].params.max_tokens == 77 == cfg.decoding.max_tokens
    assert writer_gen is stack.generator("attacker") and nli is None  # NLI off by default
    capped, *_ = KnowledgeAsymmetryAttack(standard_max_tokens=40)._parts(stack.context(0))
    assert capped.params == cfg.decoding.model_copy(update={"max_tokens": 40})


def test_zero_prior_run_refines_through_the_attacker_and_reports_documents_reached():
    stack = scripted_stack()
    target = build_target(stack, stack.index(FACTS))
    transcript = KnowledgeAsymmetryAttack(n_initial=3, scorer="cosine").run(target, stack.context(0), budget=5)
    state = transcript.state
    assert state["mode"] == "zero-prior" and state["initial_from_llm"] == 3 and state["nli"] == "none"
    refined = [o for o in state["observations"] if o["refined_to"]]
    assert refined and all(o["refined_by"] == "llm" for o in refined)
    assert state["refinements"]["llm"] == len(refined) and state["refinements"]["template"] == 0
    asked = [o["q1"] for o in state["observations"]]
    assert asked[3].startswith("Tell me more about ")  # the first refinement, asked after the 3 initial q1s
    scoring = transcript.scoring["asymmetry"]
    assert set(scoring["documents_reached"]) <= {d.id for d in FACTS} and scoring["documents_reached"]
    readings = {k: m for k, m in __import__("ragleak.metrics.compute", fromlist=["x"]).compute_metrics(
        transcript, MetricContext()).items() if k.startswith("attribution")}
    esr = readings["attribution_esr"]
    assert esr.value == 1.0 and esr.details["precision"] == 1.0
    assert esr.details["flag_all"]["esr"] == 1.0 and esr.details["flag_all"]["precision"] < 1.0


def test_train_fits_on_seventy_percent_scores_the_held_out_thirty_and_saves_plain_json(tmp_path):
    stack = scripted_stack()
    target = build_target(stack, stack.index(FACTS))
    out = tmp_path / "clf.json"
    transcript = KnowledgeAsymmetryAttack(keywords=tuple(f"mills {i}" for i in range(10)), train=True,
                                          scorer="cosine", classifier_features="paper", classifier_out=str(out)).run(target, stack.context(3), budget=10)
    scoring = transcript.scoring["asymmetry"]
    info = scoring["classifier"]
    assert scoring["decision"] == "trained-classifier" and scoring["threshold"] == 0.5
    assert len(info["test_queries"]) == 3 and len(info["train_queries"]) == 7
    assert set(info["train_queries"]).isdisjoint(info["test_queries"])
    assert sorted(row["query_index"] for row in scoring["labels"]) == info["test_queries"]
    assert json.loads(out.read_text())["kind"] == "ragleak.asymmetry.classifier"
    assert out.read_bytes()[:1] == b"{"  # JSON, never a pickle
    # reuse on another target: the saved classifier decides, no training
    other = tiny_stack(target=copy_first_passage, attacker=writer, standard=standard)
    facts = [Document(id=f"o{i}", text=f"Keeper Zed Morrow{i} holds {i + 3} keys at {i * 7 + 1} Pell Road.")
             for i in range(4)]
    reused = KnowledgeAsymmetryAttack(keywords=("keys",), classifier_path=str(out)).run(
        build_target(other, other.index(facts)), other.context(0), budget=2)
    assert reused.state["decision"] == "classifier"
    p = AsymmetryClassifier.load(out).predict_proba(
        [__import__("ragleak.attacks.asymmetry.scoring", fromlist=["x"]).SentenceScore(**s)
         for s in reused.state["observations"][0]["sentences"]])
    assert reused.state["observations"][0]["p_private"] == pytest.approx(list(p))


def test_train_and_classifier_path_together_are_refused():
    from ragleak.errors import ConfigError

    with pytest.raises(ConfigError, match="not both"):
        KnowledgeAsymmetryAttack(train=True, classifier_path="x.json")
    with pytest.raises(ConfigError):
        KnowledgeAsymmetryAttack(classifier_features="bogus")


def test_evaluate_reports_precision_and_the_flag_all_baseline():
    groups = [(np.array([1, 0, 0, 0]), np.array([0.9, 0.8, 0.1, 0.2])), (np.array([1, 1, 0]), np.array([0.7, 0.2, 0.1]))]
    report = metrics.evaluate(groups, threshold=0.5, n_resamples=100)
    assert report["esr"]["value"] == pytest.approx(2 / 3) and report["precision"]["value"] == pytest.approx(2 / 3)
    assert report["flag_all"] == {"esr": 1.0, "precision": 3 / 7, "f1": pytest.approx(2 * 3 / (2 * 3 + 4)), "auc": 0.5}


def test_labels_agree_with_hand_checked_sentences_better_than_rouge_alone():
    """The stated agreement rate (labels.py): 58 of 60 hand-checked sentences of real RAG answers
    on a template corpus, against 50 of 60 for the ROUGE-only rule."""
    from importlib.resources import files

    from ragleak.lcs import tokens

    data = json.loads((files("ragleak") / "data" / "asymmetry" / "label-handcheck.v1.json").read_text())
    pool, items = data["pool"], data["items"]
    boiler = Boilerplate.from_passages(pool)
    new = old = 0
    for s in data["sentences"]:
        passages, query = [pool[i] for i in items[s["item"]]["passages"]], items[s["item"]]["query"]
        new += attribution_label(s["sentence"], passages, boilerplate=boiler, query=query) == s["hand"]
        old += int(len(tokens(s["sentence"])) >= 3 and attribution(s["sentence"], passages) >= 0.5) == s["hand"]
    assert len(data["sentences"]) == 60 and (new, old) == (58, 50)


def test_labels_agree_with_hand_checked_email_sentences_and_keep_recurring_correspondents_private():
    """labels.py's second check: 40 hand-labelled sentences of real answers over e-mails, where a
    few correspondents recur on many headers: 40/40 (the earlier boilerplate rule: 29/40)."""
    from importlib.resources import files

    data = json.loads((files("ragleak") / "data" / "asymmetry" / "label-handcheck-email.v1.json").read_text())
    pool, items = data["pool"], data["items"]
    boiler = Boilerplate.from_passages(pool)
    agree = {"random": 0, "disagreement": 0}
    for s in data["sentences"]:
        passages, query = [pool[i] for i in items[s["item"]]["passages"]], items[s["item"]]["query"]
        agree[s["sample"]] += attribution_label(s["sentence"], passages, boilerplate=boiler, query=query) == s["hand"]
    assert len(data["sentences"]) == 40 and agree == {"random": 29, "disagreement": 11}


def test_a_dry_queue_is_refilled_from_the_reserve_until_the_budget_is_spent():
    from ragleak.attacks.asymmetry.probe import Observation
    from ragleak.attacks.asymmetry.refine import run_refinement

    asked = []

    def ask(q1):
        asked.append(q1)
        return Observation(q1, "r", "a", [], None)  # nothing flagged: no feedback

    steps = run_refinement(["a b c"], ask, lambda s: [], budget=3, reserve=["a b c", "d e f", "g h i", "j k l"])
    assert asked == ["a b c", "d e f", "g h i"] and len(steps) == 3
    assert len(run_refinement(["a b c"], ask, lambda s: [], budget=5, reserve=["d e f"])) == 2  # reserve exhausted


def test_a_keyword_run_whose_feedback_stalls_still_spends_its_budget_within_its_keywords():
    from ragleak.attacks.asymmetry.attack import facet_queries

    keywords = ["mills", "ferries", "guild ledgers"]
    reserve = facet_queries(keywords)
    assert len(reserve) == len(FACETS) * len(keywords) == len(set(reserve))  # every facet within every keyword
    assert {q.rsplit(" in ", 1)[1].rstrip(".") for q in reserve[:len(keywords)]} == set(keywords)
    assert facet_queries([]) == [make_q1([f]) for f in FACETS]
    for k in (len(FACETS) + 1, 2 * (len(FACETS) + 1), 5):  # any number of keywords, a multiple of F + 1 too
        many = [f"topic{j}" for j in range(k)]
        assert len(set(facet_queries(many))) == len(FACETS) * k
    stack = scripted_stack()
    target = build_target(stack, stack.index(FACTS))
    # cosine scorer against a plain LLM that says nothing: each answer is flagged, but a budget of
    # 8 outlasts the 2 keywords and whatever the refinement writes
    transcript = KnowledgeAsymmetryAttack(keywords=("mills", "keepers"), scorer="cosine").run(
        target, stack.context(0), budget=8)
    asked = [o["q1"] for o in transcript.state["observations"]]
    assert len(asked) == 8 and len(set(asked)) == 8
    assert any(q in facet_queries(["mills", "keepers"]) for q in asked)
