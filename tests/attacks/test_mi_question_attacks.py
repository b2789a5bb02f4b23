"""The question-based membership attacks (mi-entailment, mi-interrogation, mi-dcmi): their text tools,
their scorers' logic on scripted targets, their budgets and failed probes. The attacker LLM is
scripted here (it is not what these tests prove); the NLI model and WordNet are the real ones.
The strength of mi-entailment against the real stack is a measurement, not a test
(benchmarks/bench_mi.py)."""

from __future__ import annotations

import pytest

from ragleak.attacks import make_attack
from ragleak.attacks.base import CorpusView
from ragleak.attacks.membership import distinct_documents, membership_split
from ragleak.attacks.mi_entailment import (BLANK, CUT_SLACK, ContinuationQuestion, WithheldQuestion, anchors,
                                           continuation_questions, continued_share, document_frequencies,
                                           fallback_questions, filled_statement,
                                           idf_weights, passages, supplied_share, usable_questions,
                                           withheld_questions)
from ragleak.attacks.mi_interrogation import interrogation_questions
from ragleak.attacks.mi_text import WORDNET_ROOT, Antonyms, interrogation_score, perturb, sentences, yes_no_label
from ragleak.pipeline.target import CallableTarget
from ragleak.records import Document
from ragleak.testing import tiny_stack

MEMBER = Document(id="m", text=(
    "The Harwick clinic opened a new cardiology ward in 2019. Its head nurse, Alma Brecht, trained forty staff "
    "in rapid triage. Patients waited eleven minutes on average after the change. The ward is small but busy."))
OTHER = Document(id="n", text=(
    "The Ostrava depot stores winter road salt for three districts. Its manager, Petr Kolar, orders deliveries "
    "each October. A full depot holds nine thousand tonnes. The old roof is weak and leaky."))


needs_wordnet = pytest.mark.skipif(not (WORDNET_ROOT / "data.adj").is_file(),
                                   reason="Debian's wordnet-base is not installed")


@pytest.fixture(scope="module")
def antonyms() -> Antonyms:
    return Antonyms.load()


def test_yes_no_label_and_interrogation_score():
    assert [yes_no_label(a) for a in ("Yes, it is.", "no.", "I don't know", "Nobody knows")] == \
        ["yes", "no", "unknown", "unknown"]
    # a truth that is unknown never matches, even an unknown answer; unknown answers cost lam each
    assert interrogation_score(["Yes", "No", "Unclear"], ["yes indeed", "Yes", "unclear"], lam=0) == pytest.approx(1 / 3)
    assert interrogation_score(["Yes", "No"], ["Yes", "maybe"], lam=5) == pytest.approx((1 - 5) / 2)
    with pytest.raises(ValueError):
        interrogation_score(["Yes"], [])


@needs_wordnet
def test_wordnet_antonyms_and_perturbation(antonyms):
    assert antonyms.get("small") == "large" and antonyms.get("Weak") == "strong"
    changed = perturb("The ward is small but busy.", antonyms, share=1.0)
    assert changed.kind == "antonym" and set(changed.changed) == {"small", "busy"}
    assert changed.text == "The ward is large but idle."
    assert perturb("Visit 12 of them.", Antonyms({"x": "y"})).text == "Visit 13 of them."
    assert perturb("It is there.", Antonyms({"x": "y"})).text == "It is not there."
    assert perturb("Hello there.", Antonyms({"x": "y"})).kind == "none"
    # seeded: the same seed picks the same words
    long = "The good dog is fast and the bad cat is slow and the high wall is weak."
    assert perturb(long, antonyms, 0.2, seed=3) == perturb(long, antonyms, 0.2, seed=3)


def test_questions_writer_filter_and_fallback():
    written = ("1. When did the Harwick clinic open its cardiology ward?\n2. What is the weather?\n"
               "3. When did the Harwick clinic open its cardiology ward?\n4. Not a question about Harwick\n"
               "5. Who trained forty staff in rapid triage?\n6. What did Alma Brecht train the staff in?")
    # a question naming none of the document's specific words (names, numbers) is too generic to use
    assert usable_questions(written, MEMBER.text, 5) == ["When did the Harwick clinic open its cardiology ward?",
                                                          "What did Alma Brecht train the staff in?"]
    assert anchors(MEMBER.text) >= {"harwick", "2019", "alma", "brecht"} and "staff" not in anchors(MEMBER.text)
    fallback = fallback_questions(MEMBER.text, 3)
    assert fallback == ["What does the record say about The Harwick clinic opened a new cardiology ward?",
                        "What does the record say about Patients waited eleven minutes on average?",
                        "What does the record say about The ward is small but busy?"]
    assert len(sentences(MEMBER.text)) == 4


