"""Sentence-level metrics of the attack, with percentile-bootstrap intervals over queries.

For sentences with true labels y (1 = drawn from the retrieved private context) and predicted
labels ŷ = [P(private) >= threshold]:

    ESR = TP / (TP + FN)        extraction success rate as the paper defines it: correctly
                                identified private sentences over all actual private sentences
    F1  = 2TP / (2TP + FP + FN)
    AUC = P(score of a random private sentence > score of a random public one) (ties count 1/2)

Sentences of one answer are not independent, so the bootstrap resamples *queries*: B = 2,000
times draw the queries with replacement (seeded ``numpy.random.default_rng``), pool their
sentences, recompute the metric; the interval is the (alpha/2, 1 - alpha/2) percentiles of the
resampled values. A resample where the metric is undefined (AUC with one class present, ESR with
no private sentence) is skipped and counted in ``n_undefined``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np

Metric = Callable[[np.ndarray, np.ndarray], float]


def esr(y: np.ndarray, pred: np.ndarray) -> float:
    positives = y == 1
    if not positives.any():
        return float("nan")
    return float((pred[positives] == 1).mean())


def f1(y: np.ndarray, pred: np.ndarray) -> float:
    tp = float(((pred == 1) & (y == 1)).sum())
    fp = float(((pred == 1) & (y == 0)).sum())
    fn = float(((pred == 0) & (y == 1)).sum())
    if tp + fp + fn == 0:
        return float("nan")
    return 2 * tp / (2 * tp + fp + fn)


def auc(y: np.ndarray, score: np.ndarray) -> float:
    """Mann-Whitney form of ROC AUC (midranks handle ties)."""
    from scipy.stats import rankdata

    n1 = int((y == 1).sum())
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float
    n_resamples: int
    n_undefined: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def to_dict(self) -> dict:
        return {**asdict(self), "half_width": self.half_width}


def bootstrap(groups: Sequence[tuple[np.ndarray, np.ndarray]], metric: Metric, n_resamples: int = 2000,
              seed: int = 0, alpha: float = 0.05) -> Interval:
    """Point value and percentile interval of ``metric`` over query groups ``(y, x)``."""
    groups = [(np.asarray(y), np.asarray(x)) for y, x in groups if len(y)]
    if not groups:
        return Interval(float("nan"), float("nan"), float("nan"), n_resamples, n_resamples)
    y_all = np.concatenate([g[0] for g in groups])
    x_all = np.concatenate([g[1] for g in groups])
    value = metric(y_all, x_all)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        pick = rng.integers(0, len(groups), size=len(groups))
        v = metric(np.concatenate([groups[i][0] for i in pick]), np.concatenate([groups[i][1] for i in pick]))
        if not np.isnan(v):
            values.append(v)
    if not values:
        return Interval(value, float("nan"), float("nan"), n_resamples, n_resamples)
    low, high = np.percentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Interval(value, float(low), float(high), n_resamples, n_resamples - len(values))


def evaluate(groups: Sequence[tuple[np.ndarray, np.ndarray]], threshold: float = 0.5, n_resamples: int = 2000,
             seed: int = 0) -> dict:
    """ESR, F1 (at ``threshold`` on P(private)) and AUC, each with its bootstrap interval.

    ``groups``: one ``(y, p_private)`` pair of arrays per query.
    """
    predicted = [(y, (np.asarray(p) >= threshold).astype(int)) for y, p in groups]
    n_sentences = int(sum(len(y) for y, _ in groups))
    n_private = int(sum(int(np.sum(y)) for y, _ in groups))
    return {
        "n_queries": len(groups),
        "n_sentences": n_sentences,
        "n_private": n_private,
        "threshold": threshold,
        "esr": bootstrap(predicted, esr, n_resamples, seed).to_dict(),
        "f1": bootstrap(predicted, f1, n_resamples, seed).to_dict(),
        "auc": bootstrap(groups, auc, n_resamples, seed).to_dict(),
    }
