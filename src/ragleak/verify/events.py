"""Likelihood-ratio events chosen on one part of the trials and certified on the rest.

A trial's observation is a tuple with one entry per query (what the claim's boundary shows for
that query). The events are not a fixed list: on the *selection* trials (the first
``SELECT_SHARE`` of each world's trials) two families are ranked by their empirical likelihood
ratio p(D)/p(D') (and p(D')/p(D) for the other direction):

* value sets: the observation values in decreasing order of smoothed ratio; every prefix is an
  event ("the observation is one of these values");
* score thresholds: each query's observation gets the selection trials' smoothed log ratio of
  that value (pooled over queries), a trial's score is their sum (the Neyman-Pearson statistic
  of T independent-looking queries), and every "score >= s" is an event.

Both families run on the observations as recorded and on a coarse view of them (per query, how
many passages of each watched document, positions dropped), so an effect spread over many exact
values (two passages of one document, at whichever positions) is one value there.

Of all of them, per direction, the event with the largest Clopper-Pearson lower bound on the
selection trials is kept; only those (one per direction) are *certified* on the held-out trials,
which played no part in choosing them, so the Bonferroni family is just the certified events.
For an event S certified in direction D over D' at level a, with p_lo the one-sided lower bound
on p_D(S) and q_hi the upper bound on p_D'(S) (each at a/2): a mechanism that is (eps, delta)-DP
has p_D(S) <= e^eps p_D'(S) + delta, so with probability >= 1 - a,
eps >= log((p_lo - delta) / q_hi).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Hashable, Sequence

from ragleak.accounting.bounds import cp_lower, cp_upper

SELECT_SHARE = 0.3
#: value-set prefixes and score thresholds examined per family and direction (selection cost only)
MAX_CANDIDATES = 200
Trial = tuple[Hashable, ...]


@dataclass(frozen=True)
class Event:
    """An event chosen on the selection trials: a set of observation values, or a threshold on
    the per-query log-ratio score; ``forward``: more likely on D than on D'."""

    forward: bool
    values: frozenset | None = None
    table: tuple[tuple[Hashable, float], ...] = ()
    threshold: float = 0.0
    label: str = ""
    coarse: bool = False

    def __call__(self, trial: Trial) -> bool:
        if self.coarse:
            trial = coarse(trial)
        if self.values is not None:
            return trial in self.values
        table = dict(self.table)
        return sum(table.get(o, 0.0) for o in trial) >= self.threshold


def eps_bound(k_hit: int, n_hit: int, k_other: int, n_other: int, delta: float, a: float) -> float:
    """log((p_lo - delta) / q_hi): the eps lower bound at level a from an event seen k_hit of n_hit
    times on the world it favours and k_other of n_other on the other (0 when nothing is shown)."""
    p_lo = cp_lower(k_hit, n_hit, a / 2) - delta
    q_hi = cp_upper(k_other, n_other, a / 2)
    return 0.0 if p_lo <= 0 or p_lo <= q_hi else math.log(p_lo / q_hi)


def ceiling(n_certify: int, delta: float, a: float) -> float:
    """The bound of a perfect event (every held-out trial on one world, none on the other)."""
    return eps_bound(n_certify, n_certify, 0, n_certify, delta, a) if n_certify > 0 else 0.0


def trials_to_reach(eps: float, delta: float, a: float, limit: float = 1e300) -> float:
    """Trials per world (selection share included) whose ceiling exceeds ``eps``: the cost of
    making a claim of ``eps`` testable at all (a perfect event, solved in closed form for large
    n: q_hi ~ -log(a/2) / m)."""
    m = -math.log(a / 2) * math.exp(eps) * (1 + 1e-9)
    if m > 1e7:
        return min(limit, m / (1 - SELECT_SHARE))
    m = max(1, int(m))
    while ceiling(m, delta, a) <= eps:
        m = int(m * 1.05) + 1
    return math.ceil(m / (1 - SELECT_SHARE))


def split(n: int) -> int:
    """How many of n trials per world select events (the rest certify)."""
    return max(1, int(n * SELECT_SHARE)) if n > 1 else 0


def _smoothed_log_ratio(a: int, na: int, b: int, nb: int) -> float:
    return math.log((a + 0.5) / (na + 1)) - math.log((b + 0.5) / (nb + 1))


@dataclass(frozen=True)
class Target:
    """What the chosen events will be certified on: ``n_certify`` held-out trials per world at
    level ``a`` per event. Candidates are ranked by the bound they would get there if their
    selection-trial rates held (a ranking, not a certificate): at a strict level and a large
    held-out set this prefers an event with more mass at a slightly lower ratio, whose bound is
    far tighter, to a small subset that looked best by chance on the selection trials."""

    n_certify: int = 0
    a: float = 0.05

    def bound(self, k_hit: int, n_hit: int, k_other: int, n_other: int, delta: float) -> float:
        m = self.n_certify
        if m <= 0:
            return eps_bound(k_hit, n_hit, k_other, n_other, delta, self.a)
        # the selection trials' rates taken at their own bounds at the same level: the ranking's
        # winner's curse (a subset of values that looks best by chance) is held to its evidence
        # (measured on Laplace top-5 at 1.25x its claim, 10,000 trials: the catch rate 0.61 ->
        # 0.89 over 100 simulated selections, against ranking at level 0.05 on the selection trials)
        p, q = cp_lower(k_hit, n_hit, self.a), cp_upper(k_other, n_other, self.a)
        return eps_bound(min(m, round(p * m)), m, min(m, round(q * m)), m, delta, self.a)


