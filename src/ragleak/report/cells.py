"""The cell records a report reads, and the conditions that pair a defended cell with its baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragleak.errors import RagleakError
from ragleak.grid.failure import Failure, classify, first_line
from ragleak.grid.store import CELL_SCHEMA_VERSION, MEASURED, READABLE_SCHEMAS, CellRecord, RunStore

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


def planned_cells(run_dir: Path) -> dict[str, str]:
    """The run plan's cells: id -> label (the id itself where the plan predates labels)."""
    try:
        plan = json.loads((Path(run_dir) / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RagleakError(f"{run_dir}/plan.json cannot be read ({exc}); the report cannot tell which cells "
                           "were planned") from exc
    labels = plan.get("labels") or {}
    return {cell_id: str(labels.get(cell_id, cell_id)) for cell_id in plan.get("cell_ids", [])}


def incomplete_cells(run_dir: Path, records: list[CellRecord]) -> list[dict[str, Any]]:
    """Every planned cell that gave no readings, with its reason: ``missing`` (no record),
    ``corrupt`` (a record that does not parse or fails its checksum), ``error`` (the cell
    crashed) or ``failed`` (too few queries answered); each row carries ``failure``
    (``grid.failure.Failure`` as JSON) and ``reason`` (the failure in words)."""
    planned = planned_cells(run_dir)
    present = {r.cell_id: r for r in records}
    corrupt = {row["cell_id"]: row["problem"] for row in corrupt_records(run_dir)}
    out = []
    for cell_id, label in planned.items():
        record = present.get(cell_id)
        if record is not None and record.status in MEASURED:
            continue
        if record is not None:
            failure = record.failure or _legacy_failure(record)
            label, status = record.spec.label, record.status
        elif cell_id in corrupt:
            failure, status = Failure(kind="corrupt", detail=corrupt[cell_id]), "corrupt"
        else:
            failure, status = Failure(kind="missing", detail=f"no record cells/{cell_id}.json"), "missing"
        out.append({"cell_id": cell_id, "label": label, "status": status, "failure": failure.model_dump(),
                    "reason": failure.reason})
    return out


def _legacy_failure(record: CellRecord) -> Failure:
    """A record written before cells carried a ``failure``: read from its error text."""
    if record.status == "error":
        kind, status = classify(record.error or "")
        return Failure(kind=kind, status=status, detail=first_line(record.error or "no error text recorded"))
    counts = record.counts
    text = record.error or "too few queries answered"
    kind, status = classify(text)
    return Failure(kind=kind, status=status, detail=first_line(text),
                   queries=None if counts is None else counts.queries,
                   queries_failed=None if counts is None else counts.errors)
