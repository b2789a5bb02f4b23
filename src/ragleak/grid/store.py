"""The run directory: one JSON record per cell, written atomically; errors are records too.

Layout::

    RUN_DIR/plan.json              the grid config and the planned cell ids
    RUN_DIR/cells/<cell_id>.json   one CellRecord per finished cell (status ok, partial, failed or error)
    RUN_DIR/transcripts/<id>.json  the attack transcript of each cell that ran its attack
    RUN_DIR/cells.jsonl            all records, one per line, rebuilt from cells/ at the end

A cell counts as finished exactly when its record file exists; the record is written last (after
its transcript) with a temp file + rename, so a run killed at any instant leaves each cell either
finished or absent, never half-written, and a resume neither loses nor duplicates a cell.

Each record carries a SHA-256 of its own JSON (without the checksum field). A record that does not
parse or fails its checksum (a disk error, a hand edit) is logged, listed in ``RunStore.corrupt``
and treated as unfinished: a resume reruns the cell and replaces the file, and a report counts it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragleak.errors import RagleakError
from ragleak.grid.spec import CellSpec, GridConfig
from ragleak.files import atomic_write_text
from ragleak.metrics.base import MetricResult
from ragleak.records import digest

log = logging.getLogger(__name__)

log = logging.getLogger(__name__)

CELL_SCHEMA_VERSION = 2  # 2: metrics are MetricResults from the registry (ragleak.metrics.compute); counts


#: A finished cell: ``ok`` (every query answered or refused), ``partial`` (some queries failed;
#: its metrics rest on the rest, with their n), ``failed`` (too few queries answered to read it:
#: kept out of every aggregate), ``error`` (the cell itself crashed: no transcript).
CellStatus = Literal["ok", "partial", "failed", "error"]
#: The statuses whose metrics enter aggregates (levels, deltas, Table II).
MEASURED: tuple[CellStatus, ...] = ("ok", "partial")


class QueryCounts(BaseModel):
    """A cell's queries by outcome: answered, refused (the target declined) and failed (``errors``)."""

    model_config = ConfigDict(extra="forbid")

    queries: int = Field(ge=0)
    answered: int = Field(ge=0, description="responses, refusals excluded")
    refused: int = Field(default=0, ge=0)
    errors: int = Field(ge=0, description="failed queries: never scored")
    budget: int | None = Field(default=None, ge=0, description="the queries the attack could send (the cell's budget "
                                                               "or the attack's default): fewer sent = it ended on its own")

    @classmethod
    def of(cls, transcript) -> "QueryCounts":
        n = transcript.outcomes()
        return cls(queries=len(transcript.queries), answered=n["answered"], refused=n["refused"], errors=n["failed"],
                   budget=transcript.budget)

    def status(self, min_answered_share: float) -> CellStatus:
        """``failed`` when fewer than ``min_answered_share`` of the queries got a response (a
        refusal is a response), or when no query was made; else ``partial`` when any failed."""
        responded = self.answered + self.refused
        if self.queries == 0 or responded < min_answered_share * self.queries:
            return "failed"
        return "partial" if self.errors else "ok"


class CellRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = CELL_SCHEMA_VERSION
    cell_id: str
    spec: CellSpec
    status: CellStatus
    metrics: dict[str, MetricResult] = Field(default_factory=dict, description="key (name or name[part]) -> reading")
    counts: QueryCounts | None = Field(default=None, description="the attack's queries (None: the cell failed)")
    transcript_digest: str | None = None
    release_digest: str | None = Field(default=None, description="Transcript.release_digest: the dedup fingerprint")
    hook_summary: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="hook -> {changed, calls (audited)} (+ unaudited, where the audit skipped some)")
    audit: dict[str, Any] = Field(
        default_factory=dict, description="the audit policy the cell ran under and its generate-hook references "
                                          "(mode, fraction, references {generated, cached, skipped}, audited_share)")
    guarantee: dict[str, Any] = Field(default_factory=dict)
    defense_state: dict[str, Any] = Field(default_factory=dict, description="what the defense did (private-rag: U(t) log)")
    model_calls: int = 0
    cache_hits: int = 0
    calls_by_role: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="role (target, attacker, standard) -> {model_calls, cache_hits, cache_waited, cache_repeats}")
    timings: dict[str, float] = Field(default_factory=dict)
    engine: dict[str, str] = Field(default_factory=dict)
    error: str | None = None
    traceback: str | None = None
    cache_repairs: int = Field(default=0, description="corrupt cache entries discarded and regenerated")
    cache_waited: int = Field(default=0, description="cache hits served after waiting on another worker's "
                                                     "in-progress generation of the same prompt (part of cache_hits)")
    cache_takeovers: int = Field(default=0, description="in-progress claims of dead or silent workers taken over "
                                                        "(each may have repeated a generation)")
    checksum: str | None = Field(default=None, description="SHA-256 of the stored JSON without this field")