def _best(hits: Sequence[tuple[int, int]], n_hit: int, n_other: int, delta: float,
          target: Target = Target()) -> tuple[int, float]:
    """The index of the candidate (hit counts on the favoured and the other world) with the
    largest projected held-out bound (``Target``)."""
    best, score = -1, -math.inf
    for i, (k_hit, k_other) in enumerate(hits):
        s = target.bound(k_hit, n_hit, k_other, n_other, delta) if k_hit else -math.inf
        # no bound at all on the selection trials: prefer the larger estimated ratio
        if s == 0.0 and k_hit:
            s = -1.0 / (1.0 + _smoothed_log_ratio(k_hit, n_hit, k_other, n_other))
        if s > score:
            best, score = i, s
    return best, score


def _value_set_event(d: Sequence[Trial], dn: Sequence[Trial], forward: bool, delta: float,
                     target: Target) -> tuple[Event, float] | None:
    hit, other = (d, dn) if forward else (dn, d)
    ch, co = Counter(hit), Counter(other)
    ranked = sorted(ch, key=lambda v: -_smoothed_log_ratio(ch[v], len(hit), co[v], len(other)))[:MAX_CANDIDATES]
    prefixes, k_h, k_o = [], 0, 0
    for v in ranked:
        k_h, k_o = k_h + ch[v], k_o + co[v]
        prefixes.append((k_h, k_o))
    if not prefixes:
        return None
    i, score = _best(prefixes, len(hit), len(other), delta, target)
    if i < 0:
        return None
    values = frozenset(ranked[: i + 1])
    label = ("observation in {" + ", ".join(_show(v) for v in ranked[: min(i + 1, 3)])
             + (f", ... {i + 1} values" if i >= 3 else "") + "}")
    return Event(forward=forward, values=values, label=label), score


def _score_event(d: Sequence[Trial], dn: Sequence[Trial], forward: bool, delta: float,
                 target: Target) -> tuple[Event, float] | None:
    hit, other = (d, dn) if forward else (dn, d)
    per_hit = Counter(o for t in hit for o in t)
    per_other = Counter(o for t in other for o in t)
    nh, no = max(1, sum(per_hit.values())), max(1, sum(per_other.values()))
    table = {o: _smoothed_log_ratio(per_hit[o], nh, per_other[o], no) for o in set(per_hit) | set(per_other)}
    s_hit = [sum(table[o] for o in t) for t in hit]
    s_other = [sum(table[o] for o in t) for t in other]
    thresholds = sorted(set(s_hit), reverse=True)
    if len(thresholds) > MAX_CANDIDATES:
        step = len(thresholds) / MAX_CANDIDATES
        thresholds = [thresholds[int(i * step)] for i in range(MAX_CANDIDATES)]
    cands = [(sum(s >= th for s in s_hit), sum(s >= th for s in s_other)) for th in thresholds]
    if not cands:
        return None
    i, score = _best(cands, len(hit), len(other), delta, target)
    if i < 0:
        return None
    th = thresholds[i]
    return Event(forward=forward, table=tuple(table.items()), threshold=th,
                 label=f"sum over queries of the per-query log ratio >= {th:.3g}"), score


def _coarse_query(obs: Hashable) -> Hashable:
    if isinstance(obs, tuple) and obs and all(isinstance(o, tuple) and len(o) == 2 for o in obs):
        return tuple(sorted(Counter(doc for doc, _ in obs).items()))  # (doc, position) pairs: counts
    if isinstance(obs, tuple) and len(obs) == 2 and isinstance(obs[0], str):
        return (obs[0], _coarse_query(obs[1]))  # (answer, ids)
    return obs


def coarse(trial: Trial) -> Trial:
    """The trial with each query's watched passages counted per document, positions dropped."""
    return tuple(_coarse_query(o) for o in trial)


def choose_events(d: Sequence[Trial], dn: Sequence[Trial], delta: float, target: Target | None = None) -> list[Event]:
    """One event per direction (D over D', D' over D): the best of both families, on both views,
    on these trials, ranked for ``target`` (default: as many held-out trials as the selection
    share implies, at level 0.05)."""
    if target is None:
        target = Target(round(len(d) * (1 - SELECT_SHARE) / SELECT_SHARE), 0.05)
    views = [(False, d, dn)]
    cd, cdn = [coarse(t) for t in d], [coarse(t) for t in dn]
    if cd != list(d) or cdn != list(dn):
        # first: on a tie the coarse event wins, as it also covers values the selection never saw
        views.insert(0, (True, cd, cdn))
    out = []
    for forward in (True, False):
        found = []
        for is_coarse, a, b in views:
            for family in (_value_set_event, _score_event):
                got = family(a, b, forward, delta, target)
                if got:
                    event, score = got
                    label = f"coarse: {event.label}" if is_coarse else event.label
                    found.append((replace(event, coarse=is_coarse, label=label), score))
        if found:
            out.append(max(found, key=lambda es: es[1])[0])
    return out


def _show(value: Hashable) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
