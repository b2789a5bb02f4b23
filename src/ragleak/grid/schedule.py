"""The order a grid's cells run in: by generation stream.

Cells of one stream (``grid.plan``: epsilon twins of a defense that ignores epsilon, a
post-processing defense beside the baseline on fixed single-prompt queries) make the same
generations, so only the first one should pay for them. Run side by side on two workers, both
miss the shared cache at the same time and the second worker adds nothing. So each stream is a
*chain*: its first cell runs, then its twins one after the other, each handed out the moment the
one before it finished - to the worker just freed, while the others are busy, so a twin also
finds the indexes that worker built in its memory - and they find every generation in the cache;
other workers take other chains meanwhile. The chains that cost most start first, so no long one
is left for the end.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable

from ragleak.grid.plan import CellEstimate
from ragleak.grid.spec import CellSpec


def stream_chains(cells: Iterable[CellSpec], estimate: Callable[[CellSpec], CellEstimate]) -> list[list[CellSpec]]:
    """The cells grouped by generation stream, each chain in its running order (the grid's own
    order within a stream), the chains by decreasing estimated cost (ties: grid order)."""
    chains: dict[tuple, list[CellSpec]] = {}
    cost: dict[tuple, float] = {}
    for cell in cells:
        e = estimate(cell)
        chains.setdefault(e.key, []).append(cell)
        cost.setdefault(e.key, e.generations)  # the first cell pays; its twins read the cache
    return [chains[key] for key in sorted(chains, key=lambda k: -cost[k])]  # stable: ties keep grid order


class ChainDispatcher:
    """Hands cells to ``slots`` workers chain by chain: a chain's next cell is handed out only when
    its previous one finished, in place of it; a slot whose chain is done takes the next chain."""

    def __init__(self, chains: list[list[CellSpec]], slots: int) -> None:
        self._waiting = deque(deque(chain) for chain in chains if chain)
        self._running: dict[str, deque[CellSpec]] = {}  # cell id in flight -> the rest of its chain
        self.slots = max(1, slots)

    def start(self) -> list[CellSpec]:
        """The first cell of each of the first ``slots`` chains."""
        return [cell for cell in (self._next_chain() for _ in range(self.slots)) if cell is not None]

    def finished(self, cell: CellSpec) -> CellSpec | None:
        """The cell to run next on the slot that ran ``cell`` (None: no work left for it)."""
        rest = self._running.pop(cell.cell_id)
        if rest:
            nxt = rest.popleft()
            self._running[nxt.cell_id] = rest
            return nxt
        return self._next_chain()

    @property
    def idle(self) -> bool:
        return not self._running and not self._waiting

    def _next_chain(self) -> CellSpec | None:
        if not self._waiting:
            return None
        chain = self._waiting.popleft()
        first = chain.popleft()
        self._running[first.cell_id] = chain
        return first
