"""The utility probe: benign questions and gold answers from each document's own fields, asked
through the session like any attack, scored by the utility metrics and by nothing else."""

from __future__ import annotations

import pytest

from ragleak.attacks import make_attack
from ragleak.attacks.utility import benign_qa, draw_questions
from ragleak.context import RunContext
from ragleak.errors import ConfigError
from ragleak.measure import run_attack
from ragleak.metrics.compute import compute_metrics
from ragleak.metrics.base import MetricContext
from ragleak.records import Document, TargetResponse


def doc(i: int, text: str, **metadata) -> Document:
    return Document(id=f"d{i}", text=text, metadata=metadata)


def test_each_rule_takes_the_question_and_answer_from_the_document_itself():
    qa = benign_qa(doc(0, "abstract", question="Does X help?", long_answer="X helps in most cases."))
    assert (qa.question, qa.answer, qa.source) == ("Does X help?", "X helps in most cases.", "qa pair")
    qa = benign_qa(doc(1, "who invented the lightbulb\nthomas edison.\nin 1879", question="who invented the lightbulb"))
    assert (qa.answer, qa.source) == ("thomas edison.", "conversation")
    qa = benign_qa(doc(2, "From: Ann Lee\nSubject: Budget Q3\n\nHi", subject="Budget Q3", person="Ann Lee; Bo Chan"))
    assert (qa.question, qa.answer, qa.source) == ("What was the subject of the message Ann Lee sent?", "Budget Q3",
                                                   "subject")
    qa = benign_qa(doc(3, "Invoice 7 to Acme Ltd; contact Ann Lee, CFO.", person="Ann Lee; Bo Chan", company="Acme Ltd"))
    assert (qa.question, qa.answer) == ("Which organisation is Ann Lee associated with?", "Acme Ltd")
    qa = benign_qa(doc(4, "moon shot: the launching of a spacecraft to the moon", lemmas="moon shot"))
    assert (qa.question, qa.answer, qa.source) == ("What does 'moon shot' mean?",
                                                   "the launching of a spacecraft to the moon", "gloss")
    # any other text: a cloze over its first long sentence, the answer being the sentence's rest
    qa = benign_qa(doc(5, "Short one. The ferry between Dunmore and Clarebay leaves every ninety minutes from pier 4."))
    assert qa.source == "cloze" and '"The ferry between Dunmore and Clarebay"' in qa.question
    assert qa.answer == "leaves every ninety minutes from pier 4."
    # a value planted in the metadata but absent from the text gives no question about it
    assert benign_qa(doc(6, "Too short to ask about.", person="Ann Lee", company="Acme Ltd")) is None


def test_questions_are_drawn_by_seed_and_deterministic():
    docs = [doc(i, f"Record {i}: Person{i} Lastname works as a clerk at Company{i} in the harbour district.",
                person=f"Person{i} Lastname", company=f"Company{i}") for i in range(30)]
    a, b = draw_questions(docs, 5, seed=1), draw_questions(docs, 5, seed=1)
    assert a == b and len(a) == 5
    assert [q.doc_id for q in a] != [q.doc_id for q in draw_questions(docs, 5, seed=2)]
    assert len(draw_questions(docs[:3], 5, seed=1)) == 3


class AnswerBook:
    """A target that answers each question with a fixed text, failing where told to."""

    name = "answer-book"

    def __init__(self, answers: dict[str, str | Exception]) -> None:
        self.answers = answers

    def answer(self, query, history):
        reply = self.answers[query]
        if isinstance(reply, Exception):
            raise reply
        return TargetResponse(query=query, answer=reply)


def _probe(n: int = 4):
    docs = [doc(i, f"Client record {i}: Ann{i} Lee, CFO of Firm{i} Holdings, signed on Monday.",
                person=f"Ann{i} Lee", company=f"Firm{i} Holdings") for i in range(12)]
    probe = make_attack("utility", questions=n)
    indexed, view = probe.prepare_corpus(docs, 0)
    assert indexed == docs and len(view.documents) == n
    return probe, view, [benign_qa(d) for d in view.documents]


def test_the_probe_scores_answers_against_gold_and_leaves_failed_questions_out():
    probe, view, qas = _probe()
    answers = {qas[0].question: f"{qas[0].question.split()[3]} works for {qas[0].answer}.",
               qas[1].question: "I don't know.",
               qas[2].question: f"The Firm is {qas[2].answer}",
               qas[3].question: ConnectionError("refused")}
    transcript, metrics = run_attack(probe, AnswerBook(answers), RunContext(seed=0), [], corpus_view=view)
    assert [g["doc_id"] for g in transcript.scoring["gold"]] == [qa.doc_id for qa in qas]
    assert set(metrics) == {"utility_f1", "utility_em"}  # no leakage metric reads benign answers
    em, f1 = metrics["utility_em"], metrics["utility_f1"]
    assert (em.n, em.failed) == (3, 1)  # the failed question is counted, never scored as wrong
    assert em.value == pytest.approx(2 / 3)
    rows = {r["index"]: r for r in f1.details["per_question"]}
    assert rows[1]["f1"] == 0.0 and rows[0]["f1"] > 0.5 and 3 not in rows
    assert f1.interval is not None and f1.interval[0] <= f1.value <= f1.interval[1]


def test_an_attack_transcript_is_never_read_by_the_utility_metrics():
    attack = make_attack("ps", pool="shared-extraction")
    target = AnswerBook({})
    target.answer = lambda query, history: TargetResponse(query=query, answer="nothing here")
    transcript = attack.run(target, RunContext(seed=0), budget=2)
    assert not {"utility_f1", "utility_em"} & set(compute_metrics(transcript, MetricContext()))


def test_a_view_without_askable_documents_is_a_clear_error():
    probe = make_attack("utility")
    with pytest.raises(ConfigError, match="no document to ask"):
        probe.prepare_corpus([doc(0, "Too short.")], 0)
    with pytest.raises(ConfigError, match="views: {utility: FILE}"):
        probe.run(AnswerBook({}), RunContext(seed=0))


def test_the_example_frontier_grid_measures_utility_under_every_defense_and_epsilon():
    from pathlib import Path

    from ragleak.grid.spec import load_grid_config

    grid = load_grid_config(Path(__file__).resolve().parents[2] / "examples" / "utility-frontier" / "grid.yaml")
    cells = grid.expand()
    probed = {(c.defense, c.epsilon) for c in cells if c.attack == "utility"}
    attacked = {(c.defense, c.epsilon) for c in cells if c.attack != "utility"}
    assert probed == attacked == {(d, e) for d in ("none", "pad-regex", "dp-retrieval", "private-rag")
                                  for e in (1.0, 5.0)}
