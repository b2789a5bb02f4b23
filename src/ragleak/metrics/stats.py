"""Aggregation with honest statistics: the run is the resampling unit.

* **Deduplication.** Greedy decoding with a fixed seed makes some runs deterministic copies of
  each other (a non-DP defense run at epsilon 1 and at epsilon 5 gives the same answers). Copies
  are not independent evidence, so runs whose fingerprint (a digest of their effective inputs and
  their outputs, ``run_fingerprint``) repeats are dropped before resampling; the first is kept.
* **Percentile bootstrap.** ``n_resamples`` (2,000) resamples of the runs with replacement, the
  statistic on each, and the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of
  those values as the interval (95% by default). The generator is seeded, so an interval is
  reproducible. The interval describes variation between runs of this instantiation (corpus,
  model, query pool); it says nothing about other instantiations.
* **Paired bootstrap** for a defense-vs-baseline delta: runs are paired (same corpus, queries and
  seed under both arms) and the pairs are resampled together, so the shared run-to-run variation
  cancels in the delta.

With one (unique) run there is nothing to resample: the interval collapses to the estimate and
``n_unique`` says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Hashable, Sequence, TypeVar

import numpy as np

from ragleak.records import digest

T = TypeVar("T")

N_RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap percentile interval."""

    estimate: float
    low: float
    high: float
    n_runs: int
    n_unique: int
    n_resamples: int = N_RESAMPLES
    confidence: float = CONFIDENCE
    seed: int = 0
    #: resamples on which the statistic was undefined (NaN: e.g. an AUC over one class) and skipped
    n_undefined: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def bounds(self) -> tuple[float, float] | None:
        """``(low, high)``, or None where there is no interval (one unit, or every resample undefined)."""
        if self.n_unique < 2 or self.low != self.low or self.high != self.high:
            return None
        return self.low, self.high

    def __contains__(self, value: float) -> bool:
        return self.low <= value <= self.high


def run_fingerprint(inputs: Any, outputs: Any) -> str:
    """A digest of a run's effective inputs and its outputs; equal for deterministic duplicates."""
    return digest([inputs, outputs])


def dedup_runs(runs: Sequence[T], fingerprints: Sequence[Hashable] | None) -> list[T]:
    """``runs`` without the deterministic duplicates: the first run of each fingerprint is kept."""
    if fingerprints is None:
        return list(runs)
    if len(fingerprints) != len(runs):
        raise ValueError(f"{len(fingerprints)} fingerprints for {len(runs)} runs")
    seen: set[Hashable] = set()
    kept = []
    for run, fp in zip(runs, fingerprints):
        if fp not in seen:
            seen.add(fp)
            kept.append(run)
    return kept


def _bounds(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap(
    runs: Sequence[T],
    statistic: Callable[[list[T]], float],
    *,
    fingerprints: Sequence[Hashable] | None = None,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap of ``statistic`` (a function of a list of units) with the run (or any
    other independent unit: a query, an MI candidate) as the resampling unit.

    ``statistic`` may return NaN where it is undefined (an AUC over one class): such resamples are
    skipped and counted in ``n_undefined``; when every resample is undefined the bounds are NaN.
    The indices are drawn as ``scipy.stats.bootstrap`` draws them (one ``integers`` call of shape
    ``(n_resamples, n)``), so with the same generator both give the same percentile interval (tested).
    """
    total = len(runs)
    runs = dedup_runs(runs, fingerprints)
    if not runs:
        raise ValueError("bootstrap needs at least one run")
    estimate = float(statistic(list(runs)))
    if len(runs) == 1:
        return Interval(estimate, estimate, estimate, total, 1, n_resamples, confidence, seed)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(runs), size=(n_resamples, len(runs)))
    values = np.array([statistic([runs[i] for i in row]) for row in idx], dtype=float)
    defined = values[~np.isnan(values)]
    low, high = _bounds(defined, confidence) if defined.size else (float("nan"), float("nan"))
    return Interval(estimate, low, high, total, len(runs), n_resamples, confidence, seed,
                    n_undefined=int(values.size - defined.size))


def roc_auc(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float:
    """ROC AUC in [0, 1] (sklearn's ``roc_auc_score``: ties count one half); NaN when only one
    class is present, where it is undefined."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(labels, dtype=int)
    if y.size == 0 or y.min() == y.max():
        return float("nan")
    return float(roc_auc_score(y, np.asarray(scores, dtype=float)))


def bootstrap_mean(
    values: Sequence[float],
    *,
    fingerprints: Sequence[Hashable] | None = None,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """Bootstrap interval of the mean of per-run values (vectorised ``bootstrap`` for the mean)."""
    total = len(values)
    arr = np.asarray(dedup_runs(list(values), fingerprints), dtype=float)
    if arr.size == 0:
        raise ValueError("bootstrap needs at least one run")
    estimate = math.fsum(arr.tolist()) / arr.size  # exact sum: deltas that cancel give 0, not 1e-17
    if arr.size == 1:
        return Interval(estimate, estimate, estimate, total, 1, n_resamples, confidence, seed)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, arr.size, size=(n_resamples, arr.size))].mean(axis=1)
    low, high = _bounds(means, confidence)
    return Interval(estimate, low, high, total, int(arr.size), n_resamples, confidence, seed)


def paired_bootstrap_delta(
    treatment: Sequence[float],
    baseline: Sequence[float],
    *,
    fingerprints: Sequence[Hashable] | None = None,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """Interval of mean(treatment - baseline) over paired runs; pairs are resampled together.

    ``treatment[i]`` and ``baseline[i]`` must come from the same run conditions (corpus, query
    pool, seed). ``fingerprints`` (one per pair) drops deterministic duplicate pairs first.
    """
    if len(treatment) != len(baseline):
        raise ValueError(f"paired bootstrap needs equal run counts, got {len(treatment)} and {len(baseline)}")
    # rounded far below any reading's precision, so equal readings that arrived by different float
    # paths (0.8333 - 0.6667 vs 0.6667 - 0.8333) cancel to exactly 0
    deltas = [round(float(t) - float(b), 12) for t, b in zip(treatment, baseline)]
    return bootstrap_mean(deltas, fingerprints=fingerprints, n_resamples=n_resamples,
                          confidence=confidence, seed=seed)


def unpaired_bootstrap_delta(
    treatment: Sequence[float],
    baseline: Sequence[float],
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """Interval of mean(treatment) - mean(baseline) when runs cannot be paired (arms resampled apart)."""
    t, b = np.asarray(treatment, dtype=float), np.asarray(baseline, dtype=float)
    if t.size == 0 or b.size == 0:
        raise ValueError("both arms need at least one run")
    estimate = float(t.mean() - b.mean())
    rng = np.random.default_rng(seed)
    tm = t[rng.integers(0, t.size, size=(n_resamples, t.size))].mean(axis=1)
    bm = b[rng.integers(0, b.size, size=(n_resamples, b.size))].mean(axis=1)
    low, high = _bounds(tm - bm, confidence)
    return Interval(estimate, low, high, int(t.size + b.size), int(t.size + b.size), n_resamples, confidence, seed)
