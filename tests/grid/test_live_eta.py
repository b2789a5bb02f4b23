"""The live ETA (``runner.Progress.eta_s``): the estimates of the cells left, scaled by how the
finished cells ran against their own estimates, shared by the workers (a fake clock)."""

from __future__ import annotations

import pytest

from ragleak.grid.runner import Progress
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import CellRecord

CELLS = GridConfig(attacks=["ps"], defenses=["none"], seeds=[0, 1, 2, 3], budget=2, corpora=["synthetic-corp"],
                   corpus_params={"synthetic-corp": {"n_docs": 12}}).expand()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(cell) -> CellRecord:
    return CellRecord(cell_id=cell.cell_id, spec=cell, status="ok")


def _progress(clock, slots=1) -> Progress:
    estimates = {c.cell_id: s for c, s in zip(CELLS, (40.0, 30.0, 20.0, 10.0))}
    return Progress(total=4, done=0, estimates=estimates, slots=slots, clock=clock)


def test_before_any_cell_the_eta_is_the_estimate_and_cells_at_twice_their_estimate_double_it():
    clock = Clock()
    state = _progress(clock)
    assert state.eta_s == pytest.approx(100.0)
    for cell, seconds in zip(CELLS[:2], (40.0, 30.0)):  # the costliest cells first, each at 2x
        state.begin(cell.cell_id)
        clock.now += 2 * seconds
        state.add(_record(cell))
    # 20 + 10 estimated seconds left, at the 2x measured so far; a mean per cell (70 s) would say 140
    assert state.eta_s == pytest.approx(60.0)
    for cell, seconds in zip(CELLS[2:], (20.0, 10.0)):
        state.begin(cell.cell_id)
        clock.now += 2 * seconds
        state.add(_record(cell))
    assert state.eta_s == 0.0 and state.done == 4


def test_cells_at_their_estimate_keep_it_and_workers_share_what_is_left():
    clock = Clock()
    state = _progress(clock, slots=2)
    assert state.eta_s == pytest.approx(50.0)
    state.begin(CELLS[0].cell_id)
    clock.now += 40.0
    state.add(_record(CELLS[0]))
    assert state.eta_s == pytest.approx(30.0)  # (30 + 20 + 10) x 1.0 over 2 workers


def test_a_cell_not_seen_going_out_counts_its_own_timing():
    state = _progress(Clock())
    record = _record(CELLS[0]).model_copy(update={"timings": {"total_s": 120.0}})  # 3x its 40 s
    state.add(record)
    assert state.eta_s == pytest.approx(3 * 60.0)


def test_a_cell_the_cache_served_in_part_counts_only_the_estimate_of_the_work_it_did():
    from ragleak.stack import Usage

    clock = Clock()
    state = _progress(clock)
    state.begin(CELLS[0].cell_id)
    clock.now += 10.0  # 40 s estimated, but 3 of its 4 generations were another cell's, in the cache
    state.add(_record(CELLS[0]).model_copy(update={"usage": Usage(model_calls=1, cache_hits=3)}))
    # it did 10 s of its own 40 / 4 s: the machine runs at its estimates, and 60 s are left
    assert state.eta_s == pytest.approx(60.0)
