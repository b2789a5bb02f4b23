"""Bootstrap aggregation: nominal coverage, determinism, dedup of duplicate runs, paired deltas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.metrics.stats import (
    bootstrap,
    bootstrap_mean,
    dedup_runs,
    paired_bootstrap_delta,
    run_fingerprint,
    unpaired_bootstrap_delta,
)


def test_95_interval_covers_a_known_mean_at_about_the_nominal_rate():
    """Over 400 seeds, the interval of the mean of 60 Exp(1) draws covers 1.0 about 95% of the time."""
    hits = 0
    trials = 400
    for seed in range(trials):
        sample = np.random.default_rng(10_000 + seed).exponential(1.0, size=60)
        hits += 1.0 in bootstrap_mean(sample, seed=seed)
    rate = hits / trials
    # percentile intervals under-cover slightly for skewed data at n = 60 (about 0.93); binomial
    # noise over 400 trials is +-0.011, so [0.89, 0.98] is a ~3.5 sigma band around that
    assert 0.89 <= rate <= 0.98, rate


def test_coverage_fails_for_a_wrong_mean():
    """The same check can fail: a mean of 1.5 (about 4 standard errors off) is almost never covered."""
    hits = sum(1.5 in bootstrap_mean(np.random.default_rng(s).exponential(1.0, 60), seed=s) for s in range(100))
    assert hits < 10


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=30), st.integers(0, 2**32 - 1))
def test_interval_brackets_estimate_and_is_reproducible(values, seed):
    iv = bootstrap_mean(values, seed=seed, n_resamples=200)
    assert iv.low <= iv.estimate + 1e-9 and iv.estimate <= iv.high + 1e-9
    assert iv.estimate == pytest.approx(float(np.mean(values)))
    assert bootstrap_mean(values, seed=seed, n_resamples=200) == iv
    assert min(values) - 1e-9 <= iv.low and iv.high <= max(values) + 1e-9


def test_generic_bootstrap_matches_the_vectorised_mean():
    values = list(np.random.default_rng(3).normal(size=25))
    a = bootstrap(values, lambda runs: float(np.mean(runs)), seed=7)
    b = bootstrap_mean(values, seed=7)
    assert (a.low, a.high) == pytest.approx((b.low, b.high))
    assert a.n_resamples == 2000 and a.confidence == 0.95


def test_deterministic_duplicates_are_dropped_before_resampling():
    fps = [run_fingerprint({"seed": s}, f"answers-{s}") for s in (1, 2, 3)]
    values = [1.0, 2.0, 3.0]
    # the same three runs repeated (an eps=1 and an eps=5 copy of a non-DP defense)
    iv = bootstrap_mean(values * 2, fingerprints=fps * 2)
    assert iv.n_runs == 6 and iv.n_unique == 3
    assert iv == bootstrap_mean(values).__class__(**{**bootstrap_mean(values).to_dict(), "n_runs": 6})
    assert dedup_runs(["a", "b", "a2"], ["x", "y", "x"]) == ["a", "b"]
    with pytest.raises(ValueError):
        dedup_runs([1, 2], ["x"])


def test_one_unique_run_gives_a_degenerate_interval():
    iv = bootstrap_mean([2.0, 2.0], fingerprints=["same", "same"])
    assert (iv.estimate, iv.low, iv.high, iv.n_unique) == (2.0, 2.0, 2.0, 1)
    with pytest.raises(ValueError):
        bootstrap_mean([])


def test_paired_delta_cancels_shared_run_variation():
    rng = np.random.default_rng(0)
    base = rng.normal(10.0, 5.0, size=30)  # large run-to-run variation
    treat = base - 1.0 + rng.normal(0.0, 0.1, size=30)  # a small, consistent effect
    paired = paired_bootstrap_delta(treat, base)
    unpaired = unpaired_bootstrap_delta(treat, base)
    assert paired.high < 0 and -1.2 < paired.estimate < -0.8
    assert unpaired.low < 0 < unpaired.high  # unpaired cannot see it through the shared noise
    assert paired.estimate == pytest.approx(unpaired.estimate)
    with pytest.raises(ValueError):
        paired_bootstrap_delta([1.0], [1.0, 2.0])


@pytest.mark.parametrize("seed", [0, 7])
def test_our_percentile_bootstrap_agrees_with_scipy(seed):
    """Same generator, same statistic: ``stats.bootstrap`` gives scipy's percentile interval."""
    from scipy import stats as sps

    data = np.random.default_rng(100 + seed).lognormal(0.0, 1.0, size=40)
    mine = bootstrap(list(data), lambda xs: float(np.median(xs)), n_resamples=999, seed=seed)
    ref = sps.bootstrap((data,), np.median, n_resamples=999, method="percentile", vectorized=False,
                        random_state=np.random.default_rng(seed), confidence_level=0.95)
    assert (mine.low, mine.high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high))


def test_bootstrap_skips_undefined_resamples():
    from ragleak.metrics.stats import roc_auc

    units = [(1, 0.9), (0, 0.1), (1, 0.8), (0, 0.3)]
    iv = bootstrap(units, lambda s: roc_auc([y for y, _ in s], [x for _, x in s]), n_resamples=500, seed=1)
    assert iv.estimate == 1.0 and 0 < iv.n_undefined < 500  # one-class resamples are skipped, not zero
    assert np.isnan(roc_auc([1, 1], [0.2, 0.3]))
