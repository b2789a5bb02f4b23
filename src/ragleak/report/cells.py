"""The cell records a report reads, and the conditions that pair a defended cell with its baseline."""

from __future__ import annotations

from pathlib import Path

from ragleak.errors import RagleakError
from ragleak.grid.store import CellRecord, RunStore

BASELINE = "none"


def condition_key(r: CellRecord) -> tuple:
    """What a defended cell shares with the baseline cell it is compared with."""
    s = r.spec
    return (s.attack, s.corpus, s.mode, s.epsilon, s.seed, s.budget)


def load_run(run_dir: Path) -> list[CellRecord]:
    store = RunStore(run_dir)
    if not (Path(run_dir) / "plan.json").exists():
        raise RagleakError(f"{run_dir} is not a ragleak run directory (no plan.json); run `ragleak grid --out DIR` first")
    return store.records()
