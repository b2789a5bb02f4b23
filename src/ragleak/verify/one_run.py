"""Guessing-game lower bounds on epsilon: the one-run / f-DP auditing estimators.

The game (Steinke, Nasr & Jagielski 2023, arXiv 2305.08846): m canaries, each with a hidden fair
coin S_i in {+1, -1} saying which world (D or D') its output came from; an auditor sees the outputs
and guesses the coin of r of them (the most extreme scores: "D" on the k_plus highest, "D'" on the
k_minus lowest, abstaining on the rest); v guesses are right. If every canary's output is
(eps, delta)-DP in its own coin, v is (nearly) dominated by Binomial(r, e^eps / (1 + e^eps)), so a
large v rejects eps. Two tests of that null are implemented:

* ``steinke_p_value``: their Theorem 3.1 (pure DP: P[Binomial(r, q) >= v]) and Corollary 5.4 (the
  delta term, 2 m delta max_i P[v - i <= Binomial(r, q) < v] / i, as in their Appendix D);
* ``fdp_rejects``: Mahloujifar, Melis & Chaudhuri 2024 (arXiv 2410.22235): the same game analysed
  through a whole trade-off function f (their recursion over the number of correct guesses, for
  two worlds), here for f = f_{eps,delta} (exactly the (eps, delta) claim) and for mu-GDP.

From trials to a game. ``verify`` runs independent trials with FIXED counts per world, not a coin
per trial, and with fixed counts the Binomial bound is false: with one trial per world, guessing
both right means ordering the two correctly, probability up to e^{2 eps} / (1 + e^{2 eps}), above
q^2. So the canaries are built as the theorem needs them: m fair coins are drawn from an auditor's
generator independent of the trials, and canary i takes the next unused held-out trial of world
S_i. In a thought experiment with unlimited i.i.d. trials per world this is exactly a mechanism
that is (eps, delta)-DP in each coin (only canary i's own independent trial depends on S_i), so
the theorems apply there; our run is that experiment conditioned on the coins not asking a world
for more trials than it has (an event of the coins alone: when it happens the coins are drawn
again). m is the largest count whose coins run out with probability <= ``RUN_OUT``, so the
conditioning raises any rejection probability by at most 1 / (1 - RUN_OUT): the test runs at
a (1 - RUN_OUT) and the bound holds at level a.

The number of guesses is not chosen on the trials it certifies: ``guess_bound`` picks (k_plus,
k_minus) as shares of m and which test to use on the selection trials (the same game played on
them, over ``FRACTIONS`` and the ends of tied-score blocks), moved in by two standard errors so a
block's end does not overshoot on the held-out trials; with no selection trials it takes the
fixed grid ``FRACTIONS_PAIRS`` and both tests and splits the level over them (Bonferroni). The
counts are fixed before the held-out scores are seen, as both theorems state them.

A mu-GDP lower bound is computed too (``GuessResult.mu_lb``, with its (eps, delta) conversion,
Dong, Roth & Su 2019, arXiv 1905.02383), for information only: rejecting "mu-GDP" does not reject
"(eps, delta)-DP" for a mechanism that is not Gaussian-shaped (Laplace selection is not), so it
never enters ``eps_lb``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

#: the chance that a world's held-out trials run out while drawing the canaries' coins
RUN_OUT = 0.01
#: share of the canaries guessed at each end (k_plus / m and k_minus / m) tried
FRACTIONS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
#: the Bonferroni grid (no selection trials): k_plus / m and k_minus / m
FRACTIONS_PAIRS = ((0.05, 0.05), (0.2, 0.2), (0.5, 0.5), (0.1, 0.0), (0.0, 0.1))
#: coin draws before giving up (each runs out with probability <= RUN_OUT)
_REDRAWS = 64
#: the delta term of Steinke et al.'s p-value is summed exactly over this many terms
_WINDOW = 4096
#: the grids the bounds are searched over (refined by bisection after)
_EPS_HI, _MU_HI = 30.0, 20.0


@dataclass(frozen=True)
class GuessResult:
    """A guessing-game bound: ``eps_lb`` (0: nothing shown) from v of r guesses right on m
    canaries; ``estimator``: "steinke" or "f-dp" (which test gave it), "" when none ran."""

    eps_lb: float
    estimator: str
    r: int
    v: int
    m: int
    k_plus: int = 0
    k_minus: int = 0
    a: float = 0.0
    chosen_on: str = ""
    #: mu-GDP lower bound at level a and its eps at the claim's delta: information only (see module)
    mu_lb: float = 0.0
    eps_from_mu: float = 0.0


# ---------------------------------------------------------------------------- the two tests


def _q(eps):
    return 1.0 / (1.0 + np.exp(-np.asarray(eps, dtype=float)))


def steinke_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """P-value of v of r guesses right on m canaries under (eps, delta)-DP: Steinke, Nasr &
    Jagielski 2023, Theorem 3.1 (pure) plus the delta term of their Corollary 5.4."""
    from scipy.special import bdtr, bdtrc  # the binomial cdf and tail as plain ufuncs (fast)

    _check(m, r, v)
    if v == 0:
        return 1.0
    q = float(_q(eps))
    p = float(bdtrc(v - 1, r, q))  # P[B > v - 1]
    if delta > 0:
        # P[v - i <= B < v] = cdf(v - 1) - cdf(v - 1 - i) for i = 1..I exactly (cdf(-1) = 0); past
        # I each term is at most cdf(v - 1) / (I + 1), which stands in for them (a larger p-value)
        first = max(0, v - _WINDOW)
        ks = np.arange(first - 1, v)
        cdf = np.where(ks < 0, 0.0, bdtr(np.maximum(ks, 0), r, q))
        window = cdf[-1] - cdf[-2::-1]
        term = float(np.max(window / np.arange(1, len(window) + 1)))
        if first > 0:
            term = max(term, float(cdf[-1]) / (len(window) + 1))
        p += 2 * m * delta * term
    return min(1.0, p)


def steinke_eps(m: int, r: int, v: int, delta: float, a: float) -> float:
    """The largest eps whose p-value is <= a (0 when even eps = 0 is not rejected). Without delta
    it is closed-form: P[Binomial(r, q) >= v] grows with q and equals a at the one-sided
    Clopper-Pearson lower bound on q; the delta term only raises the p-value, so that value
    brackets the bisection."""
    _check(m, r, v)
    pure = _pure_eps(np.array([r]), np.array([v]), a)[0]
    if delta <= 0 or pure <= 0:
        return float(pure)
    return _largest_rejected(lambda e: steinke_p_value(m, r, v, e, delta) <= a, float(pure))


def _pure_eps(r: np.ndarray, v: np.ndarray, a: float) -> np.ndarray:
    from scipy.stats import beta

    q = np.where(v > 0, beta.ppf(a, np.maximum(v, 1), r - v + 1), 0.0)
    with np.errstate(divide="ignore"):
        return np.where(q > 0.5, np.log(q) - np.log1p(-q), 0.0)


def inverse_eps_delta(eps: np.ndarray, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    """x -> f(1 - x) for f = f_{eps,delta} (one per eps): the least probability one world can give
    an event the other gives probability x (f(t) = max{0, 1 - delta - e^eps t, e^-eps (1 - delta - t)})."""
    up, down = np.exp(np.minimum(eps, 700.0)), np.exp(-eps)
    base_up, base_down = 1 - delta - up, -down * delta
    return lambda x: np.maximum(np.maximum(base_up + up * x, base_down + down * x), 0.0)


def inverse_gdp(mu: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """x -> f(1 - x) for mu-GDP (one per mu), f(t) = Phi(Phi^-1(1 - t) - mu)."""
    from scipy.special import ndtr, ndtri

    return lambda x: ndtr(ndtri(np.clip(x, 0.0, 1.0)) - mu)


def fdp_rejects(inverse: Callable[[np.ndarray], np.ndarray], m: int, r: int, v: int, a: float,
                size: int = 1) -> np.ndarray:
    """Whether v of r guesses right on m canaries rejects "f-DP in each canary" at level a, for
    ``size`` trade-off functions at once (``inverse`` maps an array of that size): Mahloujifar,
    Melis & Chaudhuri 2024's recursion for two worlds. Start from the mass a r / m split between
    right (v / r) and wrong guesses; walk the number of right guesses down from v, each step
    raising the wrong-guess mass to what f forces for the right-guess mass and the right-guess
    mass by i / (r - i) of that rise; the null is rejected when the two masses together exceed
    the share of canaries guessed, r / m."""
    _check(m, r, v)
    if v == 0:
        return np.zeros(size, dtype=bool)
    tau, limit = a * r / m, r / m
    right, wrong = np.full(size, tau * v / r), np.full(size, tau * (r - v) / r)
    # both masses only grow down the walk, so once past the limit a verdict is settled: capping
    # the right-guess mass at 2 (> limit) keeps every verdict and f's argument a probability
    for i in range(v - 1, -1, -1):
        raised = np.maximum(wrong, inverse(np.minimum(right, 1.0)))
        right += (i / (r - i)) * (raised - wrong)
        np.minimum(right, 2.0, out=right)
        wrong = raised
        if i % 64 == 0 and (right + wrong > limit).all():
            break
    return right + wrong > limit


def _largest_on_grid(make: Callable[[np.ndarray], Callable[[np.ndarray], np.ndarray]], m: int, r: int, v: int,
                     a: float, hi: float) -> float:
    """The largest parameter (eps or mu) in [0, hi] whose f is rejected, to ~hi / 8000: rejection
    is monotone (a smaller parameter gives a larger f, which is rejected whenever a larger one
    is), so two passes over a grid, the second inside the first's bracket, keep the low end."""
    lo = 0.0
    for points in (97, 81):
        grid = np.linspace(lo, hi, points)
        rejected = fdp_rejects(make(grid), m, r, v, a, size=len(grid))
        if not rejected.any():
            return lo
        last = int(np.flatnonzero(rejected).max())
        if last == len(grid) - 1:
            return float(grid[-1])
        lo, hi = float(grid[last]), float(grid[last + 1])
    return lo


