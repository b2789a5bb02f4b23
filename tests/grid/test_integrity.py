"""Corrupt state is never served: a flipped byte in the generation cache or in a cell record is
detected, the record reported and its cell rerun, and the healed run's metrics equal a clean run's.

The cells run on a ``tiny_stack`` (real embedder, FAISS and cache; a scripted target that copies
its context), so the test exercises the grid's store, cache and resume logic in seconds."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ragleak.grid import cell as cell_module
from ragleak.grid.runner import run_grid
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import RunStore
from ragleak.report.summary import summarize
from ragleak.testing import copy_context, tiny_stack

CONFIG = GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"], seeds=[0, 1], budget=4,
                    corpus_params={"synthetic-corp": {"n_docs": 12}})


@pytest.fixture(autouse=True)
def scripted_cells(monkeypatch):
    monkeypatch.setattr(cell_module, "cell_stack",
                        lambda spec, run_dir: tiny_stack(cache_path=Path(run_dir) / "generations.sqlite",
                                                         target=copy_context))


def _metrics(run: Path) -> dict[str, dict]:
    return {r.cell_id: {k: m.model_dump() for k, m in r.metrics.items()} for r in RunStore(run).records()}


def _flip_a_digit(path: Path, after: str) -> None:
    """Change one digit of the number that follows ``after``: the file stays valid JSON."""
    data = bytearray(path.read_bytes())
    at = data.index(after.encode())
    at += next(i for i, b in enumerate(data[at:]) if chr(b).isdigit())
    data[at] ^= 0x01  # '0' <-> '1', '2' <-> '3', ...
    path.write_bytes(bytes(data))


def test_flipped_bytes_in_cache_and_record_are_detected_and_healed(tmp_path):
    clean = tmp_path / "clean"
    run_grid(CONFIG, clean, workers=1)
    expected = _metrics(clean)
    assert len(expected) == 2

    run = tmp_path / "faulty"
    run_grid(CONFIG, run, workers=1)
    victim = sorted(expected)[0]
    _flip_a_digit(RunStore(run).record_path(victim), '"metrics"')
    with sqlite3.connect(run / "generations.sqlite") as conn:  # every cached answer now leaks nothing
        conn.execute("UPDATE generations SET generation = json_set(generation, '$.text', 'I do not know.')")
    conn.close()

    summary = summarize(run)  # the corrupt record is reported, not dropped without a word
    assert summary["cells"] == 1
    assert [c["cell_id"] for c in summary["corrupt_records"]] == [victim]
    assert summary["corrupt_records"][0]["problem"] == "checksum mismatch"

    state = run_grid(CONFIG, run, workers=1)  # resume: only the corrupt cell reruns
    assert state.ran == 1 and state.errors == 0
    assert _metrics(run) == expected
    healed = RunStore(run).read(victim)
    assert healed.usage.cache_repairs > 0 and healed.usage.cache_hits == 0  # no altered answer was served
    assert healed.usage.model_calls == healed.counts.queries
    assert state.cache_repairs == healed.usage.cache_repairs
    assert summarize(run)["corrupt_records"] == []


def test_an_unparsable_record_is_rerun(tmp_path):
    run = tmp_path / "run"
    run_grid(CONFIG, run, workers=1)
    expected = _metrics(run)
    victim = sorted(expected)[1]
    path = RunStore(run).record_path(victim)
    path.write_bytes(path.read_bytes()[:100])  # a torn write from outside ragleak
    store = RunStore(run)
    assert [c.cell_id for c in store.pending(CONFIG.expand())] == [victim]
    assert "not JSON" in store.corrupt[victim]
    assert run_grid(CONFIG, run, workers=1).ran == 1
    assert _metrics(run) == expected
    assert json.loads(path.read_text())["checksum"]
