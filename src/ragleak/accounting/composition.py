"""epsilon_after(guarantee, T): the privacy loss after T queries, per scope (basic and
advanced composition, RDP: Mironov 2017, arXiv 1702.07476; group privacy; filters).

Scopes (``guarantee.py``):

* ``PerResponse(eps_q, delta_q)``: T answers compose.
  - ``basic``: (T * eps_q, T * delta_q) (Dwork-Roth; also valid as a filter under adaptivity).
  - ``pld``: the privacy-loss distribution of the per-query mechanism self-composed T times
    (Google dp-accounting, pessimistic discretisation): exact for Laplace and Gaussian noise
    given their noise multiplier; for a generic (eps_q, delta_q) mechanism the PLD of its
    worst case (a randomised response with those parameters), which is the optimal composition
    theorem of Kairouz-Oh-Viswanath computed numerically. Epsilon is read off the composed PLD in
    log space (``stable_epsilon_for_delta``): dp-accounting's own search returns inf once the
    answer passes ~708 (a subnormal float).
  - ``rdp``: Renyi DP summed per order and converted (Mironov 2017); pure eps-DP enters as
    eps(alpha) = min{eps, alpha eps^2 / 2, log[(sinh(alpha eps) - sinh((alpha-1) eps)) / sinh(eps)] / (alpha-1)}.
  - ``tight`` (the default): the smaller of ``pld`` and ``basic`` - both hold, so the minimum does
    (basic, whose delta is smaller, unless PLD is lower by more than 1e-3). ``rdp`` is capped by
    basic composition likewise.
  The tight methods report epsilon at delta = target + T * delta_q; ``max_queries`` (a budget that
  refuses further queries) caps T when it counts the whole stream; a budget per principal does
  not cap the worst case (an adversary who opens a new client id gets a fresh budget).
* ``PerDocumentFilter(eps_q, M)``: min(T, M) * eps_q (``filters.filter_cap``), any method.
* ``OneTimeRelease(eps0, delta0)``: flat in T.
* ``NoFormalGuarantee``: eps = inf, delta = 1.

Person-level units (m documents per person) convert each query's guarantee by group privacy
(``group.py``) before composing; for Laplace/Gaussian noise the noise multiplier is divided by m
instead (sensitivity m * Delta), which is exact. A passage-level mechanism (``mechanism_unit``
"passage") converts the same way over its ``max_chunks`` passages per document (times m for a
person). Filters and one-time releases convert the final (eps, delta).

A release boundary wider than the claim voids it (``boundary_check``), and so does an assumption
of the proof that this configuration violates, or a passage-level proof whose chunks per document
are unknown (``assumption_check``): the result then carries eps = inf, delta = 1 and ``void=True``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ragleak.accounting.filters import filter_cap
from ragleak.accounting.group import group_epsilon
from ragleak.accounting.guarantee import (
    Boundary,
    Guarantee,
    NoFormalGuarantee,
    OneTimeRelease,
    PerDocumentFilter,
    PerResponse,
    PersonUnit,
)

Method = Literal["basic", "pld", "rdp", "tight"]
DEFAULT_DELTA = 1e-6
RDP_ORDERS = tuple([1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0, 32.0,
                    48.0, 64.0, 96.0, 128.0, 256.0, 512.0, 1024.0])


class Epsilon(BaseModel):
    """An (eps, delta) after ``queries`` queries, the method that computed it, and whether void."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    eps: float
    delta: float
    method: str
    queries: int
    void: bool = False
    reason: str = ""  # why the claim is void
    note: str = ""  # how the number was computed when not by ``method`` alone (an accountant's fallback)


