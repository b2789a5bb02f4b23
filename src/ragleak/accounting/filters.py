"""Per-document privacy filters (individual accounting: Feldman & Zrnic 2021,
arXiv 2008.11193, as MuRAG uses them, Wu et al. 2025, arXiv 2511.07637).

Each document z starts with budget E_0(z) = M * eps_q. A query charges eps_q to every active
document whose own relevance passes the public threshold (whether or not it is finally used),
and a document whose remaining budget is below eps_q is retired: never touched again. Whether z
is charged depends only on z, the query and past outputs, so the charges are a valid stopping
rule, and every document's total loss over any number T of queries is at most

    eps_doc(T) <= min(T, M) * eps_q  <=  M * eps_q      (pure DP; basic composition per document).

``filter_cap`` is that bound; ``DocumentFilter`` is the bookkeeping a defense runs.
"""

from __future__ import annotations

from typing import Iterable


def filter_cap(eps_q: float, max_charges: int, queries: int) -> float:
    """eps_doc(T) = min(T, M) * eps_q: the most a document can have spent after T queries."""
    if queries < 0 or max_charges < 1:
        raise ValueError("need queries >= 0 and max_charges >= 1")
    return min(queries, max_charges) * eps_q


class DocumentFilter:
    """Remaining budgets per document id; charge, retire, and report the active set."""

    def __init__(self, eps_q: float, max_charges: int) -> None:
        if eps_q <= 0 or max_charges < 1:
            raise ValueError("need eps_q > 0 and max_charges >= 1")
        self.eps_q = eps_q
        self.max_charges = max_charges
        self._charges: dict[str, int] = {}

    def is_active(self, doc_id: str) -> bool:
        return self._charges.get(doc_id, 0) < self.max_charges

    def charge(self, doc_ids: Iterable[str]) -> list[str]:
        """Charge eps_q to each active id (once per call); return the ids charged, in order."""
        charged: list[str] = []
        for doc_id in dict.fromkeys(doc_ids):
            if self.is_active(doc_id):
                self._charges[doc_id] = self._charges.get(doc_id, 0) + 1
                charged.append(doc_id)
        return charged

    def spent(self, doc_id: str) -> float:
        return self._charges.get(doc_id, 0) * self.eps_q

    def retired(self) -> list[str]:
        return sorted(d for d, c in self._charges.items() if c >= self.max_charges)

    def active_count(self, universe: Iterable[str]) -> int:
        return sum(1 for d in set(universe) if self.is_active(d))

    def max_spent(self) -> float:
        return max(self._charges.values(), default=0) * self.eps_q