def fdp_eps(m: int, r: int, v: int, delta: float, a: float) -> float:
    """The largest eps for which f_{eps,delta}-DP is rejected (0: none)."""
    return _largest_on_grid(lambda e: inverse_eps_delta(e, delta), m, r, v, a, _EPS_HI)


def gdp_mu(m: int, r: int, v: int, a: float) -> float:
    """The largest mu for which mu-GDP is rejected (0: none)."""
    return _largest_on_grid(inverse_gdp, m, r, v, a, _MU_HI)


def gdp_delta(mu: float, eps: float) -> float:
    """delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong, Roth & Su 2019,
    Corollary 2.13)."""
    from scipy.stats import norm

    if mu <= 0:
        return 0.0
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def gdp_eps(mu: float, delta: float) -> float:
    """The eps at which mu-GDP meets delta (the smallest eps with delta(eps) <= delta)."""
    if mu <= 0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while gdp_delta(mu, hi) > delta:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gdp_delta(mu, mid) > delta else (lo, mid)
    return hi


def _largest_rejected(rejects: Callable[[float], bool], hi: float) -> float:
    """The largest x in [0, hi] with rejects(x), for a rejection that holds on [0, x*) only
    (both tests reject a smaller eps whenever they reject a larger one); bisection, low end kept."""
    if not rejects(0.0):
        return 0.0
    if rejects(hi):
        return hi
    lo = 0.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return lo