def boundary_check(guarantee: Guarantee, shown: Boundary | None) -> str:
    """Why the claim does not cover what the adversary sees (``""`` when it does).

    * a synthetic corpus covers everything served from it (post-processing);
    * a claim on answers does not cover citations/passages shown next to them unless retrieval
      itself is randomised (otherwise which documents were used is released exactly);
    * a claim on the retrieved ids does not cover answers, which quote the selected passages.
    """
    claim = guarantee.boundary
    if shown is None or shown == claim or claim == "synthetic-corpus":
        return ""
    if claim == "answers+citations" and shown in ("answers", "retrieved-ids"):
        return ""
    if claim == "answers" and shown in ("answers+citations", "retrieved-ids"):
        if not guarantee.retrieval_randomised:
            return ("the DP claim covers answers only, but the target also shows citations/retrieved ids and "
                    "retrieval is deterministic: which documents were used is released exactly (delta >= 1)")
        if guarantee.retrieval_eps_q is None or not isinstance(guarantee.scope, PerResponse):
            # (a per-document filter charges a document only when used; a randomised selection reads
            # every document's score on every query, so its cost cannot be folded into the filter)
            return ("the DP claim covers answers only; retrieval is randomised but the claim does not state the "
                    "selection's own per-query epsilon, so the citations/ids shown next to the answers are not covered")
        return ""  # covered once the selection's epsilon is added (``with_shown_retrieval``)
    if claim == "retrieved-ids" and shown in ("answers", "answers+citations"):
        return ("the DP claim covers which documents are retrieved, not the answer text, which is "
                "generated from the selected passages verbatim (delta >= 1 for answers)")
    return f"the claim covers {claim!r}, not {shown!r}"


def with_shown_retrieval(guarantee: Guarantee, shown: Boundary | None) -> Guarantee:
    """An answers claim seen with the retrieved documents: each query also releases the randomised
    selection, so its eps is added per query (basic composition of the two mechanisms)."""
    scope, extra = guarantee.scope, guarantee.retrieval_eps_q
    if (guarantee.boundary != "answers" or shown not in ("answers+citations", "retrieved-ids") or not extra
            or not isinstance(scope, PerResponse)):
        return guarantee
    scope = scope.model_copy(update={"eps_q": scope.eps_q + extra, "mechanism": "generic", "noise_multiplier": None})
    return guarantee.model_copy(update={"scope": scope})


def assumption_check(guarantee: Guarantee) -> str:
    """Why this configuration does not meet the proof's premises (``""`` when nothing says it does not)."""
    reasons = [f"assumption '{a.name}' violated: {a.detail or a.statement}" for a in guarantee.violations]
    if guarantee.is_formal and guarantee.chunk_group is None:
        reasons.append("the mechanism protects one passage and the most passages per document is unknown, "
                       "so the document-level (group privacy) claim cannot be computed")
    return "; ".join(reasons)


def void_reason(guarantee: Guarantee, shown: Boundary | None = None) -> str:
    """Every reason the claim does not hold as seen at ``shown`` (``""``: it holds)."""
    if not guarantee.is_formal:
        return "no formal guarantee"
    return "; ".join(r for r in (boundary_check(guarantee, shown), assumption_check(guarantee)) if r)


def epsilon_after(guarantee: Guarantee, queries: int, *, method: Method = "tight", delta: float = DEFAULT_DELTA,
                  shown: Boundary | None = None) -> Epsilon:
    """(eps, delta) of ``guarantee`` after ``queries`` queries, seen at boundary ``shown``."""
    if queries < 0:
        raise ValueError("queries must be >= 0")
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must be in (0, 1)")
    scope = guarantee.scope
    if isinstance(scope, NoFormalGuarantee):
        return Epsilon(eps=math.inf, delta=1.0, method="none", queries=queries, void=True,
                       reason="no formal guarantee")
    reason = void_reason(guarantee, shown)
    if reason:
        return Epsilon(eps=math.inf, delta=1.0, method=f"{method} (void)", queries=queries, void=True, reason=reason)
    guarantee = with_shown_retrieval(guarantee, shown)
    scope = guarantee.scope
    m = guarantee.unit.max_docs if isinstance(guarantee.unit, PersonUnit) else 1
    m *= guarantee.chunk_group or 1  # a passage-level proof: a document is a group of passages
    if isinstance(scope, PerResponse):
        return _per_response(scope, queries, m, method, delta)
    if isinstance(scope, PerDocumentFilter):
        charges = min(queries, scope.max_charges)
        eps, dlt = group_epsilon(filter_cap(scope.eps_q, scope.max_charges, queries), charges * scope.delta_q, m)
        return Epsilon(eps=eps, delta=min(1.0, dlt), method="filter-cap", queries=queries)
    assert isinstance(scope, OneTimeRelease)
    eps, dlt = group_epsilon(scope.eps0, scope.delta0, m)
    return Epsilon(eps=eps, delta=dlt, method="one-time", queries=queries)


