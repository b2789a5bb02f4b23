"""A defense's privacy guarantee, stated in three slots.

* ``unit``: what neighbouring datasets differ in - one document, or one person owning up to
  ``max_docs`` documents;
* ``scope``: how the loss accrues over T queries - per response (composes), per-document filter
  (capped at M * eps_q), one-time release (flat in T), or no formal guarantee;
* ``boundary``: the released object the claim covers - answers only, answers plus
  citations/passages, only the identities of the retrieved documents (a retrieval-side mechanism
  whose answers still quote the selected passages), or a released synthetic corpus.

These are data (like dp-accounting's DpEvent): a defense describes its mechanism here and the
accountants in this package compute epsilon from it. A guarantee with no ``boundary`` or no
``unit`` cannot be written down.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field


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


class PerDocumentFilter(_Slot):
    """Individual accounting / privacy filter: a document is charged eps_q when it is used and
    retired after M charges, so eps_doc(T) <= M * eps_q for every T."""

    kind: Literal["per-document-filter"] = "per-document-filter"
    eps_q: float = Field(ge=0)
    max_charges: int = Field(ge=1, description="M")
    delta_q: float = Field(default=0.0, ge=0, le=1)


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


class Guarantee(_Slot):
    unit: Unit = DocumentUnit()
    scope: Scope = NoFormalGuarantee()
    boundary: Boundary = "answers"
    retrieval_randomised: bool = Field(default=False, description="does the mechanism randomise which documents surface?")
    notes: str = ""

    @property
    def is_formal(self) -> bool:
        return not isinstance(self.scope, NoFormalGuarantee)
