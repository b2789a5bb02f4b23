"""The process-pool and Ray executors run real cells and agree with the serial run."""

from __future__ import annotations

import json

import pytest

from ragleak.grid.runner import run_grid
from ragleak.grid.spec import grid_from_dict
from ragleak.grid.store import RunStore

pytestmark = pytest.mark.model

GRID = {
    "name": "executors",
    "attacks": ["ps"],
    "defenses": ["none"],
    "corpora": ["synthetic-corp"],
    "seeds": [0, 1],
    "budget": 1,
    "corpus_params": {"synthetic-corp": {"n_docs": 12}},
    "stack": {"decoding": {"max_tokens": 32}},
}


def _metrics(run):
    return {r.cell_id: r.metrics for r in RunStore(run).records()}


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial")
    state = run_grid(grid_from_dict(GRID), out, workers=1)
    assert state.errors == 0
    return {"metrics": _metrics(out), "model_calls": state.model_calls}


def test_process_pool_matches_serial(tmp_path, serial):
    state = run_grid(grid_from_dict(GRID), tmp_path / "pool", workers=2)
    assert state.errors == 0 and state.ran == 2
    assert _metrics(tmp_path / "pool") == serial["metrics"]
    # a prompt both workers reach is generated once (the cache's in-progress claim): the pool
    # makes exactly the serial run's model calls, the rest are hits (some of them waited)
    assert state.model_calls == serial["model_calls"]


def test_ray_local_cluster_matches_serial(tmp_path, serial, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    state = run_grid(grid_from_dict(GRID), tmp_path / "ray", executor="ray", workers=2)
    errors = [r.error for r in RunStore(tmp_path / "ray").records() if r.status == "error"]
    assert state.errors == 0, errors
    assert _metrics(tmp_path / "ray") == serial["metrics"]
    assert state.model_calls == serial["model_calls"]
    assert json.loads((tmp_path / "ray" / "plan.json").read_text())["cell_ids"]
