"""DP as hypothesis testing, and empirical epsilon lower bounds from an attack
(Kairouz, Oh, Viswanath 2015; Jagielski, Ullman, Oprea 2020, arXiv 2006.07709).

Bound. If M is (eps, delta)-DP, every test of "M(D)" against "M(D')" with rejection region S has

    TPR <= min{ e^eps * FPR + delta,  1 - e^{-eps} * (1 - delta - FPR) }

(DP on S gives the first; DP on the complement with the roles swapped gives the second). At
eps = delta = 0 both equal FPR: no test beats chance.

Converse. From FP of n_out and FN of n_in observed errors, one-sided Clopper-Pearson upper
bounds fpr_u, fnr_u at level a = alpha / (2 * n_thresholds) (Bonferroni over the two rates and
every threshold tried) give, with probability >= 1 - alpha, that M is not (eps, delta)-DP for

    eps < max{ log((1 - delta - fpr_u) / fnr_u),  log((1 - delta - fnr_u) / fpr_u) }.

A finite audit has a ceiling: a perfect attack on N trials per world gives
log(t / (1 - t)), t = (alpha/2)^(1/N); print it next to every eps_LB.
"""

from __future__ import annotations

import math


def tpr_bound(fpr: float, eps: float, delta: float = 0.0) -> float:
    """The largest TPR any test can reach at false-positive rate ``fpr`` against (eps, delta)-DP."""
    if not 0.0 <= fpr <= 1.0:
        raise ValueError("fpr must be in [0, 1]")
    if eps < 0:
        raise ValueError("eps must be >= 0")
    first = fpr * math.exp(eps) + delta if fpr > 0 and eps < 700 else (delta if fpr == 0 else 1.0)
    second = 1.0 - (0.0 if math.isinf(eps) else math.exp(-eps)) * (1.0 - delta - fpr)
    return max(0.0, min(1.0, first, second))


def cp_upper(k: int, n: int, a: float) -> float:
    """One-sided Clopper-Pearson upper confidence bound on a rate from k of n, level 1 - a."""
    from scipy.stats import beta as beta_dist

    _counts(k, n)
    return 1.0 if k == n else float(beta_dist.ppf(1.0 - a, k + 1, n - k))


def cp_lower(k: int, n: int, a: float) -> float:
    """One-sided Clopper-Pearson lower confidence bound on a rate from k of n, level 1 - a."""
    from scipy.stats import beta as beta_dist

    _counts(k, n)
    return 0.0 if k == 0 else float(beta_dist.ppf(a, k, n - k + 1))


def _counts(k: int, n: int) -> None:
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")


def _log_ratio(num: float, den: float) -> float:
    if num <= 0.0:
        return 0.0
    if den <= 0.0:
        return math.inf
    return math.log(num / den)


def eps_lower_bound(fp: int, n_out: int, fn: int, n_in: int, delta: float = 0.0,
                    alpha: float = 0.05, n_thresholds: int = 1) -> float:
    """With probability >= 1 - alpha the mechanism is not (eps, delta)-DP for any eps below this."""
    a = alpha / (2 * n_thresholds)
    fpr_u, fnr_u = cp_upper(fp, n_out, a), cp_upper(fn, n_in, a)
    candidates = [_log_ratio(1.0 - delta - fpr_u, fnr_u), _log_ratio(1.0 - delta - fnr_u, fpr_u)]
    return max([0.0] + [c for c in candidates if math.isfinite(c)])


def audit_ceiling(n_trials: int, alpha: float = 0.05) -> float:
    """The largest eps_LB any attack can certify with n_trials per world (a perfect attack)."""
    t = (alpha / 2) ** (1.0 / n_trials)
    return math.log(t / (1.0 - t))


def log_ratio_interval(k_a: int, n_a: int, k_b: int, n_b: int, z: float = 4.0) -> tuple[float, float, float]:
    """Estimated privacy loss log(p_a / p_b) of one event seen k_a of n_a and k_b of n_b times,
    with a normal (delta-method) interval of +-z standard errors:
    se^2 = (1 - p_a)/(n_a p_a) + (1 - p_b)/(n_b p_b). A mechanism claiming eps-DP must have
    |log(p_a/p_b)| <= eps on every event; an interval whose lower end exceeds eps refutes it."""
    if min(k_a, k_b) < 1:
        raise ValueError("both counts must be >= 1 to estimate a log ratio")
    p_a, p_b = k_a / n_a, k_b / n_b
    estimate = math.log(p_a / p_b)
    se = math.sqrt((1 - p_a) / (n_a * p_a) + (1 - p_b) / (n_b * p_b))
    return estimate, estimate - z * se, estimate + z * se
