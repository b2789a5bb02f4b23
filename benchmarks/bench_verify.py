"""`ragleak verify`: wall time per DP defense, and the trials needed to detect a 2x over-claim
with 95% power, as JSON on stdout.

Wall time: ``verify_defense`` on every registered DP defense in its default configuration, every
stress and adjacency, ``--trials`` per world (the seconds scale linearly in the trials).

Power (method: exact binomial power of the Clopper-Pearson test, no simulation noise). A card
that claims eps for a mechanism whose true loss is 2 eps is caught when some event's lower
bound exceeds eps. For an event with true probabilities p on D and q on D', the trials per world
needed for 95% power are the smallest n with

    P[ event_lower_bound(K, n, K', n) > eps ] >= 0.95,   K ~ Bin(n, p), K' ~ Bin(n, q),

computed exactly: for each k the bound falls as k' grows, so the set of k' that detect is
{0..c(k)} (c found by bisection), and the power is sum_k P[K = k] P[K' <= c(k)]. The Bonferroni
family is the default run's (``--events``). Two events are reported:

* ``ideal``: the most detectable event a pure 2 eps mechanism can have at p = 1/2 on D,
  q = e^{-2 eps} / 2 on D' (randomised-response-like), for eps in 0.5, 1, 2;
* ``laplace-selection``: the single-document event of dp-retrieval's real code path with half
  its stated noise (true eps 2 at a claimed 1), p and q measured by ``verify`` with
  ``--measure-trials`` trials per world (their sampling error is stated).

    .venv/bin/python benchmarks/bench_verify.py [--trials N] [--measure-trials N] [--events E]
        [--defenses a,b] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

from scipy.stats import binom


def _mass(n: int, p: float) -> tuple[int, int]:
    """The counts of Bin(n, p) outside which less than 1e-12 of the mass lies."""
    return int(binom.ppf(1e-12, n, p)), int(binom.isf(1e-12, n, p))


def power(n: int, p: float, q: float, eps: float, events: int, alpha: float = 0.05) -> float:
    """Exact probability (to 1e-11) that the Clopper-Pearson test flags a claim of ``eps`` at n
    trials per world, for an event of probability p on D and q < p on D'."""
    from ragleak.verify.result import event_lower_bound

    def detects(k: int, k2: int) -> bool:
        return event_lower_bound(k, n, k2, n, delta=0.0, alpha=alpha, events=events) > eps

    k_lo, k_hi = _mass(n, p)
    j_lo, j_hi = _mass(n, q)
    total = 0.0
    for k in range(k_lo, k_hi + 1):
        if not detects(k, j_lo):
            continue  # not even the fewest plausible k' detect (the bound falls as k' grows)
        if detects(k, j_hi):
            total += binom.pmf(k, n, p)
            continue
        lo, hi = j_lo, j_hi - 1  # the largest k' that still detects
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if detects(k, mid) else (lo, mid - 1)
        total += binom.pmf(k, n, p) * binom.cdf(lo, n, q)
    return float(total)


def trials_for_power(p: float, q: float, eps: float, events: int, target: float = 0.95,
                     limit: int = 100_000) -> int | None:
    """The smallest n (to within 2%) with power >= target; None when ``limit`` trials fall short."""
    lo, hi = 1, 64
    while power(hi, p, q, eps, events) < target:
        if hi >= limit:
            return None
        lo, hi = hi, hi * 2
    while hi - lo > max(1, lo // 50):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power(mid, p, q, eps, events) >= target else (mid, hi)
    return hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--defenses", default=None, help="comma-separated; default: every registered DP defense")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--measure-trials", type=int, default=4000)
    ap.add_argument("--events", type=int, default=7, help="Bonferroni family: dp-retrieval's default run has 7 events")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from ragleak.accounting.bounds import log_ratio_interval
    from ragleak.defenses import DEFENSES, make_defense
    from ragleak.defenses.dp_retrieval import DPRetrieval
    from ragleak.verify import VerifySettings, verify_defense

    names = ([d.strip() for d in args.defenses.split(",") if d.strip()] if args.defenses else
             [n for n in DEFENSES.names() if make_defense(n).guarantee().is_formal])
    report: dict = {"machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
                    "args": {k: str(v) for k, v in vars(args).items()}, "wall_time": {}, "power": {}}
    for name in names:
        t0 = time.perf_counter()
        result = verify_defense(name, settings=VerifySettings(trials=args.trials))
        seconds = time.perf_counter() - t0
        ran = [s for s in result.scenarios if s.applicable]
        report["wall_time"][name] = {
            "seconds": round(seconds, 2), "scenarios_run": len(ran), "trials_per_world": args.trials,
            "ms_per_trial": round(1000 * seconds / max(1, 2 * args.trials * len(ran)), 2),
            "max_eps_lb": round(result.max_eps_lb, 3), "violated": result.violated, "violations": result.violations}
        print(f"{name}: {seconds:.1f}s", file=sys.stderr, flush=True)

    method = ("exact binomial power of the one-sided Clopper-Pearson test (bounds.eps_lower_bound, both directions, "
              f"Bonferroni over {args.events} events, alpha 0.05); smallest n with power >= 0.95, to within 2%")
    report["power"]["method"] = method
    ideal = {}
    for eps in (0.5, 1.0, 2.0):
        p, q = 0.5, 0.5 * math.exp(-2 * eps)
        ideal[f"eps={eps:g}"] = {"p_world": p, "p_neighbour": q, "true_eps": 2 * eps,
                                 "trials_per_world": trials_for_power(p, q, eps, args.events)}
    report["power"]["ideal"] = ideal

    class HalfNoise(DPRetrieval):
        name = "dp-retrieval-half-noise"

        @property
        def sensitivity(self) -> float:
            return super().sensitivity / 2

    measured = verify_defense(HalfNoise, settings=VerifySettings(trials=args.measure_trials, stresses=("single",),
                                                                 adjacencies="card"))
    event = measured.scenarios[0].events[0]
    p, q = event.p_world, event.p_neighbour
    estimate, _, high = log_ratio_interval(event.k_world, event.n_world, event.k_neighbour, event.n_neighbour, z=1.0)
    report["power"]["laplace-selection"] = {
        "event": event.event, "p_world": p, "p_neighbour": q, "measured_trials_per_world": event.n_world,
        "log_ratio": estimate, "log_ratio_se": high - estimate,
        "claimed_eps": 1.0, "true_eps": 2.0, "trials_per_world": trials_for_power(p, q, 1.0, args.events)}
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