def _kb_target(kb: list[Document], refusal: str = "I don't know; the context does not mention that."):
    """Answers with the sentence of a KB document that shares most words with the query, else refuses."""
    def answer(query: str) -> str:
        words = {w.strip("?.,\"").lower() for w in query.split() if len(w) > 3}
        best, hits = None, 0
        for doc in kb:
            for s in sentences(doc.text):
                n = len(words & {w.strip(".,").lower() for w in s.split()})
                if n > hits:
                    best, hits = s, n
        return best if hits >= 2 else refusal
    return answer


@pytest.mark.model
def test_entailment_attack_scores_members_above_nonmembers_and_uses_the_fallback():
    # the writer's output is unusable for every candidate: all questions come from the fallback
    stack = tiny_stack(attacker="Sure! Here are some questions.")
    view = CorpusView(documents=[MEMBER, OTHER], member_ids=["m"])
    attack = make_attack("mi-entailment", questions="writer", n_questions=2)
    t = attack.run(CallableTarget(_kb_target([MEMBER])), stack.context(0), corpus_view=view)
    assert t.budget == 4 and len(t.queries) == 4 and attack.adaptive is False
    scores = {m.doc_id: m.scores["menta"] for m in t.membership}
    assert scores["n"] == pytest.approx(-1.0)  # every answer a refusal: nothing entailed, all don't-know
    assert scores["m"] > scores["n"]
    assert t.state["fallback_questions"] == 4 and t.state["attacker_calls"] == 2
    assert {m.doc_id: m.member for m in t.membership} == {"m": True, "n": False}


@pytest.mark.model
def test_entailment_attack_leaves_failed_questions_out_and_stops_at_the_budget():
    stack = tiny_stack(attacker="1. When did the Harwick clinic open its cardiology ward?\n"
                                "2. What does the Ostrava depot store?")
    calls = []

    def flaky(query: str) -> str:
        calls.append(query)
        if len(calls) == 1:
            raise TimeoutError("slow")
        return "I don't know."

    t = make_attack("mi-entailment", questions="writer", n_questions=2).run(
        CallableTarget(flaky), stack.context(0), budget=3, corpus_view=CorpusView(documents=[MEMBER, OTHER]))
    assert t.errors == 1 and len(t.queries) == 3
    assert [m.doc_id for m in t.membership] == ["m", "n"]
    assert t.membership[0].scores["menta"] == pytest.approx(-1.0)  # its one answered question
    assert t.state["failed"] == [{"doc_id": "m", "query": 0}]


THIRD = Document(id="t", text=(
    "The Harwick library lends forty bicycles each summer. Its keeper, Ida Brun, logs every loan in 2019 style. "
    "The ward of the town is small."))


def test_withheld_questions_leave_out_every_other_rarest_token():
    docs = [MEMBER, OTHER, THIRD]
    idf = idf_weights(docs)
    assert idf["harwick"] < idf["cardiology"] and "the" not in idf  # shared by two candidates; stop words never
    qs = withheld_questions(MEMBER, idf, 3, withhold=2)
    assert len(qs) == 2  # one passage (37 words), asked with either half of its rare tokens withheld
    for q in qs:
        assert len(q.withheld) <= 2 and q.statement in q.query and q.statement.count(BLANK) >= len(q.withheld)
        asked = set(q.query.lower().replace(BLANK, " ").replace("?", " ").replace(".", " ").split())
        assert not asked & set(q.withheld)  # what the target must supply is not in the question
        assert all(t in MEMBER.text.lower() for t in q.withheld)
    # rare tokens are withheld and kept in turn, so the quote keeps as rare a token to be retrieved by
    first = qs[0]
    assert any(idf[t] >= min(first.weights) for t in set(first.statement.lower().split()) & set(idf))
    # a one-passage document is asked again with the other half of its rare tokens withheld
    short = Document(id="s", text="Are you sapient? In all probability, I am not that sophisticated.")
    again = withheld_questions(short, idf_weights([short, OTHER]), 2, withhold=2)
    assert len(again) == 2 and not set(again[0].withheld) & set(again[1].withheld)
    assert passages(short.text) == [short.text]
    long = " ".join(f"w{i}" for i in range(50)) + ". Next one here."
    assert [len(p.split()) for p in passages(long, max_words=20)] == [20, 20, 13]  # a long sentence is cut
    assert withheld_questions(Document(id="e", text="a an the"), idf, 2) == []


