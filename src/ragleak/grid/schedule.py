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

When no chain is left to start, a freed worker joins a running chain instead of idling: it takes
that chain's next twin beside the cell running there. The two then share the stream's work
rather than repeat it: each generation is claimed in the cache by whichever worker reaches it
first and served to the other, and an attack whose queries are independent puts off a prompt
the other worker is generating and generates its next one (``RAGPipeline.answer_many``), so
the two split what is left of the stream. Only the end of a grid runs twins side by side, where
the alternative is an idle worker.
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
    """Hands cells to ``slots`` workers chain by chain: a chain's next cell is handed out when its
    previous one finished, in place of it; a slot whose chain is done takes the next chain, and
    once none is left, the next cell of the running chain with the most cells left (joining it)."""

    def __init__(self, chains: list[list[CellSpec]], slots: int) -> None:
        self._waiting = deque(deque(chain) for chain in chains if chain)
        self._running: dict[str, deque[CellSpec]] = {}  # cell id in flight -> the rest of its chain
        self.slots = max(1, slots)

    def start(self) -> list[CellSpec]:
        """The first cell of each of the first ``slots`` chains (fewer chains than slots: twins
        join them)."""
        return [cell for cell in (self._hand_out(deque()) for _ in range(self.slots)) if cell is not None]

    def finished(self, cell: CellSpec) -> CellSpec | None:
        """The cell to run next on the slot that ran ``cell`` (None: no work left for it)."""
        return self._hand_out(self._running.pop(cell.cell_id))

    def _hand_out(self, rest: deque[CellSpec]) -> CellSpec | None:
        """The next cell of ``rest`` (the freed slot's chain), else of the next chain, else of
        the busiest running one."""
        if not rest:
            rest = self._next_chain() or self._busiest_chain()
            if rest is None:
                return None
        nxt = rest.popleft()
        self._running[nxt.cell_id] = rest  # a chain joined by a second slot: both hold its one deque
        return nxt

    @property
    def idle(self) -> bool:
        return not self._running and not self._waiting

    def _next_chain(self) -> deque[CellSpec] | None:
        return self._waiting.popleft() if self._waiting else None

    def _busiest_chain(self) -> deque[CellSpec] | None:
        """The running chain with the most cells still to hand out (None: every one is handed out)."""
        rest = max(self._running.values(), key=len, default=None)
        return rest if rest else None
