"""MI AUC and TPR at low FPR against scikit-learn; the Fisher test against scipy and the seed's numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import fisher_exact, mannwhitneyu
from sklearn.metrics import roc_auc_score, roc_curve

from ragleak.metrics.canary import CanaryRun, compare, fisher_one_sided, per_seed_table, recovered
from ragleak.metrics.membership import MembershipAUC, auc, clopper_pearson, membership_auc, tpr_at_fpr

MEMBERS = [0.9, 0.8, 0.8, 0.7, 0.55, 0.4, 0.35, 0.9, 0.6, 0.3]
NONMEMBERS = [0.1, 0.2, 0.8, 0.3, 0.35, 0.5, 0.05, 0.6, 0.2, 0.4, 0.45, 0.1, 0.0, 0.7, 0.25]


def _sk_auc(m, n):
    return roc_auc_score([1] * len(m) + [0] * len(n), list(m) + list(n))


def _sk_tpr(m, n, fpr):
    f, t, _ = roc_curve([1] * len(m) + [0] * len(n), list(m) + list(n), drop_intermediate=False)
    return float(t[f <= fpr + 1e-12].max())


def test_auc_matches_sklearn_and_mann_whitney_on_fixed_inputs():
    expected = _sk_auc(MEMBERS, NONMEMBERS)
    assert auc(MEMBERS, NONMEMBERS) == pytest.approx(expected)
    u = mannwhitneyu(MEMBERS, NONMEMBERS).statistic
    assert auc(MEMBERS, NONMEMBERS) == pytest.approx(u / (len(MEMBERS) * len(NONMEMBERS)))
    assert membership_auc(MEMBERS, NONMEMBERS).auc100 == pytest.approx(100 * expected)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=20), st.lists(st.integers(0, 6), min_size=1, max_size=40))
def test_auc_and_tpr_match_sklearn_with_ties(members, nonmembers):
    assert auc(members, nonmembers) == pytest.approx(_sk_auc(members, nonmembers))
    for fpr in (0.01, 0.1, 0.5):
        assert tpr_at_fpr(members, nonmembers, fpr) == pytest.approx(_sk_tpr(members, nonmembers, fpr))


def test_tpr_at_low_fpr_and_reversal():
    rng = np.random.default_rng(1)
    nonmembers = rng.normal(0, 1, 1000)
    members = rng.normal(2, 1, 100)
    res = membership_auc(members, nonmembers, n_resamples=300)
    assert res.tpr_at_1pct == pytest.approx(_sk_tpr(members, nonmembers, 0.01))
    assert res.tpr_at_10pct == pytest.approx(_sk_tpr(members, nonmembers, 0.10))
    assert res.tpr_at_0_1pct == pytest.approx(_sk_tpr(members, nonmembers, 0.001))
    assert res.low_fpr_supported == {"10%": True, "1%": True, "0.1%": False}
    assert res.tpr_at_1pct_ci[0] <= res.tpr_at_1pct <= res.tpr_at_1pct_ci[1]
    assert res.interval.low <= res.auc100 <= res.interval.high
    flipped = membership_auc(-members, -nonmembers, n_resamples=100)
    assert flipped.reversal and flipped.advantage == pytest.approx(res.advantage)
    small = membership_auc(MEMBERS, NONMEMBERS, n_resamples=100)
    assert small.low_fpr_supported == {"10%": False, "1%": False, "0.1%": False}


def test_run_level_bootstrap_resamples_runs():
    rng = np.random.default_rng(2)
    runs_m = [rng.normal(1, 1, 10) for _ in range(8)]
    runs_n = [rng.normal(0, 1, 100) for _ in range(8)]
    res = membership_auc(runs_m, runs_n, runs=True, n_resamples=300)
    assert res.n_members == 80 and res.n_nonmembers == 800
    assert res.interval.n_unique == 8
    assert res.interval.low < res.auc100 < res.interval.high
    assert res.auc100 == pytest.approx(100 * _sk_auc(np.concatenate(runs_m), np.concatenate(runs_n)))


def test_membership_metric_declares_its_channel():
    assert MembershipAUC.channels == {"retrieval"}


def test_fisher_matches_scipy_and_the_seed_number():
    res = fisher_one_sided(53, 150, 0, 150)
    ref = fisher_exact([[53, 97], [0, 150]], alternative="greater")
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    assert res.p_value == pytest.approx(4.06e-19, rel=0.01)  # 53/150 vs 0/150, the canary counts of Mind the Hook (arXiv 2608.09001)
    assert math.isinf(res.odds_ratio)
    for a, n1, b, n2 in [(5, 20, 2, 20), (0, 10, 3, 10), (7, 9, 7, 9)]:
        ref = fisher_exact([[a, n1 - a], [b, n2 - b]], alternative="greater")
        assert fisher_one_sided(a, n1, b, n2).p_value == pytest.approx(ref.pvalue)
    with pytest.raises(ValueError):
        fisher_one_sided(5, 4, 0, 4)


def test_clopper_pearson_matches_the_seed_interval():
    low, high = clopper_pearson(53, 150)
    assert (round(low, 3), round(high, 3)) == (0.277, 0.435)  # "35.3%, two-sided CP 95% [27.7%, 43.5%]"


def _runs(defense, seeds_hits, n=5):
    runs = []
    for seed, hits in seeds_hits.items():
        canaries = tuple(f"operator_{i}_{seed:x}@acmetest-internal.canary" for i in range(n))
        answers = tuple(f"contact {canaries[i]} today" for i in hits) + ("nothing here",)
        runs.append(CanaryRun(defense, seed, canaries, answers))
    return runs


def test_exact_match_counts_per_seed_and_comparison():
    base = _runs("none", {101: [0, 1, 2], 102: [0, 3], 103: [1]})
    masked = _runs("lprag", {101: [], 102: [3], 103: []})
    table = per_seed_table(base + masked)
    assert [(r["defense"], r["seed"], r["recovered"]) for r in table] == [
        ("lprag", 101, 0), ("lprag", 102, 1), ("lprag", 103, 0), ("none", 101, 3), ("none", 102, 2), ("none", 103, 1)]
    out = compare(base, masked)
    assert out["a"]["recovered"] == 6 and out["b"]["recovered"] == 1 and out["a"]["total"] == 15
    ref = fisher_exact([[6, 9], [1, 14]], alternative="greater").pvalue
    assert out["fisher"]["p_value"] == pytest.approx(ref)
    assert out["mcnemar_p"] == pytest.approx(0.5 ** 5)  # 5 pairs only A recovered, 0 only B


def test_exact_match_is_exact():
    canary = "operator_7_ab12cd34@acmetest-internal.canary"
    assert recovered([canary], [f"it is {canary}."]) == {canary}
    assert recovered([canary], ["operator_7_ab12cd34 at acmetest-internal.canary"]) == set()
    assert recovered([canary], [canary.upper()]) == set()