def test_supplied_share_and_filled_statement():
    q = WithheldQuestion("q", "Alma met Brecht in 2019.", f"{BLANK} met {BLANK} in 2019.", ("alma", "brecht"), (3.0, 1.0))
    assert supplied_share(q, "Alma, and someone") == pytest.approx(0.75)
    assert supplied_share(q, "Alma Brecht.") == 1.0 and supplied_share(q, "I don't know.") == 0.0
    assert filled_statement(q, "Alma, Brecht") == "Alma met Brecht in 2019."
    assert filled_statement(q, "Alma") == f"Alma met {BLANK} in 2019."


def _cloze_target(kb: list[Document]):
    """Fills the blanks from the KB passage the quote matches (all its other words), else does not know."""
    def answer(query: str) -> str:
        quote = query.split('"')[1]
        for doc in kb:
            for passage in passages(doc.text):
                pw, qw = passage.split(), quote.split()
                if len(pw) == len(qw) and all(q == p or BLANK in q for q, p in zip(qw, pw)):
                    return ", ".join(p.strip(".,") for q, p in zip(qw, pw) if BLANK in q)
        return "I don't know."
    return answer


def test_withheld_attack_scores_supplied_tokens_with_no_attacker_llm():
    view = CorpusView(documents=[MEMBER, OTHER, THIRD], member_ids=["m"])
    attack = make_attack("mi-entailment", questions="withheld", n_questions=2)
    t = attack.run(CallableTarget(_cloze_target([MEMBER])), tiny_stack().context(0), corpus_view=view)
    assert attack.params.n_questions == 2 and t.budget == 6 and len(t.queries) == 6
    assert {m.doc_id: m.scores for m in t.membership} == {"m": {"withheld": 1.0}, "n": {"withheld": 0.0},
                                                          "t": {"withheld": 0.0}}
    assert t.state["attacker_calls"] == 0 and t.state["nli"] is None and t.state["scorers"] == ["withheld"]
    rows = t.state["questions"]["m"]
    assert [r["supplied"] for r in rows] == [1.0, 1.0] and all(r["withheld"] for r in rows)
    # a failed question is left out of its candidate's mean; the budget stops at a candidate boundary
    calls = []

    def flaky(query: str) -> str:
        calls.append(query)
        if len(calls) == 1:
            raise TimeoutError("slow")
        return _cloze_target([MEMBER])(query)

    t2 = make_attack("mi-entailment", questions="withheld", n_questions=2).run(
        CallableTarget(flaky), tiny_stack().context(0), budget=3, corpus_view=view)
    assert t2.errors == 1 and len(t2.queries) == 3 and [m.doc_id for m in t2.membership] == ["m", "n"]
    assert t2.membership[0].scores == {"withheld": 1.0} and t2.state["failed"] == [{"doc_id": "m", "query": 0}]


@pytest.mark.model
def test_withheld_attack_with_nli_never_counts_a_refusal():
    view = CorpusView(documents=[MEMBER, OTHER], member_ids=["m"])
    t = make_attack("mi-entailment", questions="withheld", n_questions=2, nli=True).run(CallableTarget(_cloze_target([MEMBER])), tiny_stack().context(0),
                                                    corpus_view=view)
    assert {m.doc_id: m.scores["withheld"] for m in t.membership} == {"m": 1.0, "n": 0.0}
    assert t.state["nli"] and all(r["ent"] is False for r in t.state["questions"]["n"])


def test_split_drops_repeated_texts():
    docs = [Document(id=f"d{i}", text=f"Record {i % 6} of the ledger.") for i in range(12)]
    assert [d.id for d in distinct_documents(docs)] == [f"d{i}" for i in range(6)]
    kb, view = membership_split(docs, n_members=2, n_nonmembers=2, kb_size=4, seed=0)
    assert {d.id for d in view.documents} - {d.id for d in kb} == {"d4", "d5"}  # never a repeat of an indexed text
    with pytest.raises(ValueError):
        membership_split(docs, n_members=2, n_nonmembers=3, kb_size=4)


