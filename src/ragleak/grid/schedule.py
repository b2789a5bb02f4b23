"""The order a grid's cells run in: by generation stream.

Cells of one stream (``grid.streams``: epsilon twins of a defense that ignores epsilon, a
post-processing defense beside the baseline on fixed single-prompt queries) make the same
generations, so only the first one should pay for them. Run side by side on two workers, both
miss the shared cache at the same time and the second worker adds nothing. So each stream is a
*chain*: its first cell pays for the stream's generations; its twins find them in the cache.

The first cells are the big jobs and the twins the small ones (cache hits), so the workers take
every chain's first cell, the costliest chain first, and only then the twins: the classic
longest-processing-time order (Graham 1969), where the small jobs at the end fill the gaps the big
ones leave, so no worker idles at the end of a grid while another runs a long cell. A twin goes
out after its stream's first cell finished where one such is left; otherwise (the last ones) beside
it, where the alternative is an idle worker. The two then share the stream's work rather than
repeat it: each generation is claimed in the cache by whichever worker reaches it first and
served to the other, and an attack whose queries are independent puts off a prompt the other
worker is generating and generates its next one (``RAGPipeline.answer_many``).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Callable

from ragleak.grid.spec import CellSpec


class ChainDispatcher:
    """Hands cells to ``slots`` workers: every chain's first cell in chain order, then the
    twins, each to the slot just freed; a twin whose stream's first cell finished before one
    whose first cell still runs."""

    def __init__(self, chains: list[list[CellSpec]], slots: int) -> None:
        self._firsts = deque(chain[0] for chain in chains if chain)
        self._twins = [twin for chain in chains for twin in chain[1:]]
        self._first_of = {twin.cell_id: chain[0].cell_id for chain in chains for twin in chain[1:]}
        self._running: set[str] = set()
        self.slots = max(1, slots)

    def start(self) -> list[CellSpec]:
        """The first ``slots`` cells to run."""
        return [cell for cell in (self._hand_out() for _ in range(self.slots)) if cell is not None]

    def finished(self, cell: CellSpec) -> CellSpec | None:
        """The cell to run next on the slot that ran ``cell`` (None: no work left for it)."""
        self._running.discard(cell.cell_id)
        return self._hand_out()

    @property
    def idle(self) -> bool:
        return not self._running and not self._firsts and not self._twins

    def _hand_out(self) -> CellSpec | None:
        if self._firsts:
            cell = self._firsts.popleft()
        elif self._twins:
            cell = next((t for t in self._twins if self._first_of[t.cell_id] not in self._running), self._twins[0])
            self._twins.remove(cell)
        else:
            return None
        self._running.add(cell.cell_id)
        return cell


def simulated_makespan(chains: list[list[CellSpec]], first_seconds: Callable[[list[CellSpec]], float],
                       slots: int) -> float:
    """Wall seconds for ``chains`` on ``slots`` workers handed cells by ``ChainDispatcher``: a
    chain's first cell takes ``first_seconds(chain)``; a twin takes nothing of its own (its
    generations are in the cache) but cannot finish before its chain's first cell (it waits on
    that cell's claims)."""
    dispatch = ChainDispatcher(chains, slots)
    own = {chain[0].cell_id: first_seconds(chain) for chain in chains if chain}
    first_of = {twin.cell_id: chain[0].cell_id for chain in chains for twin in chain[1:]}
    ends: dict[str, float] = {}
    running: list[tuple[float, int, CellSpec]] = []

    def begin(cell: CellSpec, now: float) -> None:
        if cell.cell_id in own:
            end = now + own[cell.cell_id]
        else:  # the first cell of a twin's chain always went out before it: its end is known
            end = max(now, ends[first_of[cell.cell_id]])
        ends[cell.cell_id] = end
        heapq.heappush(running, (end, len(ends), cell))

    for cell in dispatch.start():
        begin(cell, 0.0)
    makespan = 0.0
    while running:
        now, _, cell = heapq.heappop(running)
        makespan = max(makespan, now)
        nxt = dispatch.finished(cell)
        if nxt is not None:
            begin(nxt, now)
    return makespan