def _per_response(scope: PerResponse, queries: int, m: int, method: Method, delta: float) -> Epsilon:
    cap = scope.max_queries if scope.budget_scope != "principal" else None
    t = queries if cap is None else min(queries, cap)
    eps_q, delta_q = group_epsilon(scope.eps_q, scope.delta_q, m)
    basic = Epsilon(eps=t * eps_q, delta=min(1.0, t * delta_q), method="basic", queries=queries)
    if method == "basic" or t == 0 or eps_q == 0.0:
        return basic
    target = min(delta + t * delta_q, 1.0)
    if target >= 1.0:
        return basic
    noise = None if scope.noise_multiplier is None or scope.mechanism not in ("laplace", "gaussian") \
        else scope.noise_multiplier / m
    if method == "rdp":
        eps = rdp_epsilon(scope.mechanism, eps_q, delta_q, noise, t, target)
        return Epsilon(eps=eps, delta=target, method="rdp", queries=queries)
    eps = pld_epsilon(scope.mechanism, eps_q, delta_q, noise, t, target)
    if not math.isfinite(eps):  # more mass on an infinite loss than delta: basic composition still holds
        return basic.model_copy(update={"method": f"{method} -> basic",
                                        "note": f"the PLD gives no finite epsilon at delta={target:g} "
                                                f"after T={t}; basic composition reported"})
    if method == "pld":
        return Epsilon(eps=eps, delta=target, method="pld", queries=queries)
    if basic.eps <= eps + 1e-3:  # basic also has the smaller delta: prefer it unless PLD really helps
        return basic.model_copy(update={"method": "tight (basic)"})
    return Epsilon(eps=eps, delta=target, method="tight (pld)", queries=queries)


@lru_cache(maxsize=4096)
def pld_epsilon(mechanism: str, eps_q: float, delta_q: float, noise: float | None, t: int, delta: float) -> float:
    """eps at ``delta`` after t self-compositions of the mechanism's privacy-loss distribution
    (dp-accounting's PLD, pessimistic discretisation), read off by ``stable_epsilon_for_delta``."""
    from dp_accounting.pld import common, privacy_loss_distribution as pld

    if noise is not None:  # as dp-accounting's PLDAccountant composes these events
        composed = (pld.from_laplace_mechanism(noise, value_discretization_interval=1e-4).self_compose(t)
                    if mechanism == "laplace" else
                    pld.from_gaussian_mechanism(noise / math.sqrt(t), value_discretization_interval=1e-4))
    else:
        interval = max(1e-4, eps_q / 1000)
        composed = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps_q, delta_q),
                                               value_discretization_interval=interval).self_compose(t)
    pmfs = [composed._pmf_remove] if composed._symmetric else [composed._pmf_remove, composed._pmf_add]
    return max(stable_epsilon_for_delta(p.to_dense_pmf(), delta) for p in pmfs)


