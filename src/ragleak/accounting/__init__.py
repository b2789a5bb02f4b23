"""Privacy accounting: guarantees as data (unit, scope over T queries, release boundary)."""

from ragleak.accounting.guarantee import (
    Boundary,
    DocumentUnit,
    Guarantee,
    NoFormalGuarantee,
    OneTimeRelease,
    PerDocumentFilter,
    PerResponse,
    PersonUnit,
    Scope,
    Unit,
)

__all__ = [
    "Boundary", "DocumentUnit", "Guarantee", "NoFormalGuarantee", "OneTimeRelease",
    "PerDocumentFilter", "PerResponse", "PersonUnit", "Scope", "Unit",
]
