"""The report is published as a whole: a report that fails (or is killed) half-way leaves the
previous report intact and no temp files among the report files; the next report cleans up."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from ragleak.grid import cell as cell_module
from ragleak.grid.runner import run_grid
from ragleak.grid.spec import GridConfig
from ragleak.report import build, ci
from ragleak.testing import copy_context, tiny_stack

CONFIG = GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"], budget=3,
                    corpus_params={"synthetic-corp": {"n_docs": 8}})


@pytest.fixture
def run(tmp_path, monkeypatch) -> Path:
    out = tmp_path / "run"
    monkeypatch.setattr(cell_module, "cell_stack", lambda spec, run_dir: tiny_stack(
        cache_path=Path(run_dir) / "generations.sqlite", target=copy_context))
    run_grid(CONFIG, out, workers=1)
    # close the run's cache connections now: SQLite checkpoints the WAL into generations.sqlite
    # when the last one closes, and a collection during the report would look like a report write
    gc.collect()
    return out


def _visible(run: Path) -> dict[str, bytes]:
    # SQLite's -wal/-shm files come and go with the generation cache's open connections (garbage
    # collection decides when): they are the cache's, not the report's
    return {p.name: p.read_bytes() for p in run.iterdir()
            if p.is_file() and not p.name.startswith(".") and not p.name.endswith(("-wal", "-shm"))}


def test_a_report_killed_half_way_leaves_the_previous_one(run, monkeypatch):
    paths = build.build_report(run)
    assert {Path(p).name for p in paths.values()} == set(build.FILES.values())
    before = _visible(run)
    assert set(build.FILES.values()) <= set(before)
    staged = [p for p in run.iterdir() if p.name.startswith(".report-")]
    assert len(staged) == 1 and (run / "report").resolve() == staged[0].resolve()

    def killed(summary):  # the report dies after summary.json and report.html are written
        raise KeyboardInterrupt

    monkeypatch.setattr(ci, "junit", killed)
    with pytest.raises(KeyboardInterrupt):
        build.build_report(run)
    assert _visible(run) == before
    assert [p.name for p in run.iterdir() if p.name.startswith(".report-")] == [staged[0].name]

    # a SIGKILL leaves its staging folder behind (hidden); the next report removes it
    (run / ".report-killed").mkdir()
    (run / ".report-killed" / "summary.json").write_text("{}")
    monkeypatch.undo()
    build.build_report(run)
    assert len([p for p in run.iterdir() if p.name.startswith(".report-")]) == 1
    assert not (run / ".report-killed").exists()
    assert set(_visible(run)) == set(before)
