"""The guarantee card: the three slots, eps(T) at T = 1, 10, 100, 1000, and warnings.

``build_card`` evaluates a defense's ``Guarantee`` at a release boundary and group size; the CLI
(`ragleak account`) renders it and writes it as JSON. Besides unit, scope and boundary a card
states the adjacency, how a document-level claim is reached (``group``), what resets the budget
(``resets``), the assumptions of the proof with whether this configuration meets them, and
``void_reason``: every reason the claim does not hold here (a wider boundary, a violated
assumption), empty when it holds.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from ragleak.accounting.composition import DEFAULT_DELTA, Epsilon, epsilon_after, void_reason
from ragleak.accounting.guarantee import (
    Assumption,
    Boundary,
    Guarantee,
    NoFormalGuarantee,
    OneTimeRelease,
    PerDocumentFilter,
    PerResponse,
    PersonUnit,
)

CARD_QUERIES = (1, 10, 100, 1000)
MEANINGLESS_EPS = 10.0


class CurveRow(BaseModel):
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    queries: int
    basic: Epsilon
    tight: Epsilon
    rdp: Epsilon
    claim: Epsilon = Field(description="tight eps(T) on the claim's own boundary (what the mechanism itself guarantees)")


class GuaranteeCard(BaseModel):
    """One defense's privacy claim, evaluated: what is protected, over how many queries, seen where."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    schema_version: int = 2
    defense: str
    params: dict = Field(default_factory=dict)
    unit: str
    scope: str
    claim_boundary: Boundary
    shown_boundary: Boundary
    delta_target: float
    guarantee: Guarantee
    curve: list[CurveRow]
    void: bool
    warnings: list[str]
    notes: str = ""
    # schema 1 stops here; the fields below are added (older readers ignore them)
    adjacency: str = Field(default="", description="neighbouring relation of the proof, in words")
    group: str = Field(default="", description="how one document's (or person's) influence is bounded")
    resets: str = Field(default="", description="what, if anything, starts a fresh budget")
    assumptions: list[Assumption] = Field(default_factory=list, description="premises, each met / violated / unchecked")
    void_reason: str = Field(default="", description="why the claim does not hold here; empty when it does")
    noise: str = Field(default="", description="boundary of the claim in time: fixed-seed noise (an audit) or fresh "
                                               "entropy (a deployment); empty when not stated")


def describe_unit(guarantee: Guarantee) -> str:
    unit = guarantee.unit
    if isinstance(unit, PersonUnit):
        return f"person (at most m={unit.max_docs} documents each; group privacy)"
    return "document (neighbouring corpora differ in one document)"


def describe_adjacency(guarantee: Guarantee) -> str:
    if guarantee.adjacency == "substitution":
        return ("substitution: neighbouring corpora have the same size and ids, one document's content replaced "
                "(an add/remove neighbour is not covered)")
    if guarantee.adjacency == "add-remove":
        return "add/remove: one document present or absent (implies 2*eps under substitution)"
    return "not stated"


def describe_group(guarantee: Guarantee, docs_per_person: int | None) -> str:
    person = f" x {docs_per_person} documents per person" if docs_per_person else ""
    if guarantee.mechanism_unit == "document":
        return f"document-level proof (a document's passages act as one unit){person}"
    if guarantee.max_chunks is None:
        return "passage-level proof; most passages per document unknown: no document-level claim"
    return (f"passage-level proof converted by group privacy over max {guarantee.max_chunks} passages "
            f"per document{person}")


def describe_resets(guarantee: Guarantee) -> str:
    s = guarantee.scope
    if isinstance(s, PerResponse):
        if s.max_queries is None:
            return "no budget: every answered query composes"
        if s.budget_scope == "principal":
            return (f"per client id: {s.max_queries} queries each; new conversations of the same client do not "
                    "reset, a new client id does (the curve is the worst case: an adversary opening new ids)"
                    + _ledger(s))
        return (f"nothing resets: {s.max_queries} queries over the whole stream the target serves, then no "
                "more retrieval for anyone" + _ledger(s))
    if isinstance(s, PerDocumentFilter):
        return "nothing resets: a document's charges only grow until it retires" + _ledger(s)
    if isinstance(s, OneTimeRelease):
        return "nothing to reset: released once"
    return "no formal guarantee"


FIXED_SEED = "noise seed fixed: a reproducible audit, not a deployment guarantee"


def describe_noise(guarantee: Guarantee) -> str:
    if guarantee.noise == "fixed-seed":
        return FIXED_SEED
    if guarantee.noise == "fresh":
        return "fresh noise: seeded from the operating system's entropy in each process, never recorded"
    return ""


def _ledger(scope: PerResponse | PerDocumentFilter) -> str:
    if scope.ledger is None:
        return ""
    if scope.ledger == "memory":
        return "; charges kept in memory: they end with the process (a restart resets them)"
    return f"; charges kept in {scope.ledger}: they survive a restart (delete the file to reset them)"


