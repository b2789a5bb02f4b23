"""eps(T) per scope: basic, PLD and RDP accountants, cross-checked against prv-accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.accounting import (
    Guarantee,
    NoFormalGuarantee,
    OneTimeRelease,
    PerDocumentFilter,
    PerResponse,
    PersonUnit,
    epsilon_after,
    max_queries_within,
)

pure = st.floats(min_value=0.01, max_value=3.0)
counts = st.integers(min_value=0, max_value=300)


@settings(max_examples=40, deadline=None)
@given(eps=pure, t1=counts, t2=counts, method=st.sampled_from(["basic", "tight", "pld", "rdp"]))
def test_composition_is_monotone_in_T(eps, t1, t2, method):
    lo, hi = sorted((t1, t2))
    g = Guarantee(scope=PerResponse(eps_q=eps))
    assert epsilon_after(g, lo, method=method).eps <= epsilon_after(g, hi, method=method).eps + 1e-9


@settings(max_examples=25, deadline=None)
@given(noise=st.floats(min_value=0.3, max_value=5.0), t1=counts, t2=counts)
def test_laplace_pld_is_monotone_and_never_above_basic(noise, t1, t2):
    lo, hi = sorted((t1, t2))
    g = Guarantee(scope=PerResponse(eps_q=1 / noise, mechanism="laplace", noise_multiplier=noise))
    a, b = epsilon_after(g, lo), epsilon_after(g, hi)
    assert a.eps <= b.eps + 1e-9
    assert b.eps <= hi / noise + 1e-12


def test_basic_composition_is_linear():
    g = Guarantee(scope=PerResponse(eps_q=0.3, delta_q=1e-7))
    e = epsilon_after(g, 20, method="basic")
    assert e.eps == pytest.approx(6.0) and e.delta == pytest.approx(2e-6)


def test_tight_accountant_beats_basic_for_many_queries():
    g = Guarantee(scope=PerResponse(eps_q=0.1))
    tight, basic = epsilon_after(g, 1000), epsilon_after(g, 1000, method="basic")
    assert basic.eps == pytest.approx(100.0)
    assert tight.eps < 0.25 * basic.eps  # ~sqrt(T) growth: 0.1*sqrt(2000 ln 1e6) + 1000*0.1*(e^0.1-1) ~ 22
    assert tight.delta == pytest.approx(1e-6)


@pytest.mark.parametrize("eps_q, t", [(0.5, 100), (0.1, 1000), (1.0, 30)])
def test_pld_agrees_with_prv_accountant_for_pure_dp(eps_q, t):
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import PureDPMechanism

    ours = epsilon_after(Guarantee(scope=PerResponse(eps_q=eps_q)), t, method="pld").eps
    prv = PRVAccountant(prvs=[PureDPMechanism(eps_q)], max_self_compositions=[t], eps_error=0.01, delta_error=1e-9)
    lower, _, upper = prv.compute_epsilon(delta=1e-6, num_self_compositions=[t])
    assert lower - 0.02 <= ours <= upper + 0.02


def test_laplace_pld_agrees_with_prv_accountant():
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import LaplaceMechanism

    g = Guarantee(scope=PerResponse(eps_q=0.5, mechanism="laplace", noise_multiplier=2.0))
    ours = epsilon_after(g, 100, method="pld").eps
    prv = PRVAccountant(prvs=[LaplaceMechanism(mu=0.5)], max_self_compositions=[100], eps_error=0.01, delta_error=1e-9)
    lower, _, upper = prv.compute_epsilon(delta=1e-6, num_self_compositions=[100])
    assert lower - 0.02 <= ours <= upper + 0.02
    rdp = epsilon_after(g, 100, method="rdp").eps
    assert ours <= rdp <= 50.0  # RDP is valid but looser than PLD, and better than basic here


def test_gaussian_pld_matches_the_exact_gdp_value():
    # T=100 Gaussian, noise multiplier 5: mu = sqrt(T)/sigma = 2, eps(1e-5) = 9.9973 (the exact mu-GDP curve, Dong, Roth, Su 2019, arXiv 1905.02383)
    g = Guarantee(scope=PerResponse(eps_q=1.0, delta_q=0.0, mechanism="gaussian", noise_multiplier=5.0))
    assert epsilon_after(g, 100, method="pld", delta=1e-5).eps == pytest.approx(9.9973, abs=0.01)


def exact_pure_dp_composition(eps_q: float, t: int, delta: float) -> float:
    """eps(delta) of t compositions of eps_q-randomised response, exactly (Kairouz, Oh, Viswanath 2015,
    arXiv 1311.0776): the loss is eps_q (t - 2k) with k ~ Binomial(t, 1 / (1 + e^eps_q)), summed in logs."""
    from scipy.optimize import brentq
    from scipy.stats import binom

    k = np.arange(t + 1)
    log_p = binom.logpmf(k, t, 1.0 / (1.0 + math.exp(eps_q)))
    loss = eps_q * (t - 2 * k)

    def excess(e: float) -> float:  # hockey-stick divergence at e, minus delta
        over = loss > e
        return float(np.sum(np.exp(log_p[over]) * -np.expm1(e - loss[over]))) - delta

    return 0.0 if excess(0.0) <= 0 else brentq(excess, 0.0, t * eps_q, xtol=1e-9)


@settings(max_examples=20, deadline=None)
@given(eps=st.floats(min_value=0.5, max_value=3.0), t=st.integers(min_value=1, max_value=320))
def test_pld_is_finite_and_exact_for_large_composed_losses(eps, t):
    # dp-accounting's own search returned inf at T=277, eps_q=2.625 (its running mass underflows
    # past a loss of ~708) and 735 at T=286; the pessimistic PLD must sit just above the exact value
    g = Guarantee(scope=PerResponse(eps_q=eps))
    pld = epsilon_after(g, t, method="pld")
    exact = exact_pure_dp_composition(eps, t, 1e-6)
    assert math.isfinite(pld.eps) and pld.method == "pld"
    assert exact - 1e-6 <= pld.eps <= exact + t * eps / 1000 + 1e-6  # discretisation: eps_q/1000 per step


def test_pld_at_the_overflow_point_that_was_inf():
    g = Guarantee(scope=PerResponse(eps_q=2.625))
    values = [epsilon_after(g, t, method="pld").eps for t in (276, 277, 278, 286)]
    assert values == sorted(values) and values[1] < 277 * 2.625
    assert values[1] == pytest.approx(exact_pure_dp_composition(2.625, 277, 1e-6), abs=0.3)


def test_budget_caps_the_number_of_composed_queries():
    g = Guarantee(scope=PerResponse(eps_q=0.5, max_queries=4))
    assert epsilon_after(g, 1000, method="basic").eps == pytest.approx(2.0)


def test_max_queries_within_budget():
    g = Guarantee(scope=PerResponse(eps_q=0.5))
    assert max_queries_within(g, 3.0, method="basic") == 6
    n = max_queries_within(g, 3.0)
    assert n >= 6
    assert epsilon_after(g, n).eps <= 3.0 < epsilon_after(g, n + 1).eps


@settings(max_examples=30, deadline=None)
@given(eps=pure, m=st.integers(min_value=1, max_value=50), t=st.integers(min_value=0, max_value=10_000))
def test_per_document_filter_is_capped_at_M_eps(eps, m, t):
    g = Guarantee(scope=PerDocumentFilter(eps_q=eps, max_charges=m))
    e = epsilon_after(g, t)
    assert e.eps == pytest.approx(min(t, m) * eps)
    assert e.eps <= m * eps + 1e-12


def test_one_time_release_is_flat_and_none_is_infinite():
    flat = Guarantee(scope=OneTimeRelease(eps0=2.0, delta0=1e-6), boundary="synthetic-corpus")
    assert {epsilon_after(flat, t).eps for t in (1, 10, 1000)} == {2.0}
    none = epsilon_after(Guarantee(scope=NoFormalGuarantee()), 5)
    assert math.isinf(none.eps) and none.delta == 1.0 and none.void


def test_person_level_laplace_divides_the_noise_multiplier():
    doc = Guarantee(scope=PerResponse(eps_q=0.5, mechanism="laplace", noise_multiplier=2.0))
    person = doc.model_copy(update={"unit": PersonUnit(max_docs=3)})
    assert epsilon_after(person, 1, method="basic").eps == pytest.approx(1.5)
    same_as = Guarantee(scope=PerResponse(eps_q=1.5, mechanism="laplace", noise_multiplier=2 / 3))
    assert epsilon_after(person, 50).eps == pytest.approx(epsilon_after(same_as, 50).eps, rel=1e-9)


def _exact_rr_delta(eps, k, target):
    """delta(target) of k-fold randomised response with eps: the optimal composition of k pure
    eps-DP mechanisms (Kairouz-Oh-Viswanath), summed exactly over the binomial outcomes."""
    import numpy as np
    from scipy.special import gammaln

    l = np.arange(k + 1)
    keep = (k - 2 * l) * eps > target
    logc = gammaln(k + 1) - gammaln(l + 1) - gammaln(k - l + 1)
    lp, lq = -math.log1p(math.exp(-eps)), -math.log1p(math.exp(eps))
    la, lb = logc + (k - l) * lp + l * lq, logc + l * lp + (k - l) * lq
    return float(np.sum(np.exp(la[keep]) * (1 - np.exp(target + lb[keep] - la[keep]))))


@pytest.mark.parametrize("eps_q, t", [(1.0, 100), (1.0, 1000), (0.1, 1000), (0.5, 100)])
def test_pld_equals_the_exact_optimal_composition_of_pure_dp(eps_q, t):
    lo, hi = 0.0, t * eps_q
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _exact_rr_delta(eps_q, t, mid) > 1e-6 else (lo, mid)
    ours = epsilon_after(Guarantee(scope=PerResponse(eps_q=eps_q)), t, method="pld").eps
    assert ours == pytest.approx(hi, abs=1e-4)
    assert ours >= hi - 1e-6  # pessimistic: never below the exact value
