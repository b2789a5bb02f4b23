"""Interrogation-style membership inference (after Naseh et al., "Riddle Me This!", CCS 2025, arXiv
2502.00306), with the ground truth taken from the document itself instead of a shadow LLM.

For each candidate ``x``, ``n_questions`` (default 5) of its sentences, spread evenly over it,
become yes/no questions: ``Is the following true? "<sentence>" Answer Yes, No, or I don't
know.`` A seeded half of them carry a minimally perturbed sentence (``mi_text.perturb``: WordNet
antonyms, else a changed number or an inserted 'not'), whose truth is "No"; the others are the
sentence as written, truth "Yes". The perturbed ones are drawn among the sentences that can be
changed; where too few can, more are asked as written.
The score is the Interrogation Attack's ``(1/n) sum [I(answer = truth) - lam * I(answer
unknown)]`` (``mi_text.interrogation_score``; ``lam`` = 5, the paper's). What differs from the
paper [IMPL-CHOICE]: its questions are written by GPT-4o and answered for ground truth by a
shadow LLM reading the document; ours need no LLM at all, and their truth is exact by
construction, at the price of questions that quote the candidate (less stealthy).
"""

from __future__ import annotations

import math
import random
from typing import ClassVar

from pydantic import Field

from ragleak.attacks.base import AttackResult, CorpusView, MembershipScore, QuerySession
from ragleak.attacks.membership import MembershipAttack, SplitParams
from ragleak.attacks.mi_text import Antonyms, interrogation_score, perturb, sentences, yes_no_label
from ragleak.context import RunContext
from ragleak.records import Document

QUESTION_TEMPLATE = 'Is the following true? "{statement}" Answer Yes, No, or I don\'t know.'


class InterrogationParams(SplitParams):
    n_questions: int = Field(default=5, ge=1, le=30, description="yes/no questions per candidate")
    lam: float = Field(default=5.0, ge=0.0, description="penalty per unknown answer (the paper's 5)")
    perturb_share: float = Field(default=0.5, ge=0.0, le=1.0, description="share of questions whose truth is No")
    statement_words: int = Field(default=60, ge=5, description="words of a sentence quoted at most")


def interrogation_questions(doc: Document, n: int, antonyms: Antonyms, perturb_share: float, seed: int,
                            statement_words: int = 60) -> list[tuple[str, str]]:
    """(question, truth) pairs for ``doc``: sentences spread over it, a seeded ``perturb_share`` of them
    perturbed (truth 'No'), the rest as written (truth 'Yes')."""
    sents = sentences(doc.text)
    picks = sorted({round(i * (len(sents) - 1) / max(1, n - 1)) for i in range(n)}) if n > 1 else [0]
    statements = [" ".join(sents[i].split()[:statement_words]) for i in picks]
    changed = [perturb(st, antonyms, seed=f"{seed}:{doc.id}:{i}") for st, i in zip(statements, picks)]
    # the perturbed share is drawn among the sentences that can be changed at all
    can = [j for j, c in enumerate(changed) if c.kind != "none"]
    rng = random.Random(f"ragleak.mi-interrogation:{seed}:{doc.id}")
    flip = set(rng.sample(can, min(len(can), round(perturb_share * len(picks)))))
    out = []
    for j, statement in enumerate(statements):
        if j in flip:
            out.append((QUESTION_TEMPLATE.format(statement=changed[j].text), "No"))
        else:
            out.append((QUESTION_TEMPLATE.format(statement=statement), "Yes"))
    return out


class InterrogationMembership(MembershipAttack):
    """Interrogation-style MI: yes/no questions from the candidate's own sentences, truth known."""

    name: ClassVar[str] = "mi-interrogation"
    version: ClassVar[str] = "2"  # 2: the split drops repeated texts
    default_budget: ClassVar[int] = 550
    description: ClassVar[str] = ("interrogation-style membership inference: n yes/no questions from the candidate's "
                                  "sentences (half antonym-perturbed), truth from the document; n queries per candidate")
    Params = InterrogationParams

    def queries_per_candidate(self) -> int:
        return self.params.n_questions

    def execute(self, session: QuerySession, view: CorpusView, ctx: RunContext) -> AttackResult:
        p = self.params
        antonyms = Antonyms.load()
        reach = view.documents[:math.ceil(session.remaining / p.n_questions)]
        plan = [(doc, q, truth) for doc in reach
                for q, truth in interrogation_questions(doc, p.n_questions, antonyms, p.perturb_share, ctx.seed,
                                                        p.statement_words)]
        records = session.ask_many([q for _, q, _ in plan], [f"yes-no:{doc.id}" for doc, _, _ in plan])
        answered: dict[str, list[tuple[str, str]]] = {}
        sent: set[str] = set()
        failed = []
        for (doc, _, truth), record in zip(plan, records):
            if record is None:
                continue
            sent.add(doc.id)
            if not record.ok:
                failed.append({"doc_id": doc.id, "query": record.index})
            else:
                answered.setdefault(doc.id, []).append((truth, record.answer or ""))
        results = []
        for doc in view.documents:
            if doc.id not in sent:
                break
            rows = answered.get(doc.id, [])
            scores = {"ia": interrogation_score([t for t, _ in rows], [a for _, a in rows], p.lam)} if rows else {}
            results.append(MembershipScore(doc_id=doc.id, scores=scores))
        labels = {doc_id: [[t, yes_no_label(a)] for t, a in rows] for doc_id, rows in answered.items()}
        return AttackResult(membership=results, state={"failed": failed, "scorers": ["ia"], "answers": labels})