def describe_scope(guarantee: Guarantee) -> str:
    s = guarantee.scope
    if isinstance(s, PerResponse):
        budget = ""
        if s.max_queries and s.budget_scope == "principal":
            budget = f", refuses after {s.max_queries} queries per client id (uncapped over new ids)"
        elif s.max_queries:
            budget = f", refuses after {s.max_queries} queries"
        noise = f", noise multiplier {s.noise_multiplier:g}" if s.noise_multiplier else ""
        return f"per response: ({s.eps_q:g}, {s.delta_q:g})-DP per query, {s.mechanism}{noise}, composes over T{budget}"
    if isinstance(s, PerDocumentFilter):
        return (f"per-document filter: eps_q={s.eps_q:g} per use, retired after M={s.max_charges} uses; "
                f"eps_doc(T) <= {s.max_charges * s.eps_q:g}")
    if isinstance(s, OneTimeRelease):
        return f"one-time release: ({s.eps0:g}, {s.delta0:g})-DP once, flat in T"
    assert isinstance(s, NoFormalGuarantee)
    return "no formal guarantee"


def build_card(defense: str, guarantee: Guarantee, *, params: dict | None = None, queries: tuple[int, ...] = CARD_QUERIES,
               docs_per_person: int | None = None, shown: Boundary | None = None,
               delta: float = DEFAULT_DELTA) -> GuaranteeCard:
    """Evaluate ``guarantee`` at every T in ``queries`` (sorted, unique) for the card, as seen by an
    adversary of a target that shows ``shown`` (default: answers)."""
    if docs_per_person is not None:
        guarantee = guarantee.model_copy(update={"unit": PersonUnit(max_docs=docs_per_person)})
    shown = shown or "answers"
    rows = [CurveRow(queries=t,
                     basic=epsilon_after(guarantee, t, method="basic", delta=delta, shown=shown),
                     tight=epsilon_after(guarantee, t, method="tight", delta=delta, shown=shown),
                     rdp=epsilon_after(guarantee, t, method="rdp", delta=delta, shown=shown),
                     claim=epsilon_after(guarantee, t, method="tight", delta=delta))
            for t in sorted(set(queries))]
    reason = void_reason(guarantee, shown)
    return GuaranteeCard(defense=defense, params=params or {}, unit=describe_unit(guarantee),
                         scope=describe_scope(guarantee), claim_boundary=guarantee.boundary, shown_boundary=shown,
                         delta_target=delta, guarantee=guarantee, curve=rows, void=bool(reason),
                         warnings=card_warnings(guarantee, rows, reason, docs_per_person), notes=guarantee.notes,
                         adjacency=describe_adjacency(guarantee), group=describe_group(guarantee, docs_per_person),
                         resets=describe_resets(guarantee), assumptions=list(guarantee.assumptions),
                         void_reason=reason, noise=describe_noise(guarantee))


def card_warnings(guarantee: Guarantee, rows: list[CurveRow], void_reason: str, docs_per_person: int | None) -> list[str]:
    warnings: list[str] = []
    if void_reason:
        warnings.append(f"VOID: {void_reason}")
    if not guarantee.is_formal:
        return warnings
    if guarantee.noise == "fixed-seed":
        warnings.append(FIXED_SEED)
    if guarantee.boundary == "retrieved-ids":
        warnings.append("retrieval-side DP only: the answers are not DP (the LLM sees the selected passages verbatim)")
    scope = guarantee.scope
    if isinstance(scope, PerResponse) and scope.max_queries and scope.budget_scope != "principal":
        warnings.append(f"flat after {scope.max_queries} queries only because the defense refuses retrieval to "
                        "every later query of the stream")
    if isinstance(scope, PerResponse) and scope.max_queries and scope.budget_scope == "principal":
        warnings.append(f"each client id is capped at {scope.max_queries} queries, but nothing stops one adversary "
                        "from presenting many ids: the curve composes every query (worst case)")
    if guarantee.adjacency is None:
        warnings.append("the adjacency (substitution or add/remove) is not stated: the eps is not comparable")
    for a in guarantee.unchecked:
        warnings.append(f"assumption '{a.name}' not checked in this configuration: {a.statement}")
    if isinstance(scope, PerDocumentFilter):
        warnings.append("documents retire after M uses: later answers lose them (utility falls with the query index)")
    if docs_per_person is None and not isinstance(guarantee.unit, PersonUnit):
        warnings.append("document-level: a person owning m documents gets the group guarantee "
                        "(m*eps, delta*sum e^{j eps}); see --docs-per-person")
    if not void_reason:
        over = [r.queries for r in rows if r.tight.eps > MEANINGLESS_EPS]
        if over:
            warnings.append(f"eps > {MEANINGLESS_EPS:g} from T = {over[0]}: the bound no longer limits a "
                            "membership test (TPR <= e^eps * FPR + delta is vacuous)")
        if any(math.isfinite(r.tight.eps) and r.tight.delta >= 1e-3 for r in rows):
            warnings.append("delta >= 1e-3 at some T: a claim with large delta allows releasing records outright")
    return warnings