class CorruptRecordError(ValueError):
    """A cell record file that does not parse or fails its checksum."""


def record_checksum(data: dict[str, Any]) -> str:
    return digest({k: v for k, v in data.items() if k != "checksum"})


def parse_record(text: str) -> CellRecord:
    """A stored record, checked against its checksum; raises ``CorruptRecordError``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CorruptRecordError(f"not JSON ({exc})") from exc
    if not isinstance(data, dict) or not data.get("checksum"):
        raise CorruptRecordError("no checksum")
    if data["checksum"] != record_checksum(data):
        raise CorruptRecordError("checksum mismatch")
    try:
        return CellRecord.model_validate(data)
    except ValidationError as exc:
        raise CorruptRecordError(f"not a cell record ({exc.error_count()} errors)") from exc


class RunStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.cells_dir = self.root / "cells"
        self.transcripts_dir = self.root / "transcripts"
        self.corrupt: dict[str, str] = {}  # cell id -> what is wrong with its record file

    def init(self, config: GridConfig, cells: list[CellSpec]) -> None:
        """Create the run directory, or check that an existing one holds the same grid.

        A folder planned for another grid is taken over only when none of its cells outside this
        grid produced a result (they are error records: a bad name, a bad parameter), so fixing a
        config and rerunning on the same ``--out`` works; results of another grid are never mixed in.
        """
        self.cells_dir.mkdir(parents=True, exist_ok=True)
        self.transcripts_dir.mkdir(parents=True, exist_ok=True)
        plan_path = self.root / "plan.json"
        ids = [c.cell_id for c in cells]
        if plan_path.exists():
            try:
                old = json.loads(plan_path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise RagleakError(f"{plan_path} is corrupt: {exc}") from exc
            if sorted(old.get("cell_ids", [])) == sorted(ids):
                return
            self._drop_stale_errors(set(ids))
        atomic_write_text(plan_path, json.dumps({"config": config.model_dump(mode="json"), "cell_ids": ids}, indent=2))

    def _drop_stale_errors(self, keep: set[str]) -> None:
        """Remove the error records of cells outside ``keep``; raise if any such cell holds a result."""
        stale = [p for p in self.cells_dir.glob("*.json") if p.stem not in keep]
        stale_results = [p for p in stale if (r := self.read(p.stem)) is None or r.status != "error"]
        stale_results += [p for p in self.transcripts_dir.glob("*.json") if p.stem not in keep]
        if stale_results:
            raise RagleakError(
                f"{self.root} holds results of a different grid ({len(stale_results)} files of cells not in this "
                "one: the config, the corpus content or a plugin version differs); use a new --out directory, "
                "or the same config and corpus to resume")
        for path in stale:
            path.unlink()
        if stale:
            log.warning("%s: removed %d error records of cells no longer in the grid", self.root, len(stale))

    def record_path(self, cell_id: str) -> Path:
        return self.cells_dir / f"{cell_id}.json"

    def transcript_path(self, cell_id: str) -> Path:
        return self.transcripts_dir / f"{cell_id}.json"

    def read(self, cell_id: str) -> CellRecord | None:
        path = self.record_path(cell_id)
        if not path.exists():
            return None
        try:
            record = parse_record(path.read_text(encoding="utf-8", errors="replace"))
        except CorruptRecordError as exc:
            # corrupt = unfinished: the cell is rerun and the file replaced; never silently dropped
            if cell_id not in self.corrupt:
                log.warning("cell record %s is corrupt (%s); the cell counts as not run", path, exc)
            self.corrupt[cell_id] = str(exc)
            return None
        self.corrupt.pop(cell_id, None)
        return record

    def write(self, record: CellRecord) -> None:
        data = json.loads(record.model_dump_json(exclude={"checksum"}))
        data["checksum"] = record_checksum(data)
        atomic_write_text(self.record_path(record.cell_id), json.dumps(data, indent=2, ensure_ascii=False))

    def write_transcript(self, cell_id: str, text: str) -> None:
        atomic_write_text(self.transcript_path(cell_id), text)

    def records(self) -> list[CellRecord]:
        out = []
        for path in sorted(self.cells_dir.glob("*.json")):
            record = self.read(path.stem)
            if record is not None:
                out.append(record)
        return out

    def pending(self, cells: list[CellSpec], retry_errors: bool = False) -> list[CellSpec]:
        todo = []
        for cell in cells:
            record = self.read(cell.cell_id)
            if record is None or (retry_errors and record.status in ("error", "failed")):
                todo.append(cell)
        return todo

    def write_cells_jsonl(self) -> Path:
        path = self.root / "cells.jsonl"
        atomic_write_text(path, "".join(r.model_dump_json() + "\n" for r in self.records()))
        return path
