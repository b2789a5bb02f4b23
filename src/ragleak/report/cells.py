"""The cell records a report reads, and the conditions that pair a defended cell with its baseline."""

from __future__ import annotations

import json
from pathlib import Path

from ragleak.errors import RagleakError
from ragleak.grid.store import CELL_SCHEMA_VERSION, CellRecord, RunStore

BASELINE = "none"


def condition_key(r: CellRecord) -> tuple:
    """What a defended cell shares with the baseline cell it is compared with."""
    s = r.spec
    return (s.attack, s.corpus, s.mode, s.epsilon, s.seed, s.budget)


def load_run(run_dir: Path) -> list[CellRecord]:
    store = RunStore(run_dir)
    if not (Path(run_dir) / "plan.json").exists():
        raise RagleakError(f"{run_dir} is not a ragleak run directory (no plan.json); run `ragleak grid --out DIR` first")
    for path in sorted(store.cells_dir.glob("*.json"))[:1]:
        try:
            version = json.loads(path.read_text(encoding="utf-8")).get("schema_version")
        except ValueError:
            continue  # a half-written record: the store treats it as unfinished
        if version != CELL_SCHEMA_VERSION:
            # an older record's metrics are not MetricResults: reading it as "no cells" would hide the run
            raise RagleakError(f"{run_dir} holds cell records of schema {version}; this ragleak reads schema "
                               f"{CELL_SCHEMA_VERSION}: rerun the grid into a new --out directory")
    return store.records()
