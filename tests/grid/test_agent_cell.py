"""An agent attack in a grid cell takes its attacker LLM from the cell's stack: the cell's model
(not the default one), the run's generation cache (not one outside the run directory), and its
calls counted in the cell record."""

from __future__ import annotations

import sqlite3

import pytest

from ragleak.attacks.ikea import ANCHOR_SYSTEM, MUTATE_SYSTEM, QUERY_SYSTEM
from ragleak.grid.cell import cell_stack, execute_cell
from ragleak.grid.spec import CellSpec
from ragleak.grid.store import RunStore
from ragleak.rag.models import DEFAULT_MODEL, MODELS

pytestmark = pytest.mark.model

MODEL = "smollm2-135m"  # a non-default model, and the smallest installed one


def test_ikea_cell_uses_the_cells_model_and_cache_for_its_attacker(tmp_path, monkeypatch):
    assert MODEL != DEFAULT_MODEL
    home = tmp_path / "home"
    monkeypatch.setenv("RAGLEAK_HOME", str(home))  # where a default-stack cache would land
    run_dir = tmp_path / "run"
    spec = CellSpec(attack="ikea", defense="none", corpus="synthetic-corp", budget=2,
                    attack_params={"topic": "employee records", "n_anchors": 4, "n_questions": 2,
                                   "n_mutations": 3, "llm_max_tokens": 48},
                    corpus_params={"n_docs": 6}, stack={"model": MODEL, "decoding": {"max_tokens": 48}})
    RunStore(run_dir).cells_dir.mkdir(parents=True)
    RunStore(run_dir).transcripts_dir.mkdir(parents=True)

    assert cell_stack(spec, run_dir).generator("attacker").model_id == MODELS[MODEL].sha256
    record = execute_cell(spec, str(run_dir))
    assert record.status == "ok", record.traceback

    with sqlite3.connect(run_dir / "generations.sqlite") as db:
        rows = db.execute("SELECT model_id, prompt FROM generations").fetchall()
    attacker_systems = (ANCHOR_SYSTEM, QUERY_SYSTEM, MUTATE_SYSTEM)
    attacker_rows = [r for r in rows if any(s in r[1] for s in attacker_systems)]
    # every generation of the cell, the attacker's included, ran on the cell's model into the run's cache
    assert rows and {model_id for model_id, _ in rows} == {MODELS[MODEL].sha256}
    assert attacker_rows and len(attacker_rows) == record.usage.calls_by_role["attacker"]["model_calls"]
    assert len(rows) == record.usage.model_calls
    assert record.usage.model_calls == sum(r["model_calls"] for r in record.usage.calls_by_role.values())
    assert set(record.usage.calls_by_role) == {"target", "attacker"}
    # the attacker's model time is recorded beside the target's (its calls are outside the generate hook)
    assert record.usage.model_seconds["attacker"] > 0 and record.usage.model_seconds["target"] > 0
    transcript = RunStore(run_dir).transcript_path(spec.cell_id).read_text(encoding="utf-8")
    assert '"attacker_calls": %d' % sum(record.usage.calls_by_role["attacker"].values()) in transcript
    assert not (home / "generations.sqlite").exists()  # nothing went to a cache outside the run
