"""The Ray executor: long-lived cell actors fed by the stream scheduler, like the local pool.

A stateless Ray task per cell starts each cell in whichever worker process Ray picks, so the
model weights, the embedder and the indexes are loaded again and again (measured: Ray on 2
workers ran at 0.52-0.59x of one local worker). Here each of the ``workers`` slots is one actor
(``CellWorker``, one CPU, one model thread): a process that lives for the whole run, so the
stack's process-wide memo (``ragleak.stack``) keeps its loaded parts across the cells it runs,
and indexes come from the run folder (``RUN_DIR/indexes``) where the first worker to build one
saved it. The ``ChainDispatcher`` decides what runs next, exactly as for the local pool: every
stream's first cell, then the twins, each to the slot just freed.

Faults: an actor that dies (killed, out of memory, a crash in native code) loses only the cell it
was running. Its slot gets a fresh actor and the cell runs again there; a cell that kills ``MAX_ATTEMPTS`` actors gets an error record, so
one poisonous cell cannot stall the grid. An actor that cannot even start (ragleak not importable
on a node) stops the run instead: that is no cell's fault. Records are one file per cell id, written atomically
(``grid.store``), so a rerun replaces rather than duplicates, and a resume finds exactly the
cells whose record is missing, as for the local executor.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from ragleak.errors import RagleakError
from ragleak.grid.schedule import ChainDispatcher
from ragleak.grid.spec import CellSpec
from ragleak.grid.store import CellRecord, RunStore
from ragleak.pipeline.rag import AuditPolicy

log = logging.getLogger(__name__)

CellFn = Callable[[CellSpec, str, AuditPolicy], CellRecord]

#: Actors a cell may take down before it is recorded as an error instead of run again.
MAX_ATTEMPTS = 2


class CellWorker:
    """One Ray actor: runs cells one at a time with ``cell_fn`` (``grid.cell.execute_cell``),
    keeping what it loaded (``ragleak.stack``'s memo) from one cell to the next."""

    def __init__(self, cell_fn: CellFn) -> None:
        # one model thread per worker, as in the local pool: two per worker on 2 cores was 2-4x slower
        os.environ["RAGLEAK_THREADS"] = "1"
        self.cell_fn = cell_fn
        self.ran: list[str] = []

    def run(self, spec: CellSpec, run_dir: str, audit: AuditPolicy) -> CellRecord:
        self.ran.append(spec.cell_id)
        return self.cell_fn(spec, run_dir, audit)

    def report(self) -> dict[str, Any]:
        """Its process, the cells it ran, what it loaded (``stack.load_counts``), the CPU seconds
        its process used (user + system) and its nice level."""
        from ragleak.stack import load_counts

        cpu = os.times()
        return {"pid": os.getpid(), "cells": list(self.ran), "loads": load_counts(),
                "cpu_s": round(cpu.user + cpu.system, 2), "nice": os.nice(0)}


@dataclass
class ActorRun:
    """What the actors did: one report per actor that was alive at the end, the actors that died."""

    workers: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    lost: list[str] = field(default_factory=list)  # cell ids of the cells whose actor died, once per death


def run_on_actors(ray, chains: list[list[CellSpec]], run_dir: str, slots: int, audit: AuditPolicy,
                  cell_fn: CellFn, on_record: Callable[[CellRecord], None]) -> ActorRun:
    """Run every cell of ``chains`` on at most ``slots`` ``CellWorker`` actors of the connected
    Ray cluster; ``on_record`` gets each cell's record as it comes in. The actors are killed at the
    end, so a long-lived cluster gets its CPUs back."""
    from ray.exceptions import RayActorError

    worker_cls = ray.remote(num_cpus=1, max_restarts=0)(CellWorker)
    dispatch = ChainDispatcher(chains, slots)
    store = RunStore(run_dir)
    actors: list[Any] = []  # by slot; None: its actor died and no cell has needed a successor yet
    pending: dict[Any, tuple[int, CellSpec]] = {}  # object ref -> (slot, cell)
    attempts: Counter[str] = Counter()
    result = ActorRun()

    def submit(slot: int, spec: CellSpec) -> None:
        if slot == len(actors):
            actors.append(None)
        if actors[slot] is None:  # started on demand: a slot whose last cell killed its actor may need none
            actors[slot] = worker_cls.remote(cell_fn)
        attempts[spec.cell_id] += 1
        pending[actors[slot].run.remote(spec, run_dir, audit)] = (slot, spec)

    try:
        for slot, spec in enumerate(dispatch.start()):
            submit(slot, spec)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                slot, spec = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except RayActorError as exc:
                    if exc.actor_init_failed:  # no actor can start (ragleak not importable there): no cell's fault
                        raise RagleakError(f"a Ray cell actor could not start: {exc}") from exc
                    record = _after_death(ray, exc, slot, spec, actors, store, attempts, result)
                    if record is None:
                        submit(slot, spec)  # the same cell, on the slot's fresh actor
                        continue
                nxt = dispatch.finished(spec)
                if nxt is not None:
                    submit(slot, nxt)
                on_record(record)
        result.workers = _reports(ray, [a for a in actors if a is not None], RayActorError)
    finally:
        for actor in actors:
            if actor is not None:
                ray.kill(actor, no_restart=True)
    return result


def _reports(ray, actors: list, actor_error: type[Exception]) -> list[dict[str, Any]]:
    """Each live actor's report; one that died after its last cell only misses from the list
    (every cell's record is stored by then)."""
    out = []
    for actor in actors:
        try:
            out.append(ray.get(actor.report.remote()))
        except actor_error as exc:
            log.warning("a Ray actor died after its last cell; no report from it (%s)", exc)
    return out


def _after_death(ray, exc: Exception, slot: int, spec: CellSpec, actors: list, store: RunStore,
                 attempts: Counter, result: ActorRun) -> CellRecord | None:
    """Retire the dead actor of ``slot``; None to run the cell again, or the error record written
    for a cell that has killed ``MAX_ATTEMPTS`` actors."""
    log.warning("Ray actor running cell %s died (%s); its slot's next cell gets a fresh actor", spec.cell_id,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    result.restarts += 1
    result.lost.append(spec.cell_id)
    try:
        ray.kill(actors[slot], no_restart=True)
    except Exception:  # noqa: BLE001 - it is already gone; killing is only to be sure
        pass
    actors[slot] = None  # its successor starts with the slot's next cell
    # even if it died just after storing the record, running the cell again only replaces that
    # file (the cache serves its generations); a record left from an earlier run must not count
    if attempts[spec.cell_id] < MAX_ATTEMPTS:
        return None
    record = CellRecord(cell_id=spec.cell_id, spec=spec, status="error",
                        error=f"WorkerDied: {attempts[spec.cell_id]} Ray actors died running this cell "
                              f"(last: {type(exc).__name__}); --retry-errors runs it again")
    store.write(record)
    return record
