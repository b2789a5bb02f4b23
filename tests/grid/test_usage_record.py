"""A stack's model use is one frozen record (``Stack.usage``), which a cell record carries whole
(``CellRecord.usage``); records written before it (schema 2: flat fields, ``<role>_model_s``
timings) load as schema-3 records with the same numbers, and the report reads them alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragleak.errors import RagleakError
from ragleak.grid import cell as cell_module
from ragleak.grid.cell import execute_cell
from ragleak.grid.spec import CellSpec, GridConfig
from ragleak.grid.store import CELL_SCHEMA_VERSION, CellRecord, RunStore, parse_record, record_checksum
from ragleak.rag.prompt import ChatMessage
from ragleak.report.summary import summarize
from ragleak.stack import Usage
from ragleak.testing import copy_context, tiny_stack


def test_usage_counts_every_role_in_one_frozen_record(tmp_path):
    stack = tiny_stack(tmp_path / "cache.sqlite", target="an answer", attacker="a question")
    ask = [ChatMessage(role="user", content="who?")]
    stack.generator("target").generate(ask)
    stack.generator("target").generate(ask)  # the same prompt again: a hit, and a repeat
    stack.generator("attacker").generate(ask)  # another model id: its own miss
    usage = stack.usage()
    assert (usage.model_calls, usage.cache_hits, usage.cache_waited, usage.cache_repairs, usage.cache_takeovers) == (
        2, 1, 0, 0, 0)
    assert usage.calls_by_role == {
        "target": {"model_calls": 1, "cache_hits": 1, "cache_waited": 0, "cache_repeats": 1},
        "attacker": {"model_calls": 1, "cache_hits": 0, "cache_waited": 0, "cache_repeats": 0}}
    assert set(usage.model_seconds) == {"target", "attacker"} and all(s >= 0 for s in usage.model_seconds.values())
    with pytest.raises(ValidationError):
        usage.model_calls = 0  # type: ignore[misc]
    assert Usage.model_validate_json(usage.model_dump_json()) == usage


SPEC = CellSpec(attack="ps", defense="none", corpus="synthetic-corp", budget=2, corpus_params={"n_docs": 4})


def test_a_cell_record_carries_its_stacks_usage(tmp_path, monkeypatch):
    stacks = []

    def scripted(spec, run_dir):
        stacks.append(tiny_stack(Path(run_dir) / "generations.sqlite", target=copy_context))
        return stacks[-1]

    monkeypatch.setattr(cell_module, "cell_stack", scripted)
    RunStore(tmp_path).init(GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"]), [SPEC])
    record = execute_cell(SPEC, str(tmp_path))
    assert record.status == "ok", record.traceback
    assert record.usage == stacks[0].usage() and record.usage.model_calls == 2
    assert not any(k.endswith("_model_s") for k in record.timings)
    stored = json.loads(RunStore(tmp_path).record_path(SPEC.cell_id).read_text())
    assert stored["schema_version"] == CELL_SCHEMA_VERSION == 3 and stored["usage"]["model_calls"] == 2
    assert not {"model_calls", "cache_hits", "calls_by_role"} & set(stored)
    broken = SPEC.model_copy(update={"corpus_params": {"n_docs": -1}})  # the cell fails: an error record
    error = execute_cell(broken, str(tmp_path))
    assert error.status == "error" and error.usage == stacks[1].usage()


def _old_record(spec: CellSpec) -> dict:
    """A schema-2 record as the grid wrote it before ``usage`` (flat model use, model seconds in
    the timings), with its checksum."""
    data = {"schema_version": 2, "cell_id": spec.cell_id, "spec": spec.model_dump(mode="json"), "status": "ok",
            "metrics": {}, "counts": {"queries": 3, "answered": 3, "refused": 0, "errors": 0, "budget": 3},
            "model_calls": 5, "cache_hits": 4, "calls_by_role": {
                "target": {"model_calls": 3, "cache_hits": 4, "cache_waited": 1, "cache_repeats": 2},
                "attacker": {"model_calls": 2, "cache_hits": 0, "cache_waited": 0, "cache_repeats": 0}},
            "timings": {"setup_s": 0.5, "total_s": 9.0, "generation_s": 6.0, "target_model_s": 5.5,
                        "attacker_model_s": 1.25},
            "engine": {}, "cache_repairs": 1, "cache_waited": 1, "cache_takeovers": 2}
    data["checksum"] = record_checksum(data)
    return data


def test_a_record_written_before_usage_loads_with_the_same_numbers(tmp_path):
    record = parse_record(json.dumps(_old_record(SPEC)))
    assert record.schema_version == CELL_SCHEMA_VERSION
    assert record.usage == Usage(
        model_calls=5, cache_hits=4, cache_repairs=1, cache_waited=1, cache_takeovers=2,
        calls_by_role={"target": {"model_calls": 3, "cache_hits": 4, "cache_waited": 1, "cache_repeats": 2},
                       "attacker": {"model_calls": 2, "cache_hits": 0, "cache_waited": 0, "cache_repeats": 0}},
        model_seconds={"target": 5.5, "attacker": 1.25})
    assert record.timings == {"setup_s": 0.5, "total_s": 9.0, "generation_s": 6.0}
    store = RunStore(tmp_path)
    store.cells_dir.mkdir(parents=True)
    store.write(record)  # written again, it is written in the new layout
    stored = json.loads(store.record_path(SPEC.cell_id).read_text())
    assert stored["usage"]["model_seconds"] == {"target": 5.5, "attacker": 1.25} and "model_calls" not in stored
    assert store.read(SPEC.cell_id).model_dump(exclude={"checksum"}) == record.model_dump(exclude={"checksum"})


def test_the_report_reads_old_and_new_records_alike(tmp_path):
    other = SPEC.model_copy(update={"seed": 1})
    store = RunStore(tmp_path)
    store.init(GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"], seeds=[0, 1]), [SPEC, other])
    store.record_path(SPEC.cell_id).write_text(json.dumps(_old_record(SPEC)), encoding="utf-8")
    alone = summarize(tmp_path)  # a run written before schema 3 only
    assert (alone["cells"], alone["model_calls"], alone["cache_waited"]) == (1, 5, 1)
    store.write(CellRecord(cell_id=other.cell_id, spec=other, status="error", error="x",
                           usage=Usage(model_calls=1, cache_hits=2, cache_waited=2)))
    assert [r.cell_id for r in store.records()] == sorted([SPEC.cell_id, other.cell_id]) and not store.corrupt
    summary = summarize(tmp_path)
    assert (summary["model_calls"], summary["cache_hits"], summary["cache_waited"]) == (6, 6, 3)
    assert (summary["cache_repairs"], summary["cache_takeovers"]) == (1, 2)
    rows = {c["cell_id"]: c for c in summary["cells_table"]}
    assert (rows[SPEC.cell_id]["model_calls"], rows[other.cell_id]["model_calls"]) == (5, 1)


def test_a_run_of_schema_1_records_is_still_refused(tmp_path):
    store = RunStore(tmp_path)
    store.init(GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"]), [SPEC])
    store.record_path(SPEC.cell_id).write_text(json.dumps({**_old_record(SPEC), "schema_version": 1}), encoding="utf-8")
    with pytest.raises(RagleakError, match="schema 1"):
        summarize(tmp_path)


def test_a_cell_whose_metrics_fail_keeps_its_transcript(tmp_path, monkeypatch):
    """The attack's queries are paid for: a metric that raises makes an error record, and the
    transcript is on disk beside it (written first, as before the metrics moved into run_attack)."""
    import ragleak.measure as measure

    def broken(transcript, context):
        raise RuntimeError("a metric failed")

    monkeypatch.setattr(cell_module, "cell_stack",
                        lambda spec, run_dir: tiny_stack(Path(run_dir) / "generations.sqlite", target=copy_context))
    monkeypatch.setattr(measure, "compute_metrics", broken)
    RunStore(tmp_path).init(GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"]), [SPEC])
    record = execute_cell(SPEC, str(tmp_path))
    assert record.status == "error" and "a metric failed" in (record.error or "")
    path = RunStore(tmp_path).transcript_path(SPEC.cell_id)
    assert path.exists() and len(json.loads(path.read_text())["queries"]) == 2
    assert record.usage.model_calls == 2
