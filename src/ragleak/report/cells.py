"""The cell records a report reads, and the conditions that pair a defended cell with its baseline."""

from __future__ import annotations

import json
from pathlib import Path

from ragleak.errors import RagleakError
from ragleak.grid.store import CELL_SCHEMA_VERSION, READABLE_SCHEMAS, CellRecord, RunStore

BASELINE = "none"


def condition_key(r: CellRecord) -> tuple:
    """What a defended cell shares with the baseline cell it is compared with."""
    s = r.spec
    return (s.attack, s.corpus, s.mode, s.epsilon, s.seed, s.budget)


def load_run(run_dir: Path) -> list[CellRecord]:
    """The run's readable cell records (corrupt ones are left out here and listed by ``corrupt_records``)."""
    store = RunStore(run_dir)
    if not (Path(run_dir) / "plan.json").exists():
        raise RagleakError(f"{run_dir} is not a ragleak run directory (no plan.json); run `ragleak grid --out DIR` first")
    versions = set()
    for path in sorted(store.cells_dir.glob("*.json")):
        try:
            versions.add(json.loads(path.read_text(encoding="utf-8")).get("schema_version"))
        except (ValueError, AttributeError):
            continue  # a corrupt record: the store reports it and a resume reruns it
    if versions and not versions & set(READABLE_SCHEMAS):
        # a schema-1 record's metrics are not MetricResults: reading it as "no cells" would hide the run
        version = sorted(versions, key=str)[0]
        raise RagleakError(f"{run_dir} holds cell records of schema {version}; this ragleak reads schema "
                           f"{CELL_SCHEMA_VERSION}: rerun the grid into a new --out directory")
    return store.records()


def corrupt_records(run_dir: Path) -> list[dict[str, str]]:
    """Cell records that do not parse or fail their checksum: reported, and rerun by a resume."""
    store = RunStore(run_dir)
    store.records()
    return [{"cell_id": cell_id, "problem": problem} for cell_id, problem in sorted(store.corrupt.items())]