@needs_wordnet
def test_interrogation_attack_reads_truths_from_the_document(antonyms):
    qs = interrogation_questions(MEMBER, 4, antonyms, perturb_share=0.5, seed=0)
    assert len(qs) == 4 and sorted(t for _, t in qs) == ["No", "No", "Yes", "Yes"]
    member_text = {s for s in sentences(MEMBER.text)}

    def oracle(query: str) -> str:  # knows the member: Yes to its sentences, No to changed ones
        statement = query.split('"')[1]
        if any(w in statement for w in ("Harwick", "Brecht", "ward", "Patients")):
            return "Yes." if statement in member_text else "No."
        return "I don't know."

    view = CorpusView(documents=[MEMBER, OTHER], member_ids=["m"])
    t = make_attack("mi-interrogation", n_questions=4).run(CallableTarget(oracle), tiny_stack().context(0),
                                                           corpus_view=view)
    scores = {m.doc_id: m.scores["ia"] for m in t.membership}
    assert scores == {"m": pytest.approx(1.0), "n": pytest.approx(-5.0)}
    assert len(t.queries) == 8


@needs_wordnet
def test_dcmi_scores_yes_to_the_original_minus_yes_to_the_perturbed_copy():
    def believes_kb(query: str) -> str:
        return "Yes." if MEMBER.text in query else ("No." if "Harwick" in query else "Yes, that is right.")

    view = CorpusView(documents=[MEMBER, OTHER], member_ids=["m"])
    t = make_attack("mi-dcmi").run(CallableTarget(believes_kb), tiny_stack().context(0), corpus_view=view)
    assert {m.doc_id: m.scores["dcmi"] for m in t.membership} == {"m": 1.0, "n": 0.0}
    assert len(t.queries) == 4 and t.budget == 4
    # a failed perturbed probe leaves that candidate unscored, never scored 0
    calls = []

    def fail_second(query: str) -> str:
        calls.append(query)
        if len(calls) == 2:
            raise TimeoutError("slow")
        return "Yes."

    t2 = make_attack("mi-dcmi").run(CallableTarget(fail_second), tiny_stack().context(0), corpus_view=view)
    assert t2.membership[0].scores == {} and t2.membership[1].scores == {"dcmi": 0.0}


def test_missing_wordnet_is_a_clear_error(tmp_path):
    from ragleak.errors import ConfigError

    with pytest.raises(ConfigError, match="wordnet-base"):
        Antonyms.load(tmp_path)


@needs_wordnet
def test_short_particles_are_not_perturbed(antonyms):
    assert antonyms.get("on") == "off"
    assert perturb("The address on file is 12 Main Road.", antonyms).kind == "number"


def test_continuation_questions_quote_the_start_and_score_only_what_the_quote_lacks():
    docs = [MEMBER, OTHER, THIRD]
    idf, df = idf_weights(docs), document_frequencies(docs)
    assert df["harwick"] == 2 and df["cardiology"] == 1
    qs = continuation_questions(MEMBER, idf, df, len(docs), 2, prefix_words=8, span_words=6, max_df=0.05)
    assert len(qs) == 2
    words = MEMBER.text.split()
    first, second = qs
    assert first.prefix == " ".join(words[:first.cut]) and 8 <= first.cut <= 8 + CUT_SLACK
    assert first.prefix in first.query
    for q in qs:
        quoted = set(q.prefix.lower().replace(".", " ").replace(",", " ").split())
        assert q.scored and not quoted & set(q.scored)  # what the target must supply is not in the question
        assert all(df[t] == 1 for t in q.scored)  # at most 5% of 3 candidates: only this candidate's tokens
        assert set(q.scored) <= set(" ".join(words[q.cut:q.cut + 6]).lower().replace(".", " ").replace(",", " ").split())
    # the first cut ends on a stop word when one is in reach: the quote is plainly unfinished
    assert words[first.cut - 1].lower() in {"in", "a", "the", "of", "its", "after"}
    # a later question quotes only the words before its own cut, past the first one's span
    assert second.cut >= first.cut + 6 and len(second.prefix.split()) == 8
    # a token every candidate holds is never scored, however the cut falls
    assert "harwick" not in {t for q in qs for t in q.scored}
    # a token the quote gives away as adjacent words run together (an e-mail domain) is not scored
    mail = Document(id="x", text="Renee Kowalczyk of Perez, Boyer and Tate can be reached at renee@perezboyer.com "
                                 "or Vantaa office.")
    (q,) = continuation_questions(mail, idf_weights([mail]), document_frequencies([mail]), 1, 1, prefix_words=8)
    assert "perez" in q.prefix.lower() and "boyer" in q.prefix.lower() and "perezboyer" not in q.scored
    assert "vantaa" in q.scored
    short = Document(id="s", text="Are you sapient? In all probability, I am not.")
    (q,) = continuation_questions(short, idf_weights([short]), document_frequencies([short]), 1, 1)
    assert q.cut == len(short.text.split()) // 2 and q.scored
    assert continuation_questions(Document(id="e", text="a an the of"), idf, df, 3, 1) == []


