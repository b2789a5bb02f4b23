"""Utility on benign questions: how well the answers give what the corpus says (``attacks.utility``).

Two readings per transcript, each the mean over the answered questions with a bootstrap interval
over questions:

* ``utility_f1``: SQuAD's token F1 of the answer against the gold answer (Rajpurkar et al., 2016,
  arXiv 1606.05250): both normalised (lower case, punctuation and the articles a/an/the removed),
  F1 of their bags of tokens;
* ``utility_em``: whether the normalised gold answer occurs in the normalised answer, as a whole
  run of tokens: the exact-match reading of a generated answer, which wraps the span in a sentence
  (the accuracy of Mallen et al., 2023, arXiv 2212.10511). Whole-answer exact match would be 0 for
  nearly every generated sentence and says nothing.

A failed question is left out and counted, never read as wrong; a refusal responded and reads as
what it released (F1 0 unless it quotes the answer). Each question's scores stay in ``details``
(``per_question``), so the report can pool questions across cells and seeds.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import TYPE_CHECKING, Any, ClassVar

from ragleak.metrics.base import Metric, MetricContext, MetricResult, failed_queries

if TYPE_CHECKING:
    from ragleak.attacks.base import Transcript

#: what a benign probe's transcript carries in ``scoring``; ``metrics.compute`` reads a transcript
#: that has it with these metrics only
GOLD = "gold"
GOLD_INPUT = "gold answers"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation})


def normalize(text: str) -> list[str]:
    """SQuAD's answer normalisation, as tokens: lower case, punctuation to spaces, articles dropped."""
    return _ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split()


def token_f1(answer: str, gold: str) -> float:
    """Token F1 of ``answer`` against ``gold`` (bags of normalised tokens); 0 when either is empty."""
    a, g = normalize(answer), normalize(gold)
    common = sum((Counter(a) & Counter(g)).values())
    if not common:
        return 0.0
    p, r = common / len(a), common / len(g)
    return 2 * p * r / (p + r)


def contains_gold(answer: str, gold: str) -> float:
    """1.0 when the normalised ``gold`` tokens occur in the normalised ``answer`` as one run, else 0.0."""
    g = normalize(gold)
    if not g:
        return 0.0
    a = normalize(answer)
    return float(any(a[i:i + len(g)] == g for i in range(len(a) - len(g) + 1)))


def question_scores(transcript: "Transcript") -> list[dict[str, Any]]:
    """Per answered question with a gold answer: index, document, rule, F1 and exact match."""
    answers = {q.index: q.answer or "" for q in transcript.answered}
    rows = []
    for gold in transcript.scoring.get(GOLD, []):
        if gold["index"] in answers:
            answer = answers[gold["index"]]
            rows.append({"index": gold["index"], "doc_id": gold["doc_id"], "source": gold["source"],
                         "f1": round(token_f1(answer, gold["answer"]), 6),
                         "em": contains_gold(answer, gold["answer"])})
    return rows


class _UtilityMetric(Metric):
    channels = frozenset({"output"})
    inputs: ClassVar[tuple[str, ...]] = ("answers", GOLD_INPUT)
    higher_is_leakier: ClassVar[bool] = False
    unit: ClassVar[str] = "mean over answered benign questions (0-1)"
    field: ClassVar[str]

    def applies_to(self, transcript: "Transcript") -> bool:
        return GOLD in transcript.scoring

    def compute(self, transcript: "Transcript", context: MetricContext) -> MetricResult:
        from ragleak.metrics.stats import bootstrap_mean

        rows = question_scores(transcript)
        failed = failed_queries(transcript)
        if not rows:
            return MetricResult(value=None, n=0, n_of="answered questions", failed=failed,
                                note="no answered benign question with a gold answer")
        iv = bootstrap_mean([r[self.field] for r in rows], seed=context.seed)
        return MetricResult(value=iv.estimate, n=len(rows), n_of="answered questions", failed=failed,
                            interval=iv.bounds(), interval_over="questions" if iv.bounds() else None,
                            details={"per_question": rows,
                                     "sources": dict(Counter(r["source"] for r in rows))})


class AnswerF1(_UtilityMetric):
    """Token F1 of answers to benign questions against their gold answers."""

    name: ClassVar[str] = "utility_f1"
    title: ClassVar[str] = "Utility: answer token F1"
    field: ClassVar[str] = "f1"


class AnswerEM(_UtilityMetric):
    """Share of benign questions whose answer contains the gold answer."""

    name: ClassVar[str] = "utility_em"
    title: ClassVar[str] = "Utility: gold answer in answer"
    field: ClassVar[str] = "em"
