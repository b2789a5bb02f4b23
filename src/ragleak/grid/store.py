"""The run directory: one JSON record per cell, written atomically; errors are records too.

Layout::

    RUN_DIR/plan.json              the grid config and the planned cell ids
    RUN_DIR/cells/<cell_id>.json   one CellRecord per finished cell (status ok, partial, failed or error)
    RUN_DIR/transcripts/<id>.json  the attack transcript of each cell that ran its attack
    RUN_DIR/cells.jsonl            all records, one per line, rebuilt from cells/ at the end

A cell's record is assembled here (``measured_record``, ``error_record``) and written by
``RunStore.write_cell``. A cell counts as finished exactly when its record file exists; the record
is written last (after its transcript) with a temp file + rename, so a run killed at any instant
leaves each cell either finished or absent, never half-written, and a resume neither loses nor
duplicates a cell.

Each record carries a SHA-256 of its own JSON (without the checksum field). A record that does not
parse or fails its checksum (a disk error, a hand edit) is logged, listed in ``RunStore.corrupt``
and treated as unfinished: a resume reruns the cell and replaces the file, and a report counts it.
"""

from __future__ import annotations

import json
import logging
import platform
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragleak.errors import RagleakError
from ragleak.files import atomic_write_text
from ragleak.grid.failure import Failure, of_exception, of_transcript
from ragleak.grid.spec import CellSpec, GridConfig
from ragleak.metrics.base import MetricResult
from ragleak.records import digest
from ragleak.stack import Usage

if TYPE_CHECKING:
    from ragleak.attacks.base import Transcript
    from ragleak.defenses.base import Defense

log = logging.getLogger(__name__)

# 2: metrics are MetricResults from the registry (ragleak.metrics.compute); counts
# 3: the stack's model use in one ``usage`` (``stack.Usage``) instead of flat fields and ``*_model_s`` timings
CELL_SCHEMA_VERSION = 3
#: The schemas a record is read in: schema 2 is migrated on reading (``CellRecord._migrate``).
READABLE_SCHEMAS = (2, CELL_SCHEMA_VERSION)

#: The flat fields a record before schema 3 kept the stack's model use in.
_FLAT_USAGE = ("model_calls", "cache_hits", "calls_by_role", "cache_repairs", "cache_waited", "cache_takeovers")
_MODEL_S = "_model_s"  # a record before schema 3 kept each role's model seconds as timings["<role>_model_s"]


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
        default_factory=dict, description="hook -> {changed, calls (audited), reordered, releases} (+ unaudited, where "
                                          "the audit skipped some; + channel_calls, channel_changed, channel_reordered, "
                                          "channel_unmeasured: the per-channel effect, absent in older records)")
    audit: dict[str, Any] = Field(
        default_factory=dict, description="the audit policy the cell ran under and its generate-hook references "
                                          "(mode, fraction, references {generated, cached, skipped}, audited_share)")
    guarantee: dict[str, Any] = Field(default_factory=dict)
    defense_state: dict[str, Any] = Field(default_factory=dict, description="what the defense did (private-rag: U(t) log)")
    usage: Usage = Field(default_factory=Usage, description="the cell stack's model use (Stack.usage)")
    timings: dict[str, float] = Field(default_factory=dict)
    engine: dict[str, str] = Field(default_factory=dict)
    error: str | None = None
    failure: Failure | None = Field(default=None, description="why a failed or error cell has no readings: "
                                    "kind (http_status, timeout, ...), detail, HTTP status (grid.failure)")
    traceback: str | None = None
    checksum: str | None = Field(default=None, description="SHA-256 of the stored JSON without this field")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """A record written before schema 3 (a finished run resumed or reported, or one committed
        with its results) loads as a schema-3 record: its flat model-use fields and its timings'
        ``<role>_model_s`` become ``usage``; nothing else changes."""
        if not isinstance(data, dict) or data.get("schema_version", CELL_SCHEMA_VERSION) >= 3:
            return data
        data = dict(data)
        timings = dict(data.get("timings") or {})
        usage = {k: data.pop(k) for k in _FLAT_USAGE if k in data}
        usage["model_seconds"] = {k.removesuffix(_MODEL_S): timings.pop(k) for k in list(timings) if k.endswith(_MODEL_S)}
        return {**data, "timings": timings, "usage": usage, "schema_version": CELL_SCHEMA_VERSION}