def _check(m: int, r: int, v: int) -> None:
    if not 0 <= v <= r <= m or r < 1:
        raise ValueError(f"need 0 <= v <= r <= m and r >= 1, got m={m}, r={r}, v={v}")


# ---------------------------------------------------------------------------- trials -> game


def canary_count(n_world: int, n_neighbour: int, run_out: float = RUN_OUT) -> int:
    """The most canaries whose fair coins ask more trials than a world has with probability
    <= run_out (union bound over the two worlds)."""
    from scipy.special import bdtrc

    def fails(m: int) -> float:
        return float(bdtrc(n_world, m, 0.5) + bdtrc(n_neighbour, m, 0.5))

    lo, hi = 0, n_world + n_neighbour
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fails(mid) <= run_out else (lo, mid - 1)
    return lo


def play(world: Sequence[float], neighbour: Sequence[float],
         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    """The canaries: (coins, scores) ordered by score, highest first (ties in a random order);
    coins that ask a world for more trials than it has are drawn again (see the module). None:
    too few trials for a canary."""
    m = canary_count(len(world), len(neighbour))
    if m < 1:
        return None
    for _ in range(_REDRAWS):
        coins = rng.integers(0, 2, size=m) * 2 - 1
        heads = int((coins > 0).sum())
        if heads <= len(world) and m - heads <= len(neighbour):
            break
    else:  # probability <= RUN_OUT ** _REDRAWS
        return None
    scores = np.empty(m)
    scores[coins > 0] = np.asarray(world, dtype=float)[:heads]
    scores[coins < 0] = np.asarray(neighbour, dtype=float)[: m - heads]
    order = np.lexsort((rng.random(m), -scores))
    return coins[order], scores[order]


def _counts(coins: np.ndarray, k_plus: int, k_minus: int) -> tuple[int, int]:
    """(r, v): guess D on the k_plus highest scores and D' on the k_minus lowest."""
    m = len(coins)
    right = int((coins[:k_plus] > 0).sum()) + (int((coins[m - k_minus:] < 0).sum()) if k_minus else 0)
    return k_plus + k_minus, right


#: at most this many tie boundaries at each end of a discrete score join the selection grid
_BOUNDARIES = 20


def _grid(scores: np.ndarray) -> list[tuple[int, int]]:
    """(k_plus, k_minus) candidates for canaries sorted by score, highest first: the FRACTIONS of
    m and, for a score with few values, the ends of its tie blocks (guessing into a block of
    ties is a coin flip among them)."""
    m = len(scores)
    plus = {int(round(f * m)) for f in FRACTIONS}
    minus = set(plus)
    edges = np.flatnonzero(np.diff(scores) != 0) + 1  # k such that scores[k - 1] > scores[k]
    plus.update(int(k) for k in edges[:_BOUNDARIES])
    minus.update(int(m - k) for k in edges[::-1][:_BOUNDARIES])
    return [(p, n) for p in sorted(plus) for n in sorted(minus) if 0 < p + n <= m]


_TESTS: dict[str, Callable[[int, int, int, float, float], float]] = {"steinke": steinke_eps, "f-dp": fdp_eps}


def guess_bound(scores_world: Sequence[float], scores_neighbour: Sequence[float], delta: float, a: float,
                selection: tuple[Sequence[float], Sequence[float]] | None = None, seed: int = 0,
                gdp: bool = True) -> GuessResult:
    """The guessing-game eps lower bound at level a from held-out trials' scores (larger: more
    like D; the statistic chosen on other trials). ``selection``: the selection trials' scores,
    on which the guesses and the test are chosen (then a is spent on one test); without them
    every grid point and both tests share a (Bonferroni)."""
    if not 0 < a < 1:
        raise ValueError("a must be in (0, 1)")
    rng = np.random.default_rng(seed)
    held = play(scores_world, scores_neighbour, rng)
    if held is None:
        return GuessResult(eps_lb=0.0, estimator="", r=0, v=0, m=0, a=a)
    coins = held[0]
    m = len(coins)
    if selection is not None:
        chosen, how = _choose(selection, delta, a, rng), "selection"
        level = a * (1 - RUN_OUT)
        if chosen is None:
            return GuessResult(eps_lb=0.0, estimator="", r=0, v=0, m=m, a=a, chosen_on=how)
        fractions, tests = [_shrink(chosen[0], len(selection[0]) + len(selection[1]), m)], [chosen[1]]
    else:
        fractions, tests, how = list(FRACTIONS_PAIRS), list(_TESTS), "bonferroni"
        level = a * (1 - RUN_OUT) / (len(fractions) * len(tests))
    best: GuessResult | None = None
    for fp, fn in fractions:
        kp, kn = int(round(fp * m)), int(round(fn * m))
        if not 0 < kp + kn <= m:
            continue
        r, v = _counts(coins, kp, kn)
        for name in tests:
            eps = _TESTS[name](m, r, v, delta, level)
            if best is None or eps > best.eps_lb:
                best = GuessResult(eps_lb=eps, estimator=name, r=r, v=v, m=m, k_plus=kp, k_minus=kn, a=a,
                                   chosen_on=how)
    if best is None:
        return GuessResult(eps_lb=0.0, estimator="", r=0, v=0, m=m, a=a, chosen_on=how)
    if gdp and best.r:
        mu = gdp_mu(m, best.r, best.v, level)
        best = replace(best, mu_lb=mu, eps_from_mu=gdp_eps(mu, delta))
    return best


def _shrink(fractions: tuple[float, float], n_selection: int, m: int) -> tuple[float, float]:
    """The selection's guess shares moved in by two standard errors of a share's sampling error
    on both sets of trials: a share that ends a block of tied scores on the selection trials
    would otherwise overshoot the block on the held-out ones about half the time, and guessing
    past it is a coin flip (sizes only: the choice stays independent of the held-out trials)."""
    def pull(f: float) -> float:
        return max(0.0, f - 2.0 * math.sqrt(f * (1 - f) * (1 / max(1, n_selection) + 1 / m))) if f > 0 else 0.0

    return pull(fractions[0]), pull(fractions[1])


def _choose(selection: tuple[Sequence[float], Sequence[float]], delta: float, a: float,
            rng: np.random.Generator) -> tuple[tuple[float, float], str] | None:
    """The (k_plus / m, k_minus / m) and the test with the largest bound on the selection trials."""
    played = play(selection[0], selection[1], rng)
    if played is None:
        return None
    coins, scores = played
    m = len(coins)
    grid = _grid(scores)
    if not grid:
        return None
    top = np.concatenate(([0], np.cumsum(coins > 0)))  # right guesses of D among the k highest
    bottom = np.concatenate(([0], np.cumsum(coins[::-1] < 0)))  # ... of D' among the k lowest
    kp, kn = np.array(grid).T
    counts = np.stack([kp + kn, top[kp] + bottom[kn]], axis=1)
    # rank the grid by the pure-DP bound (closed form); the costlier tests run on the leader only
    lead = int(np.argmax(_pure_eps(counts[:, 0], counts[:, 1], a)))
    (kp, kn), (r, v) = grid[lead], counts[lead]
    eps, name = _better_test(m, int(r), int(v), delta, a)
    best = (eps, (kp / m, kn / m), name)
    return None if best is None or best[0] <= 0 else (best[1], best[2])


def _better_test(m: int, r: int, v: int, delta: float, a: float) -> tuple[float, str]:
    """(bound, test) of the test with the larger bound. Steinke et al.'s delta term only lowers
    their pure-DP bound, so when the f-DP bound reaches that the costly delta sum is skipped."""
    fdp = fdp_eps(m, r, v, delta, a)
    if delta > 0 and fdp >= _pure_eps(np.array([r]), np.array([v]), a)[0]:
        return fdp, "f-dp"
    steinke = steinke_eps(m, r, v, delta, a)
    return (steinke, "steinke") if steinke >= fdp else (fdp, "f-dp")


@lru_cache(maxsize=256)
def guess_ceiling(n_world: int, n_neighbour: int, delta: float, a: float) -> float:
    """The largest bound the game can give on these trials: every canary guessed, all right."""
    m = canary_count(n_world, n_neighbour)
    return _better_test(m, m, m, delta, a * (1 - RUN_OUT))[0] if m else 0.0
