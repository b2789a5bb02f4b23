"""Execute a grid: local process pool (default) or Ray, resumable, with progress.

The coordinator never writes a measured cell record itself; each worker writes the record of the
cell it ran (``cell.execute_cell``; the Ray executor writes only the error record of a cell that
took its actors down ``ray_actors.MAX_ATTEMPTS`` times). So killing the coordinator, a worker or the whole process group at
any moment loses at most the cells in flight, and the next run picks up exactly the cells whose
record is missing. Cells are handed out by generation stream (``grid.schedule``): every stream's
first cell, then the twins that read its generations from the cache. Both executors keep a
worker's loaded stack across its cells: local pool processes, or long-lived Ray actors
(``grid.ray_actors``).

The live ETA (``Progress.eta_s``) prices the cells left as the dry run does (``grid.eta``) and
scales them by how the finished cells ran against their own estimates: the costliest cells run
first, so a mean of seconds per cell so far would overstate what is left.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Literal

from ragleak.errors import ConfigError, RagleakError
from ragleak.grid.cell import execute_cell
from ragleak.grid.lock import RunLock
from ragleak.grid.preflight import preflight
from ragleak.grid.eta import Rates, cell_seconds, stored_rates
from ragleak.grid.schedule import ChainDispatcher
from ragleak.grid.spec import CellSpec, GridConfig
from ragleak.grid.store import CellRecord, RunStore
from ragleak.grid.streams import stream_chains
from ragleak.rag.cache import GenerationCache, move_cache_aside
from ragleak.pipeline.rag import AuditPolicy

log = logging.getLogger(__name__)

Executor = Literal["local", "ray"]
ProgressFn = Callable[["Progress"], None]


@dataclass
class Progress:
    total: int
    done: int
    ran: int = 0
    errors: int = 0
    partial: int = 0
    failed: int = 0
    model_calls: int = 0
    cache_hits: int = 0
    cache_repairs: int = 0
    cache_waited: int = 0  # hits served after waiting on another worker's claim (part of cache_hits)
    worker_restarts: int = 0  # Ray actors that died mid-cell and were replaced (their cell ran again)
    workers: list[dict] = field(default_factory=list)  # Ray: each actor's pid, cells and loads
    # the live ETA: estimated seconds of each cell left to run (``grid.eta.cell_seconds``), the
    # workers sharing them, and the estimated and measured seconds of the cells finished so far
    estimates: dict[str, float] = field(default_factory=dict)
    slots: int = 1
    estimated_done: float = 0.0
    measured_done: float = 0.0
    clock: Callable[[], float] = time.monotonic
    started_at: dict[str, float] = field(default_factory=dict)

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the estimates of the cells not finished, times the measured over the
        estimated seconds of the work those finished did (1.0 before any), shared by the workers."""
        if not self.estimates:
            return 0.0 if self.done >= self.total else None
        ratio = self.measured_done / self.estimated_done if self.estimated_done > 0 else 1.0
        return sum(self.estimates.values()) * ratio / max(1, min(self.slots, len(self.estimates)))

    @property
    def cache_hit_rate(self) -> float:
        calls = self.model_calls + self.cache_hits
        return self.cache_hits / calls if calls else 0.0

    def begin(self, cell_id: str) -> None:
        """A cell went to a worker now (its measured seconds run from here)."""
        self.started_at[cell_id] = self.clock()

    def add(self, record: CellRecord) -> None:
        self.done += 1
        self.ran += 1
        self.errors += record.status == "error"
        self.partial += record.status == "partial"
        self.failed += record.status == "failed"
        self.model_calls += record.usage.model_calls
        self.cache_hits += record.usage.cache_hits
        self.cache_repairs += record.usage.cache_repairs
        self.cache_waited += record.usage.cache_waited
        start = self.started_at.pop(record.cell_id, None)
        # a cell not seen going out (Ray's actors): the worker's own timing of it
        self.measured_done += self.clock() - start if start is not None else record.timings.get("total_s", 0.0)
        # its estimate, less the share of its generations the cache served (another cell had made
        # them: a post-generation defense that left an adaptive attack's answers as they were)
        calls = record.usage.model_calls + record.usage.cache_hits
        own = record.usage.model_calls / calls if calls else 1.0
        self.estimated_done += self.estimates.pop(record.cell_id, 0.0) * own


def _init_worker() -> None:
    # one model thread per worker: two per worker on 2 cores was 2-4x slower
    os.environ["RAGLEAK_THREADS"] = "1"


def run_grid(
    config: GridConfig,
    out: Path,
    executor: Executor = "local",
    workers: int | None = None,
    retry_errors: bool = False,
    address: str | None = None,
    progress: ProgressFn | None = None,
    rebuild_cache: bool = False,
    cells: list[CellSpec] | None = None,
) -> Progress:
    """Run the unfinished cells of ``config`` into ``out`` (one grid per folder at a time: a second
    raises ``RunLockedError``). ``cells``: its expansion, when the caller already validated it;
    every name and parameter, and every outside input a cell reads (``grid.preflight``: ``$env:``
    variables, files, a callable's import path), is checked before the run folder is created. ``rebuild_cache`` moves
    the run's generation cache aside first (the fix for an unreadable one)."""
    if executor not in ("local", "ray"):
        raise ConfigError(f"unknown executor {executor!r}; use local or ray")
    cells = config.expand() if cells is None else cells
    preflight(cells)  # every outside input the cells read: a missing one writes no run folder
    with RunLock(out):
        return _run(config, cells, Path(out), executor, workers, retry_errors, address, progress, rebuild_cache)


