"""The guessing-game bounds of `ragleak verify` (verify/one_run.py): published and independently
computed values, properties, validity on known eps-DP pairs, and the end-to-end verdicts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from ragleak.verify import Verdict, VerifySettings, verify_defense
from ragleak.verify.one_run import (canary_count, fdp_eps, gdp_delta, gdp_eps, guess_bound, guess_ceiling, play,
                                    steinke_eps, steinke_p_value)
from ragleak.verify.result import EventResult

relaxed = settings(deadline=None, max_examples=40)
games = st.integers(1, 300).flatmap(lambda r: st.tuples(st.integers(r, 3 * r), st.just(r), st.integers(0, r)))


@pytest.mark.parametrize("m, r, v, delta, published", [
    (1000, 100, 75, 1e-4, 0.673),  # Steinke, Nasr & Jagielski 2023, Appendix D's example
    (100000, 1510, 1439, 1e-5, 2.675),  # ... their Section 7 (CIFAR-10, printed truncated)
])
def test_steinke_bound_matches_the_papers_numbers(m, r, v, delta, published):
    assert steinke_eps(m, r, v, delta, 0.05) == pytest.approx(published, abs=1.5e-3)


def test_pure_steinke_bound_is_the_binomial_tail_at_level_a():
    # independently: the eps where scipy's P[Binomial(r, q) >= v] crosses a
    m, r, v, a = 500, 200, 150, 0.01
    eps = steinke_eps(m, r, v, 0.0, a)
    q = 1 / (1 + math.exp(-eps))
    assert binom.sf(v - 1, r, q) == pytest.approx(a, rel=1e-6)
    assert steinke_p_value(m, r, v, eps - 0.01, 0.0) < a < steinke_p_value(m, r, v, eps + 0.01, 0.0)


@given(games, st.sampled_from([0.0, 1e-6, 1e-3]))
@relaxed
def test_more_right_guesses_never_lower_either_bound(g, delta):
    m, r, v = g
    if v < r:
        for bound in (steinke_eps, fdp_eps):
            assert bound(m, r, v + 1, delta, 0.05) >= bound(m, r, v, delta, 0.05) - 2e-3


@given(games)
@relaxed
def test_guesses_at_chance_show_nothing(g):
    m, r, v = g
    v = min(v, r // 2)
    assert steinke_eps(m, r, v, 1e-6, 0.05) == 0.0 and fdp_eps(m, r, v, 1e-6, 0.05) == 0.0


@given(games)
@relaxed
def test_f_dp_bound_of_a_pure_claim_agrees_with_steinke(g):
    # for f_{eps,0} randomised response is the worst case of both analyses: they must agree
    m, r, v = g
    assert fdp_eps(m, r, v, 0.0, 0.05) == pytest.approx(steinke_eps(m, r, v, 0.0, 0.05), abs=0.05)


def test_f_dp_bound_is_tighter_when_delta_weighs():
    # the delta term of Steinke et al. grows with m delta; the f_{eps,delta} analysis does not pay it
    assert fdp_eps(100000, 1510, 1439, 1e-5, 0.05) > steinke_eps(100000, 1510, 1439, 1e-5, 0.05) + 0.05


def _exceedances(draw, eps: float, a: float, reps: int) -> int:
    """How often the guessing bound from fresh draws of an eps-DP pair exceeds eps."""
    rng = np.random.default_rng(7)
    out = 0
    for i in range(reps):
        held, sel = draw(rng, 150), draw(rng, 60)
        out += guess_bound(*held, 1e-6, a, selection=sel, seed=i, gdp=False).eps_lb > eps
    return out


def _tolerance(reps: int, a: float) -> int:
    return int(binom.ppf(0.999, reps, a))


def test_bound_exceeds_the_true_eps_of_randomised_response_at_most_a_of_the_time():
    # randomised response is the tightest eps-DP pair: the one a too-loose bound fails on
    eps, a, reps = 1.0, 0.2, 150
    p = math.exp(eps) / (1 + math.exp(eps))

    def draw(rng, n):
        return (rng.random(n) < p).astype(float), (rng.random(n) < 1 - p).astype(float)

    assert _exceedances(draw, eps, a, reps) <= _tolerance(reps, a)


def test_bound_exceeds_the_true_eps_of_a_laplace_pair_at_most_a_of_the_time():
    # Laplace noise of scale 1 on a score that moves by 0.5 between the worlds: eps 0.5 exactly
    eps, a, reps = 0.5, 0.2, 150

    def draw(rng, n):
        return rng.laplace(0.5, 1.0, n), rng.laplace(0.0, 1.0, n)

    assert _exceedances(draw, eps, a, reps) <= _tolerance(reps, a)


@pytest.mark.parametrize("m, r, delta", [(300, 300, 0.0), (2000, 300, 1e-4)])
def test_both_tests_exceed_the_true_eps_of_randomised_response_at_most_a_of_the_time(m, r, delta):
    # every guess on randomised response is right with probability exactly e^eps / (1 + e^eps)
    eps, a, reps = 1.0, 0.2, 100
    rng = np.random.default_rng(11)
    right = rng.binomial(r, 1 / (1 + math.exp(-eps)), size=reps)
    for bound in (steinke_eps, fdp_eps):
        assert sum(bound(m, r, int(v), delta, a) > eps for v in right) <= _tolerance(reps, a)


def test_a_clear_gap_is_shown_and_the_fixed_counts_become_fair_coins():
    rng = np.random.default_rng(3)
    world, neighbour = rng.laplace(3.0, 1.0, 400), rng.laplace(0.0, 1.0, 400)
    got = guess_bound(world, neighbour, 1e-6, 0.05, selection=(rng.laplace(3.0, 1.0, 150),
                                                                rng.laplace(0.0, 1.0, 150)), seed=1)
    assert 1.0 < got.eps_lb <= 3.0 and got.estimator in ("steinke", "f-dp") and got.chosen_on == "selection"
    assert got.m == canary_count(400, 400) and 700 < got.m < 800 and got.v <= got.r <= got.m
    assert got.eps_lb <= guess_ceiling(400, 400, 1e-6, 0.05)
    # no selection trials: a fixed grid shares the level (Bonferroni) and still shows the gap
    assert guess_bound(world, neighbour, 1e-6, 0.05, seed=1).eps_lb > 1.0
    # each canary takes a held-out trial of the world its coin names, never more than a world has
    coins, scores = play(world, neighbour, np.random.default_rng(0))
    assert (coins > 0).sum() <= 400 and (coins < 0).sum() <= 400 and set(scores) <= set(world) | set(neighbour)
    assert all(s in set(world) for s in scores[coins > 0])


def test_gaussian_dp_conversion_round_trips_and_stays_out_of_the_bound():
    assert gdp_delta(1.0, gdp_eps(1.0, 1e-5)) == pytest.approx(1e-5, rel=1e-3)
    rng = np.random.default_rng(1)
    # a Laplace pair of true eps 1: its mu-GDP bound converted to eps reads above 1 (the mechanism
    # is not Gaussian-shaped), which is why eps_lb never takes it
    got = guess_bound(rng.laplace(1.0, 1.0, 7000), rng.laplace(0.0, 1.0, 7000), 1e-6, 0.05,
                      selection=(rng.laplace(1.0, 1.0, 3000), rng.laplace(0.0, 1.0, 3000)))
    assert got.mu_lb > 0 and got.eps_from_mu > 1.0 >= got.eps_lb > 0.5


def test_an_old_report_event_reads_as_clopper_pearson():
    e = EventResult.model_validate(dict(event="x", direction="D over D'", k_world=1, k_neighbour=0, n_world=2,
                                        n_neighbour=2, p_world=0.5, p_neighbour=0.0, eps_lb=0.1, look=1))
    assert e.estimator == "clopper-pearson"


COPIES = Path(__file__).with_name("broken_copies.py")


def test_half_noise_still_reads_broken_and_the_honest_selection_does_not():
    from ragleak.defenses.loader import defense_class

    def budget(trials: int) -> VerifySettings:
        return VerifySettings(trials=trials, adjacencies="card", stresses=("contested",), colluders=())

    broken = verify_defense(defense_class(f"{COPIES}:HalfNoise"), settings=budget(400))
    assert broken.verdict is Verdict.broken
    (s,) = broken.scenarios
    worst = max(s.events, key=lambda e: e.eps_lb)
    assert worst.eps_lb > s.claim.eps
    # the contested pair's events are certified by the game too, on both worlds' held-out trials
    assert any(e.estimator.startswith("guessing") for e in s.events)
    honest = verify_defense("dp-retrieval", settings=budget(200))
    assert honest.verdict in (Verdict.holds, Verdict.inconclusive)
    assert all(e.eps_lb <= 1.0 for sc in honest.scenarios for e in sc.events)
