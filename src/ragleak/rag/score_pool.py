"""Scores of every unit (document or passage) of a selection pool, text read only for what is taken.

A DP selection needs one exact score per unit of the whole corpus, but reads the text of only
the k units it selects. ``ScorePool`` holds the scores as one array, in an order fixed before any
score is seen (document id order for a document pool, the index's storage order for a passage
pool: never the scores' rank), and a ``fetch`` that turns chosen rows into scored passages.
``PassageIndex.document_pool`` / ``passage_pool`` make one from the stored vectors; ``of_scored``
wraps an already-read list (the candidates a hook was handed), keeping its order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ragleak.records import Scored

#: ``fetch(rows) -> scored``: the passage standing for each row (a document's best passage), with
#: that row's exact score, in the order of ``rows``
Fetch = Callable[[Sequence[int]], list[Scored]]


@dataclass(frozen=True)
class ScorePool:
    scores: np.ndarray  # one exact score per unit, in the pool's fixed (score-independent) order
    fetch: Fetch

    def __post_init__(self) -> None:
        if np.ndim(self.scores) != 1:
            raise ValueError("a score pool holds one score per unit (a 1-d array)")

    def __len__(self) -> int:
        return len(self.scores)

    @classmethod
    def of_scored(cls, scored: Sequence[Scored]) -> "ScorePool":
        """A pool over passages already read, in the order given."""
        items = list(scored)
        return cls(np.array([s.score for s in items], dtype=float), lambda rows: [items[int(r)] for r in rows])

    def take(self, rows: Sequence[int]) -> list[Scored]:
        return self.fetch([int(r) for r in rows]) if len(rows) else []

    def best_rows(self, n: int | None = None) -> np.ndarray:
        """Rows of the ``n`` best scores (all when None), best first; ties by row (stable)."""
        n = len(self) if n is None else min(n, len(self))
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        return top_rows(self.scores, n)

    def ranked(self, n: int | None = None) -> list[Scored]:
        """The ``n`` best units as scored passages, best first (reads their text)."""
        return self.take(self.best_rows(n))

    def in_rank_order(self) -> "ScorePool":
        """The same units, best first (row i is the i-th best), still without reading any text: for a
        mechanism whose rows were historically drawn in rank order (its draws under a seed stay the same)."""
        order = self.best_rows()
        return ScorePool(self.scores[order], lambda chosen: self.fetch([int(order[int(r)]) for r in chosen]))

    def subset(self, rows: Sequence[int]) -> "ScorePool":
        """The pool restricted to ``rows`` (kept in the pool's own order)."""
        keep = np.sort(np.asarray(rows, dtype=np.int64))
        return ScorePool(self.scores[keep], lambda chosen: self.fetch([int(keep[int(r)]) for r in chosen]))


def top_rows(values: np.ndarray, k: int) -> np.ndarray:
    """Rows of the ``k`` largest ``values``, largest first, equal values by row: the same as
    ``np.argsort(-values, kind="stable")[:k]`` in O(n) for k << n (argpartition, then the k sorted)."""
    values = np.asarray(values)
    n = len(values)
    if k >= n or n <= 4 * k:
        return np.argsort(-values, kind="stable")[:k]
    part = np.argpartition(-values, k - 1)[:k]
    # rows tied with the k-th value may sit outside the partition: take every tie, then cut by row
    kth = values[part].min()
    above = part[values[part] > kth]
    tied = np.flatnonzero(values == kth)
    chosen = np.concatenate([above, tied[: k - len(above)]])
    return chosen[np.lexsort((chosen, -values[chosen]))]