def test_continued_share_drops_guessable_tokens_and_refusals():
    q = ContinuationQuestion("q", "Alma met", 2, ("brecht", "2019"), (3.0, 1.0))
    assert continued_share(q, "Brecht in 2019.") == 1.0
    assert continued_share(q, "Brecht, someday") == pytest.approx(0.75)
    assert continued_share(q, "2019", guessable={"brecht"}) == 1.0  # only 2019 is left to supply
    assert continued_share(q, "Brecht 2019", guessable={"brecht", "2019"}) == 0.0  # nothing left: no evidence
    assert continued_share(q, "I'm sorry, I cannot help with Brecht in 2019.") == 0.0


def _continue_target(kb: list[Document], words_out: int = 12):
    """Goes on from the KB document that holds the quoted words, else says it does not know."""
    def answer(query: str) -> str:
        quote = query.split('"')[1]
        for doc in kb:
            at = doc.text.find(quote)
            if at >= 0:
                return " ".join(doc.text[at + len(quote):].split()[:words_out])
        return "I don't know."
    return answer


def test_continue_attack_scores_members_and_drops_what_the_reference_guesses():
    view = CorpusView(documents=[MEMBER, OTHER, THIRD], member_ids=["m"])
    attack = make_attack("mi-entailment", prefix_words=8, span_words=6)
    assert attack.params.questions == "continue" and attack.params.n_questions == 1
    stack = tiny_stack(attacker="I cannot say.")
    t = attack.run(CallableTarget(_continue_target([MEMBER])), stack.context(0), corpus_view=view)
    assert t.budget == 3 and len(t.queries) == 3 and t.state["attacker_calls"] == 3  # one reference per question
    scores = {m.doc_id: m.scores["continued"] for m in t.membership}
    assert scores == {"m": 1.0, "n": 0.0, "t": 0.0}
    row = t.state["questions"]["m"][0]
    assert row["guessable"] == [] and row["informative"] is True and row["supplied"] == 1.0
    # a reference that supplies the member's next tokens on its own leaves nothing to show
    (q,) = continuation_questions(MEMBER, idf_weights(view.documents), document_frequencies(view.documents), 3, 1, 8, 6)
    knowing = tiny_stack(attacker=" ".join(q.scored))
    t2 = make_attack("mi-entailment", prefix_words=8, span_words=6).run(
        CallableTarget(_continue_target([MEMBER])), knowing.context(0), corpus_view=view)
    assert {m.doc_id: m.scores["continued"] for m in t2.membership}["m"] == 0.0
    assert t2.state["questions"]["m"][0]["informative"] is False and t2.state["uninformative_questions"] >= 1
    # reference off: no attacker call, the same member score as with a silent reference
    t3 = make_attack("mi-entailment", prefix_words=8, span_words=6, reference=False).run(
        CallableTarget(_continue_target([MEMBER])), tiny_stack().context(0), corpus_view=view)
    assert t3.state["attacker_calls"] == 0 and {m.doc_id: m.scores["continued"] for m in t3.membership} == scores


def test_a_candidate_with_nothing_to_ask_scores_zero_and_the_rest_are_still_scored():
    bare = Document(id="b", text="yes yes yes yes")  # no token specific enough to ask about
    view = CorpusView(documents=[bare, MEMBER, OTHER], member_ids=["m"])
    t = make_attack("mi-entailment", prefix_words=8, span_words=6, reference=False).run(
        CallableTarget(_continue_target([MEMBER])), tiny_stack().context(0), corpus_view=view)
    assert len(t.queries) == 2 and t.state["unasked"] == ["b"]
    assert {m.doc_id: m.scores["continued"] for m in t.membership} == {"b": 0.0, "m": 1.0, "n": 0.0}
