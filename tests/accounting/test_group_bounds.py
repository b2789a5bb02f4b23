"""Group privacy, Poisson amplification and its guard, the hypothesis-testing bound and its converse."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.accounting import (
    AmplificationError,
    Guarantee,
    PerResponse,
    amplify,
    audit_ceiling,
    cp_lower,
    cp_upper,
    eps_lower_bound,
    group_epsilon,
    poisson_amplified,
    tpr_bound,
)
from ragleak.errors import RagleakError


@settings(max_examples=200, deadline=None)
@given(eps=st.floats(min_value=0.0, max_value=5.0), delta=st.floats(min_value=0.0, max_value=1e-3),
       m=st.integers(min_value=1, max_value=20))
def test_group_conversion_matches_the_formula(eps, delta, m):
    g_eps, g_delta = group_epsilon(eps, delta, m)
    assert g_eps == pytest.approx(m * eps)
    expected = delta * math.fsum(math.exp(j * eps) for j in range(m))
    assert g_delta == pytest.approx(min(1.0, expected), rel=1e-9, abs=1e-300)


def test_group_example_from_the_spec():
    eps, delta = group_epsilon(1.0, 1e-6, 5)
    assert eps == 5.0 and delta == pytest.approx(8.6e-5, rel=0.01)


def test_poisson_amplification_numbers_and_the_top_k_guard():
    assert poisson_amplified(1.0, 0.0, 0.1)[0] == pytest.approx(0.159, abs=1e-3)
    assert poisson_amplified(1.0, 1e-6, 0.01) == pytest.approx((0.017, 1e-8), abs=1e-3)
    with pytest.raises(AmplificationError, match="top-k"):
        poisson_amplified(1.0, 0.0, 0.1, selection="top-k")
    with pytest.raises(RagleakError):
        amplify(Guarantee(scope=PerResponse(eps_q=1.0)), 0.1, selection="threshold")
    amplified = amplify(Guarantee(scope=PerResponse(eps_q=1.0)), 0.1)
    assert amplified.scope.eps_q == pytest.approx(math.log1p(0.1 * (math.e - 1)))


@settings(max_examples=300, deadline=None)
@given(fpr=st.floats(min_value=0.0, max_value=1.0), eps=st.floats(min_value=0.0, max_value=50.0),
       delta=st.floats(min_value=0.0, max_value=1.0))
def test_tpr_bound_is_a_probability_at_least_fpr(fpr, eps, delta):
    t = tpr_bound(fpr, eps, delta)
    assert 0.0 <= t <= 1.0
    assert t >= fpr - 1e-12  # a test that ignores the data reaches TPR = FPR


@settings(max_examples=200, deadline=None)
@given(fpr=st.floats(min_value=0.0, max_value=1.0))
def test_tpr_bound_equals_fpr_without_privacy_loss(fpr):
    assert tpr_bound(fpr, 0.0, 0.0) == pytest.approx(fpr, abs=1e-12)


def test_tpr_bound_at_low_fpr():
    assert tpr_bound(1e-3, 1.0, 0.0) == pytest.approx(math.e * 1e-3)
    assert tpr_bound(0.5, 1.0, 0.0) == pytest.approx(1 - math.exp(-1) * 0.5)


def test_randomised_response_meets_the_bound_exactly():
    # RR with eps: report the true bit w.p. e^eps/(1+e^eps). The test "reported 1" has
    # FPR = 1/(1+e^eps), TPR = e^eps/(1+e^eps) - exactly on the boundary.
    eps = 1.3
    fpr, tpr = 1 / (1 + math.exp(eps)), math.exp(eps) / (1 + math.exp(eps))
    assert tpr_bound(fpr, eps) == pytest.approx(tpr)


def test_empirical_epsilon_worked_numbers():
    assert eps_lower_bound(10, 1000, 700, 1000, delta=1e-5) == pytest.approx(2.70, abs=0.01)
    assert eps_lower_bound(1, 100, 50, 100, delta=0.0) == pytest.approx(1.99, abs=0.01)
    assert eps_lower_bound(50, 100, 50, 100) == 0.0  # a coin flip proves nothing
    assert audit_ceiling(100) == pytest.approx(3.28, abs=0.01)
    assert audit_ceiling(1000) == pytest.approx(5.60, abs=0.01)
    assert eps_lower_bound(0, 100, 0, 100) == pytest.approx(audit_ceiling(100), abs=1e-9)


def test_bonferroni_lowers_the_bound():
    assert eps_lower_bound(10, 1000, 700, 1000, n_thresholds=20) < eps_lower_bound(10, 1000, 700, 1000)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(min_value=1, max_value=500), data=st.data())
def test_clopper_pearson_brackets_the_point_estimate(n, data):
    k = data.draw(st.integers(min_value=0, max_value=n))
    assert cp_lower(k, n, 0.025) <= k / n <= cp_upper(k, n, 0.025)