def _run(config: GridConfig, cells: list[CellSpec], out: Path, executor: Executor, workers: int | None,
         retry_errors: bool, address: str | None, progress: ProgressFn | None, rebuild_cache: bool) -> Progress:
    # create (or check: an unreadable one stops here) the shared generation cache before any
    # worker opens it
    cache_path = out / "generations.sqlite"
    if rebuild_cache:
        move_cache_aside(cache_path)
    GenerationCache(cache_path).close()
    store = RunStore(out)
    store.init(config, cells)
    todo = store.pending(cells, retry_errors=retry_errors)
    if store.corrupt:
        log.warning("%d cell records are corrupt; rerunning those cells", len(store.corrupt))
    workers = run_workers(workers)
    seconds = {cell_id: s for cell_id, (s, _) in cell_seconds(todo, live_rates(todo)).items()}
    state = Progress(total=len(cells), done=len(cells) - len(todo), estimates=dict(seconds), slots=workers)
    if progress:
        progress(state)
    audit = config.audit_policy()
    chains = stream_chains(todo, lambda cell: seconds[cell.cell_id])
    # a finished grid starts no executor (a Ray cluster takes seconds to come up)
    if todo and executor == "local":
        _run_local(chains, str(out), workers, state, progress, audit)
    elif todo:
        _run_ray(chains, str(out), workers, address, state, progress, audit)
    store.write_cells_jsonl()
    return state


# qwen2.5-coder-0.5b on one thread of this project's 2-core machine (2026-12-02,
# benchmarks/results/model_speed-2026-12-02.jsonl): where no rate is stored, the live ETA's
# first guess; from the first finished cell on, only the ratio of its estimates matters
NOMINAL_RATES = Rates(prefill_tok_s=143.4, decode_tok_s=39.7)


def live_rates(cells: list[CellSpec]) -> dict[str, Rates]:
    """The stored rates of the cells' models, ``NOMINAL_RATES`` for a model with none."""
    return {**{c.stack.model: NOMINAL_RATES for c in cells}, **stored_rates(cells)}


def run_workers(requested: int | None) -> int:
    """The workers a run uses: ``requested``, else one per core (the dry run's ETA assumes the same)."""
    return max(1, requested or os.cpu_count() or 1)


def _run_local(chains: list[list[CellSpec]], run_dir: str, workers: int, state: Progress, progress,
               audit: AuditPolicy) -> None:
    if workers == 1 or sum(map(len, chains)) <= 1:
        _init_worker()
        for spec in (cell for chain in chains for cell in chain):
            state.begin(spec.cell_id)
            state.add(execute_cell(spec, run_dir, audit))
            if progress:
                progress(state)
        return
    dispatch = ChainDispatcher(chains, workers)
    pending: dict = {}  # future -> its cell
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"),
                                 initializer=_init_worker) as pool:
            for spec in dispatch.start():
                state.begin(spec.cell_id)
                pending[pool.submit(execute_cell, spec, run_dir, audit)] = spec
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    record = fut.result()
                    nxt = dispatch.finished(pending.pop(fut))
                    if nxt is not None:
                        state.begin(nxt.cell_id)
                        pending[pool.submit(execute_cell, nxt, run_dir, audit)] = nxt
                    state.add(record)
                    if progress:
                        progress(state)
    except BrokenProcessPool as exc:
        # a worker killed from outside (out of memory, a signal) or by a crash in native code (an
        # illegal instruction in llama.cpp): its cell wrote no record, so a rerun resumes with it
        running = ", ".join(sorted(spec.label for spec in pending.values())) or "no cell"
        raise RagleakError(f"a grid worker process died abruptly while running {running}; the {state.done} "
                           f"cells finished so far are kept, and the same command again runs the other "
                           f"{state.total - state.done}") from exc


def _run_ray(chains: list[list[CellSpec]], run_dir: str, workers: int, address: str | None, state: Progress,
             progress, audit: AuditPolicy) -> None:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the ray executor needs the `ray` extra: pip install 'ragleak[ray]'") from exc
    from ragleak.grid.ray_actors import run_on_actors

    started_here = not ray.is_initialized()  # a caller's Ray session (a benchmark, a notebook) is reused
    if started_here:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        # Ray starts its workers 15 nice levels below the raylet by default, so on a shared machine
        # the actors lose to every other process; a local pool worker runs at the coordinator's
        # priority, and so does an actor here
        os.environ.setdefault("RAY_worker_niceness", "0")
        try:
            ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                     log_to_driver=False, runtime_env={"env_vars": {"RAGLEAK_THREADS": "1"}})
        except Exception as exc:  # Ray raises a bare Exception when its node does not come up
            ray.shutdown()  # what did start (GCS, agents) would outlive this process
            # seen on a saturated 2-core machine: Ray's agents missed the raylet's 15 s start window
            raise RagleakError(f"Ray did not start ({exc}); on a busy machine use --executor local, or start a "
                               "cluster first (`ray start --head`) and pass its --address") from exc

    def add(record: CellRecord) -> None:
        state.add(record)
        if progress:
            progress(state)

    try:
        # long-lived actors, one loaded stack each, fed stream by stream (grid.ray_actors)
        done = run_on_actors(ray, chains, run_dir, workers, audit, execute_cell, add)
        state.worker_restarts += done.restarts
        state.workers = done.workers
    finally:
        if started_here:
            ray.shutdown()
