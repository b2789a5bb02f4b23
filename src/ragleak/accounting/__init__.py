"""Privacy accounting: guarantees as data (unit, scope over T queries, release boundary), the
accountants that turn them into eps(T), group privacy, subsampling, filters, hypothesis-testing
bounds, and the guarantee card."""

from ragleak.accounting.amplification import AmplificationError, amplify, poisson_amplified
from ragleak.accounting.bounds import (
    audit_ceiling,
    cp_lower,
    cp_upper,
    eps_lower_bound,
    log_ratio_interval,
    tpr_bound,
)
from ragleak.accounting.card import GuaranteeCard, build_card
from ragleak.accounting.composition import Epsilon, boundary_check, epsilon_after, max_queries_within
from ragleak.accounting.filters import DocumentFilter, filter_cap
from ragleak.accounting.group import group_delta, group_epsilon
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
    "AmplificationError", "Boundary", "DocumentFilter", "DocumentUnit", "Epsilon", "Guarantee", "GuaranteeCard",
    "NoFormalGuarantee", "OneTimeRelease", "PerDocumentFilter", "PerResponse", "PersonUnit", "Scope", "Unit",
    "amplify", "audit_ceiling", "boundary_check", "build_card", "cp_lower", "cp_upper", "eps_lower_bound",
    "epsilon_after", "filter_cap", "group_delta", "group_epsilon", "log_ratio_interval", "max_queries_within", "poisson_amplified",
    "tpr_bound",
]