def stable_epsilon_for_delta(pmf, delta: float) -> float:
    """The smallest eps whose hockey-stick divergence of a dense privacy-loss pmf is <= delta.

    The search of dp-accounting 0.6 (``_get_epsilon_for_delta``): walk the losses from the
    largest down, adding each one's mass to M_up and mass * e^-loss to M_low, and stop once
    log((M_up - delta) / M_low) reaches the next loss. It keeps M_low as a float, which becomes
    subnormal for losses above ~708 and turns the ratio into inf: an infinite epsilon for a
    mechanism whose true epsilon is finite (e.g. T=280 compositions of 2.625-DP). The same walk
    with M_low kept as a logarithm, vectorised."""
    if pmf._infinity_mass > delta:
        return math.inf
    # the FFT composition leaves rounding noise of ~1e-18 as negative masses; they are zeros
    probs = np.clip(np.flip(np.asarray(pmf._probs, dtype=float)), 0.0, None)
    losses = (pmf._lower_loss + len(probs) - 1 - np.arange(len(probs))) * pmf._discretization
    with np.errstate(divide="ignore"):  # log(0) = -inf for empty buckets is what the sums need
        log_weighted = np.log(probs) - losses
    # state before item k: M_up[k] (infinity mass + the k largest losses' mass) and log M_low[k]
    upper = pmf._infinity_mass + np.concatenate(([0.0], np.cumsum(probs)))
    log_lower = np.concatenate(([-math.inf], np.logaddexp.accumulate(log_weighted)))
    with np.errstate(divide="ignore", invalid="ignore"):
        candidate = np.log(np.maximum(upper - delta, 0.0)) - log_lower
    stop = (upper[:-1] > delta) & np.isfinite(log_lower[:-1]) & (candidate[:-1] >= losses)
    k = int(np.argmax(stop)) if stop.any() else len(probs)
    if upper[k] - delta <= 0.0 or math.log(upper[k] - delta) <= log_lower[k]:
        return 0.0
    return float(candidate[k])


def pure_dp_rdp(eps: float, orders: tuple[float, ...] = RDP_ORDERS) -> np.ndarray:
    """Renyi divergence bound of order alpha for a pure eps-DP mechanism (Bun-Steinke / Mironov)."""
    out = []
    for a in orders:
        quadratic = a * eps * eps / 2
        hi, lo = a * eps, (a - 1) * eps
        # log(sinh(hi) - sinh(lo)) computed stably for large arguments
        rest = 1.0 - math.exp(lo - hi) - math.exp(-2 * hi) + math.exp(-hi - lo)
        log_diff = hi - math.log(2.0) + math.log(rest) if rest > 0 else -math.inf
        log_sinh = eps - math.log(2.0) + math.log1p(-math.exp(-2 * eps))
        sinh_form = (log_diff - log_sinh) / (a - 1)
        out.append(min(eps, quadratic, sinh_form))
    return np.array(out)


@lru_cache(maxsize=4096)
def rdp_epsilon(mechanism: str, eps_q: float, delta_q: float, noise: float | None, t: int, delta: float) -> float:
    """eps at ``delta`` after t compositions by dp-accounting's RDP accountant / conversion."""
    from dp_accounting import dp_event, rdp
    from dp_accounting.rdp import rdp_privacy_accountant

    if noise is not None:
        event = dp_event.LaplaceDpEvent(noise) if mechanism == "laplace" else dp_event.GaussianDpEvent(noise)
        accountant = rdp.RdpAccountant(list(RDP_ORDERS))
        accountant.compose(event, t)
        return float(min(accountant.get_epsilon(delta), t * eps_q))  # basic composition also holds
    if delta_q > 0:
        return t * eps_q  # RDP has no exact form for approximate DP; report basic composition
    eps, _ = rdp_privacy_accountant.compute_epsilon(list(RDP_ORDERS), t * pure_dp_rdp(eps_q), delta)
    return float(min(eps, t * eps_q))


def max_queries_within(guarantee: Guarantee, budget_eps: float, *, method: Method = "tight",
                       delta: float = DEFAULT_DELTA, limit: int = 100_000) -> int:
    """The largest T with epsilon_after(guarantee, T) <= budget_eps (0 when even one query is over)."""
    if epsilon_after(guarantee, 1, method=method, delta=delta).eps > budget_eps:
        return 0
    lo, hi = 1, 2
    while hi <= limit and epsilon_after(guarantee, hi, method=method, delta=delta).eps <= budget_eps:
        lo, hi = hi, hi * 2
    if hi > limit:
        return limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if epsilon_after(guarantee, mid, method=method, delta=delta).eps <= budget_eps:
            lo = mid
        else:
            hi = mid
    return lo