def transcript_status(transcript: "Transcript", min_share: float) -> CellStatus:
    """The status a transcript's cell gets: ``failed`` when the session was stopped on sustained
    errors (it measured too little to read, whatever share answered), else by its query counts."""
    return "failed" if transcript.stopped else QueryCounts.of(transcript).status(min_share)


def measured_record(spec: CellSpec, transcript: "Transcript", metrics: dict[str, MetricResult],
                    defense: "Defense | None", min_share: float, *, usage: Usage | None = None,
                    audit: dict[str, Any] | None = None, timings: dict[str, float] | None = None) -> CellRecord:
    """The record of a cell whose attack ran: its metrics (``measure.run_attack``), counts by
    outcome, the status they give (``transcript_status``), the release fingerprint, the defense's
    hook summary, guarantee and state, and the stack's model use (none: not known here, as for a
    transcript scored after the fact). ``defense`` None: a scored transcript (``grid.scored``),
    whose target's defense and guarantee are not known here."""
    status = transcript_status(transcript, min_share)
    return CellRecord(
        cell_id=spec.cell_id, spec=spec, status=status, error=transcript.stopped,
        failure=of_transcript(transcript) if status == "failed" else None,
        metrics=metrics, counts=QueryCounts.of(transcript), release_digest=transcript.release_digest(),
        hook_summary=_hook_summary(transcript), audit=audit or {},
        guarantee=defense.guarantee().model_dump(mode="json") if defense else {},
        defense_state={} if defense is None else dict(defense.state()), usage=usage or Usage(), timings=timings or {},
        engine=_engine())


def error_record(spec: CellSpec, exc: BaseException, total_s: float) -> CellRecord:
    """The record of a cell that crashed: the error, its kind (``grid.failure.of_exception``: an
    endpoint's HTTP status, a timeout, a refused connection, else the exception's first line) and
    its traceback."""
    return CellRecord(cell_id=spec.cell_id, spec=spec, status="error", error=f"{type(exc).__name__}: {exc}",
                      failure=of_exception(exc),
                      traceback="".join(traceback.format_exception(exc)), timings={"total_s": total_s},
                      engine=_engine())


def _hook_summary(transcript: "Transcript") -> dict[str, dict[str, int]]:
    """Per hook, the own-output counts and the per-channel effect counts of the cell's calls
    (``audit.trace.tally``: Table I reads the channel counts where a row has them)."""
    from ragleak.audit.trace import tally

    return dict(tally(h for q in transcript.queries if q.trace is not None for h in q.trace.hooks))


def _engine() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("ragleak", "llama-cpp-python", "faiss-cpu", "onnxruntime"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


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
        # the labels let a report name a planned cell whose record is missing
        atomic_write_text(plan_path, json.dumps({"config": config.model_dump(mode="json"), "cell_ids": ids,
                                                 "labels": {c.cell_id: c.label for c in cells}}, indent=2))

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
        """The record alone (its transcript, if any, is written already: ``write_cell``)."""
        self.write_cell(record)

    def write_transcript(self, cell_id: str, text: str) -> None:
        atomic_write_text(self.transcript_path(cell_id), text)

    def write_cell(self, record: CellRecord, transcript: "Transcript | None" = None) -> CellRecord:
        """A finished cell: its transcript first (the record's ``transcript_digest`` is its digest),
        then its record, last: the cell counts as finished once both are on disk. Returns the
        record as written."""
        if transcript is not None:
            text = transcript.to_json()
            record = record.model_copy(update={"transcript_digest": digest(text)})
            atomic_write_text(self.transcript_path(record.cell_id), text)
        data = json.loads(record.model_dump_json(exclude={"checksum"}))
        data["checksum"] = record_checksum(data)
        atomic_write_text(self.record_path(record.cell_id), json.dumps(data, indent=2, ensure_ascii=False))
        return record

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
