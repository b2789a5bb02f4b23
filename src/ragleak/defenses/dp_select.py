"""Differentially private selection primitives shared by the DP defenses (pure numpy, no model).

* ``clip_scores``: clip similarity scores into public bounds [a, b] chosen without looking at the
  corpus; afterwards one document changes its own score by at most Delta = b - a.
* ``laplace_top_k``: add Laplace(Delta / eps) to every clipped score and keep the k largest.
  Under substitution of one document only its own coordinate moves, by <= Delta, so the whole
  noisy vector has L1 sensitivity Delta and is eps-DP (Laplace mechanism); any top-k of it is
  post-processing. Cost: eps per call, whatever k is.
* ``gumbel_top_k``: one-shot top-k with Gumbel(2 Delta k / eps) noise; equal in distribution to k
  rounds of the exponential mechanism with utility = score, sensitivity Delta, each at eps / k
  (peeling; Durfee & Rogers 2019), so eps-DP by basic composition over the k rounds.
* ``noisy_argmax``: report-noisy-max over a histogram of votes (sensitivity 1 per coordinate
  when one voter changes its vote), Gumbel(2 / eps) noise = the exponential mechanism, eps-DP.

* ``noisy_selection``: the retrieval-side use of the two top-k rules on a pool of scored
  candidates (one per document, see ``corpus_pool``): the k selected, best first, with their
  noisy scores (laplace; post-processing of the noisy vector) or scored by rank (gumbel). The
  pool is a ``ScorePool`` (scores of the whole corpus as one array, text read for the k taken)
  or a list of scored passages; noise is drawn per unit in the pool's order, whichever.

All randomness comes from a numpy Generator the caller takes from ``RunContext.noise_rng``.
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

from ragleak.rag.score_pool import ScorePool, top_rows
from ragleak.records import Scored


def clip_scores(scores, low: float, high: float) -> np.ndarray:
    if not high > low:
        raise ValueError("clip bounds need high > low")
    return np.clip(np.asarray(scores, dtype=float), low, high)


def laplace_noisy_scores(scores, eps: float, sensitivity: float, rng: np.random.Generator) -> np.ndarray:
    if eps <= 0:
        raise ValueError("eps must be > 0")
    s = np.asarray(scores, dtype=float)
    return s + rng.laplace(0.0, sensitivity / eps, size=s.shape)


def laplace_top_k(scores, k: int, eps: float, sensitivity: float, rng: np.random.Generator) -> np.ndarray:
    """Indices of the k largest Laplace-noised scores, best first (eps-DP under substitution)."""
    noisy = laplace_noisy_scores(scores, eps, sensitivity, rng)
    return top_rows(noisy, k)


def gumbel_top_k(scores, k: int, eps: float, sensitivity: float, rng: np.random.Generator) -> np.ndarray:
    """Indices of a k-fold exponential-mechanism selection (one-shot Gumbel), best first."""
    if eps <= 0 or k < 1:
        raise ValueError("need eps > 0 and k >= 1")
    s = np.asarray(scores, dtype=float)
    noisy = s + rng.gumbel(0.0, 2.0 * sensitivity * k / eps, size=s.shape)
    return top_rows(noisy, k)


def noisy_argmax(counts, eps: float, rng: np.random.Generator) -> int:
    """Exponential mechanism on a vote histogram (each voter moves each count by <= 1): eps-DP."""
    if eps <= 0:
        raise ValueError("eps must be > 0")
    c = np.asarray(counts, dtype=float)
    return int(np.argmax(c + rng.gumbel(0.0, 2.0 / eps, size=c.shape)))


def noisy_selection(pool: ScorePool | Sequence[Scored], k: int, eps: float, low: float, high: float,
                    mode: Literal["laplace", "gumbel"], rng: np.random.Generator,
                    sensitivity: float | None = None) -> list[Scored]:
    """The k candidates a DP top-k rule selects from ``pool`` (scores clipped to the public [low, high]);
    ``sensitivity`` is the caller's stated Delta (default: the clip range, what clipping guarantees).
    Only the k selected are read (``ScorePool.take``)."""
    if not isinstance(pool, ScorePool):
        pool = ScorePool.of_scored(pool)
    if not len(pool):
        return []
    clipped = clip_scores(pool.scores, low, high)
    k = min(k, len(pool))
    delta = high - low if sensitivity is None else sensitivity
    if mode == "laplace":
        noisy = laplace_noisy_scores(clipped, eps, delta, rng)
        order = top_rows(noisy, k)
        return [s.model_copy(update={"score": float(noisy[i])}) for s, i in zip(pool.take(order), order)]
    order = gumbel_top_k(clipped, k, eps, delta, rng)
    # scored by rank (k..1): the noisy values are not released
    return [s.model_copy(update={"score": float(len(order) - r)}) for r, s in enumerate(pool.take(order))]
