"""DCMI-style membership inference (Gao et al. 2025, arXiv 2509.06026): two queries per candidate.

The target is asked whether the candidate ``x`` is right, and whether a minimally perturbed copy
``x'`` is (``mi_text.perturb``: WordNet antonyms for ``perturb_share`` of its antonym-bearing
words, at least one; else a changed number or an inserted 'not'). Score = f(q) - f(q'), with f = 1
for a Yes (``membership.yes_no_score``: yes without no) and 0 otherwise. The difference cancels
the answers that non-member passages or the model's prior would give both copies alike: a member
in context makes the target accept ``x`` and reject ``x'``. A candidate with no possible
perturbation is asked once (about ``x``) and left unscored (``state['unperturbed']``).
[IMPL-CHOICE] the prompt wording and the 6% share follow the paper's description; its released
code is underdetermined (research notes).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ragleak.attacks.base import AttackResult, CorpusView, MembershipScore, QuerySession
from ragleak.attacks.membership import MembershipAttack, SplitParams, yes_no_score
from ragleak.attacks.mi_text import Antonyms, perturb
from ragleak.context import RunContext

DCMI_TEMPLATE = 'Is this right? "{x}" Answer with Yes or No.'


class DcmiParams(SplitParams):
    perturb_share: float = Field(default=0.06, gt=0.0, le=1.0, description="share of antonym-bearing words swapped")
    chars: int = Field(default=1000, ge=20, description="characters of the candidate quoted")


class DcmiMembership(MembershipAttack):
    """DCMI-style MI: the candidate and its antonym-perturbed copy, Yes(x) - Yes(x')."""

    name: ClassVar[str] = "mi-dcmi"
    version: ClassVar[str] = "2"  # 2: the split drops repeated texts
    default_budget: ClassVar[int] = 220
    description: ClassVar[str] = "DCMI-style membership inference: candidate vs antonym-perturbed copy, 2 queries each"
    Params = DcmiParams

    def queries_per_candidate(self) -> int:
        return 2

    def execute(self, session: QuerySession, view: CorpusView, ctx: RunContext) -> AttackResult:
        p = self.params
        antonyms = Antonyms.load()
        plan: list[tuple[str, str, str]] = []
        unperturbed = []
        for doc in view.documents:
            x = doc.text[:p.chars]
            changed = perturb(x, antonyms, p.perturb_share, seed=f"{ctx.seed}:{doc.id}")
            plan.append((doc.id, "original", DCMI_TEMPLATE.format(x=x)))
            if changed.kind == "none":
                unperturbed.append(doc.id)
            else:
                plan.append((doc.id, "perturbed", DCMI_TEMPLATE.format(x=changed.text)))
        records = session.ask_many([q for _, _, q in plan], [f"dcmi-{kind}:{doc_id}" for doc_id, kind, _ in plan])
        got: dict[str, dict[str, float | None]] = {}
        failed = []
        for (doc_id, kind, _), record in zip(plan, records):
            if record is None:
                continue
            if not record.ok:
                failed.append({"doc_id": doc_id, "query": record.index})
                got.setdefault(doc_id, {})[kind] = None
            else:
                got.setdefault(doc_id, {})[kind] = yes_no_score(record.answer or "")
        results = []
        for doc in view.documents:
            if doc.id not in got:
                break  # the budget ran out before this candidate
            f = got[doc.id]
            ok = f.get("original") is not None and f.get("perturbed") is not None
            results.append(MembershipScore(doc_id=doc.id, scores={"dcmi": f["original"] - f["perturbed"]} if ok else {}))
        return AttackResult(membership=results, state={"failed": failed, "scorers": ["dcmi"],
                                                       "unperturbed": unperturbed})
