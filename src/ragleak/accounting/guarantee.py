"""A defense's privacy guarantee, stated in three slots.

* ``unit``: what neighbouring datasets differ in - one document, or one person owning up to
  ``max_docs`` documents;
* ``scope``: how the loss accrues over T queries - per response (composes), per-document filter
  (capped at M * eps_q), one-time release (flat in T), or no formal guarantee;
* ``boundary``: the released object the claim covers - answers only, answers plus
  citations/passages, only the identities of the retrieved documents (a retrieval-side mechanism
  whose answers still quote the selected passages), or a released synthetic corpus.

Beside the slots a guarantee states the ``adjacency`` its proof uses (``substitution``: one
document's content replaced, the corpus size and the document ids as slots fixed; ``add-remove``:
one document present or absent; an add/remove eps-DP mechanism is 2 eps-DP under substitution, the
converse does not hold), whether the proof protects a document or only one passage
(``mechanism_unit``; a passage-level mechanism pays group privacy over ``max_chunks``, the most
passages one document has), and the ``assumptions`` the proof relies on, each checked against
this configuration where the defense can (``met``: true, false, or None when there was nothing
to check it against yet). A violated assumption voids the claim (``composition.epsilon_after``).

A guarantee also states where its ``noise`` came from (a fixed seed: a reproducible audit, replayable
by whoever knows the seed, so no deployment guarantee; or fresh OS entropy) and a budgeted scope
states its ``ledger``: where its charges live (a SQLite file that survives a restart, or memory).

These are data (like dp-accounting's DpEvent): a defense describes its mechanism here and the
accountants in this package compute epsilon from it. A guarantee with no ``boundary`` or no
``unit`` cannot be written down.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field


LEDGER_HELP = ("where a budget's charges live: a SQLite file (they survive a restart) or 'memory' (they end with "
               "the process: an audit's ledger); None: not stated")


class _Slot(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DocumentUnit(_Slot):
    kind: Literal["document"] = "document"


class PersonUnit(_Slot):
    kind: Literal["person"] = "person"
    max_docs: int = Field(ge=1, description="m: documents one person may own")


Unit = Annotated[Union[DocumentUnit, PersonUnit], Field(discriminator="kind")]


class PerResponse(_Slot):
    """(eps_q, delta_q)-DP per answered query; composes over T queries."""

    kind: Literal["per-response"] = "per-response"
    eps_q: float = Field(ge=0)
    delta_q: float = Field(default=0.0, ge=0, le=1)
    mechanism: Literal["laplace", "gaussian", "exponential", "generic"] = "generic"
    noise_multiplier: float | None = Field(default=None, gt=0, description="for an exact accountant: scale/sensitivity")
    max_queries: int | None = Field(default=None, ge=1, description="a budget that refuses after this many queries")
    budget_scope: Literal["stream", "principal"] | None = Field(
        default=None, description=("what max_queries counts: 'stream' (every query the target answers, nothing resets: "
                                   "eps(T) is capped) or 'principal' (per client id: a new id starts a fresh budget, so "
                                   "the worst case over an adversary who opens new ids is uncapped)"))
    ledger: str | None = Field(default=None, description=LEDGER_HELP)


class PerDocumentFilter(_Slot):
    """Individual accounting / privacy filter: a document is charged eps_q when it is used and
    retired after M charges, so eps_doc(T) <= M * eps_q for every T."""

    kind: Literal["per-document-filter"] = "per-document-filter"
    eps_q: float = Field(ge=0)
    max_charges: int = Field(ge=1, description="M")
    delta_q: float = Field(default=0.0, ge=0, le=1)
    ledger: str | None = Field(default=None, description=LEDGER_HELP)


class OneTimeRelease(_Slot):
    """An (eps0, delta0)-DP artefact released once (e.g. a synthetic corpus); post-processing
    makes every later query free, so the curve is flat in T."""

    kind: Literal["one-time-release"] = "one-time-release"
    eps0: float = Field(ge=0)
    delta0: float = Field(default=0.0, ge=0, le=1)


class NoFormalGuarantee(_Slot):
    kind: Literal["none"] = "none"


Scope = Annotated[
    Union[PerResponse, PerDocumentFilter, OneTimeRelease, NoFormalGuarantee], Field(discriminator="kind")
]

Boundary = Literal["answers", "answers+citations", "retrieved-ids", "synthetic-corpus"]


Adjacency = Literal["substitution", "add-remove"]


class Assumption(_Slot):
    """One premise of a guarantee's proof and whether this configuration meets it."""

    name: str = Field(min_length=1, description="a short key, e.g. 'pool-covers-corpus'")
    statement: str = Field(description="what the proof assumes")
    met: bool | None = Field(default=None, description="checked in code: true/false; None = not checked yet")
    detail: str = Field(default="", description="what the check saw (why it is violated)")


class Guarantee(_Slot):
    unit: Unit = DocumentUnit()
    scope: Scope = NoFormalGuarantee()
    boundary: Boundary = "answers"
    retrieval_randomised: bool = Field(default=False, description="does the mechanism randomise which documents surface?")
    notes: str = ""
    # defaults keep records written before these fields readable (None: not stated)
    adjacency: Adjacency | None = Field(default=None, description="the neighbouring relation the proof uses")
    mechanism_unit: Literal["document", "passage"] = Field(
        default="document", description="what one noise draw / one vote protects; 'passage' pays group privacy")
    max_chunks: int | None = Field(default=None, ge=1, description="most passages of one document in the served index")
    assumptions: tuple[Assumption, ...] = ()
    noise: Literal["fixed-seed", "fresh"] | None = Field(
        default=None, description=("where the mechanism's noise came from: 'fixed-seed' (a reproducible audit: whoever "
                                   "knows the seed replays it, so it is no deployment guarantee) or 'fresh' (OS entropy "
                                   "per process); None: not stated"))
    retrieval_eps_q: float | None = Field(
        default=None, ge=0, description=("eps per query of a randomised retrieval selection: what citations or ids "
                                         "shown next to an answers claim add to it"))

    @property
    def is_formal(self) -> bool:
        return not isinstance(self.scope, NoFormalGuarantee)

    @property
    def violations(self) -> list[Assumption]:
        return [a for a in self.assumptions if a.met is False]

    @property
    def unchecked(self) -> list[Assumption]:
        return [a for a in self.assumptions if a.met is None]

    @property
    def chunk_group(self) -> int | None:
        """The group size a passage-level proof pays to cover a document (1 for a document-level
        proof; None when the proof is passage-level and the chunks per document are unknown)."""
        if self.mechanism_unit == "document":
            return 1
        return self.max_chunks
