"""A local pool worker that dies abruptly (a native crash, a kill from outside) ends the run with
one clear error naming the cell it was running; the cells finished before it are kept and the
same run again finishes the rest, none twice."""

from __future__ import annotations

import os

import pytest

from ragleak.errors import RagleakError
from ragleak.grid import runner as runner_module
from ragleak.grid.runner import run_grid
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import CellRecord, RunStore

CONFIG = GridConfig(attacks=["ps"], defenses=["none", "dp-retrieval"], corpora=["synthetic-corp"],
                    epsilons=[1.0, 5.0], budget=2, corpus_params={"synthetic-corp": {"n_docs": 12}})


def _record(spec, run_dir, audit):
    """An error record stands in for a measured one: no model is loaded here."""
    record = CellRecord(cell_id=spec.cell_id, spec=spec, status="error", error="stand-in")
    RunStore(run_dir).write(record)
    return record


def _crash_on_eps5(spec, run_dir, audit):
    """Runs in a spawned worker: dies like a SIGILL'd process on one cell, records the others."""
    if spec.defense == "dp-retrieval" and spec.epsilon == 5.0:
        os._exit(132)
    return _record(spec, run_dir, audit)


def test_a_dead_worker_is_one_clear_error_and_the_rerun_finishes_the_rest(tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr(runner_module, "execute_cell", _crash_on_eps5)
    with pytest.raises(RagleakError, match=r"worker process died abruptly while running .*dp-retrieval.*eps=5") as err:
        run_grid(CONFIG, out, workers=2)
    assert "the same command again" in str(err.value)
    kept = {r.cell_id for r in RunStore(out).records()}
    assert kept and len(kept) < len(CONFIG.expand())

    ran = []
    monkeypatch.setattr(runner_module, "execute_cell",
                        lambda spec, run_dir, audit: ran.append(spec.cell_id) or _record(spec, run_dir, audit))
    run_grid(CONFIG, out, workers=1, retry_errors=False)
    assert set(ran).isdisjoint(kept) and len(ran) == len(set(ran))
    assert {r.cell_id for r in RunStore(out).records()} == {c.cell_id for c in CONFIG.expand()}
