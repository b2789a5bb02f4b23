"""The Ray executor's long-lived actors (``grid.ray_actors``): the same records as a local run,
each actor keeping its loaded stack across its cells, a stream's twins after its first cell, and
a killed actor costing only its cell.

The cells run on a ``tiny_stack`` (real MiniLM embedder, FAISS index and generation cache; a
scripted target that copies its context), set up inside each actor by ``scripted_cell``. One
Ray session serves the module, since starting one costs about 5 s. Marked ``model`` like the
other Ray test (``test_executors``), so ``make test-fast`` starts no Ray cluster.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from ragleak.grid import cell as cell_module
from ragleak.grid import runner as runner_module
from ragleak.grid.eta import Estimator, Rates
from ragleak.grid.ray_actors import MAX_ATTEMPTS
from ragleak.grid.runner import run_grid
from ragleak.grid.streams import stream_chains
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import RunStore
from ragleak.testing import copy_context, tiny_stack

pytestmark = pytest.mark.model
ray = pytest.importorskip("ray")

# none and pad-regex (post-processing only) share one generation stream per seed on PS: two
# chains of two cells, one chain per actor
CONFIG = GridConfig(attacks=["ps"], defenses=["none", "pad-regex"], corpora=["synthetic-corp"], seeds=[0, 1],
                    budget=3, audit="off", corpus_params={"synthetic-corp": {"n_docs": 12}})


def _scripted_stack(spec, run_dir):
    return tiny_stack(cache_path=Path(run_dir) / "generations.sqlite", target=copy_context)


def scripted_cell(spec, run_dir, audit, kill: str | None = None, times: int = 1):
    """``execute_cell`` on a scripted stack, in the actor's process. ``kill``: a cell id whose
    first ``times`` attempts SIGKILL the actor running them (counted in marker files of the run)."""
    if kill == spec.cell_id:
        tries = sorted(Path(run_dir).glob(f".killed-{spec.cell_id}-*"))
        if len(tries) < times:
            (Path(run_dir) / f".killed-{spec.cell_id}-{len(tries)}").touch()
            os.kill(os.getpid(), signal.SIGKILL)
    cell_module.cell_stack = _scripted_stack  # this process only: the actor's
    return cell_module.execute_cell(spec, run_dir, audit)


@pytest.fixture(scope="module")
def ray_session():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_worker_niceness", "0")  # as grid.runner starts its own cluster
    # the actors cannot import a test module: ship scripted_cell by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception:
        ray.shutdown()  # what did start (GCS, agents) would outlive the test session
        raise
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def local_metrics(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    mp = pytest.MonkeyPatch()
    mp.setattr(cell_module, "cell_stack", _scripted_stack)
    try:
        state = run_grid(CONFIG, out, workers=1)
    finally:
        mp.undo()
    assert state.errors == 0 and state.ran == 4
    return _metrics(out)


def _chains():
    estimate, rates = Estimator(), Rates(prefill_tok_s=100.0, decode_tok_s=10.0)
    return stream_chains(CONFIG.expand(), lambda cell: estimate(cell).seconds(rates))


def _metrics(run: Path) -> dict[str, dict]:
    return {r.cell_id: {k: m.model_dump() for k, m in r.metrics.items()} for r in RunStore(run).records()}


def _stored_once(run: Path) -> list[str]:
    """The cell ids in cells.jsonl, checked to be the plan's, each once."""
    ids = [json.loads(line)["cell_id"] for line in (run / "cells.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(json.loads((run / "plan.json").read_text())["cell_ids"])
    assert len(ids) == len(set(ids)) == len(list((run / "cells").glob("*.json")))
    return ids


def _ray_run(monkeypatch, out: Path, cell_fn=scripted_cell, **kwargs):
    monkeypatch.setattr(runner_module, "execute_cell", cell_fn)
    return run_grid(CONFIG, out, executor="ray", workers=2, **kwargs)


def test_actors_match_local_keep_their_stack_and_take_their_twins(tmp_path, monkeypatch, ray_session, local_metrics):
    state = _ray_run(monkeypatch, tmp_path / "ray")
    assert state.errors == 0 and state.ran == 4 and state.worker_restarts == 0
    assert _metrics(tmp_path / "ray") == local_metrics
    _stored_once(tmp_path / "ray")

    chains = [[c.cell_id for c in chain] for chain in _chains()]
    assert sorted(map(len, chains)) == [2, 2]
    workers = state.workers
    assert len(workers) == 2 and len({w["pid"] for w in workers}) == 2
    assert {w["nice"] for w in workers} == {os.nice(0)}  # the actors run at the driver's priority
    # each actor started on a chain's first cell, then took a twin (either: grid.schedule hands the
    # twins out after every first cell), every cell ran once, and each actor loaded the embedder and
    # the index once
    assert sorted(w["cells"][0] for w in workers) == sorted(chain[0] for chain in chains)
    assert sorted(c for w in workers for c in w["cells"]) == sorted(c for chain in chains for c in chain)
    for w in workers:
        assert w["loads"]["embedder"] == 1 and w["loads"]["index"] == 1, w
    records = {r.cell_id: r for r in RunStore(tmp_path / "ray").records()}
    for chain in chains:  # the twin found every generation of its stream in the cache (the first cell
        # may find some too: both seeds draw from one pool)
        assert records[chain[0]].usage.model_calls > 0 and records[chain[1]].usage.model_calls == 0
        assert records[chain[1]].usage.cache_hits == records[chain[1]].counts.queries == 3


def test_a_killed_actor_loses_only_its_cell(tmp_path, monkeypatch, ray_session, local_metrics):
    first, victim = (c.cell_id for c in _chains()[0])  # the victim is a twin: its actor had a warm stack
    state = _ray_run(monkeypatch, tmp_path / "ray", functools.partial(scripted_cell, kill=victim))
    assert state.worker_restarts == 1 and state.errors == 0 and state.ran == 4
    assert len(list((tmp_path / "ray").glob(f".killed-{victim}-*"))) == 1
    assert _metrics(tmp_path / "ray") == local_metrics
    _stored_once(tmp_path / "ray")
    # the victim ran on the slot's fresh actor, which loaded its stack anew; no other cell ran twice
    fresh = next(w for w in state.workers if victim in w["cells"])
    assert fresh["cells"] == [victim] and fresh["loads"]["embedder"] == 1
    # the dead actor's report is gone: the cells it ran before the victim (a first cell, maybe a
    # twin too) are missing from the live reports
    ran = [c for w in state.workers for c in w["cells"]]
    assert len(ran) == len(set(ran)) and 2 <= len(ran) <= 3
    assert first not in ran or len(ran) == 2


def test_a_cell_that_kills_every_actor_is_an_error_record_and_resumes(tmp_path, monkeypatch, ray_session,
                                                                      local_metrics):
    victim = _chains()[1][0].cell_id
    run = tmp_path / "ray"
    state = _ray_run(monkeypatch, run, functools.partial(scripted_cell, kill=victim, times=MAX_ATTEMPTS))
    assert state.worker_restarts == MAX_ATTEMPTS and state.errors == 1 and state.ran == 4
    record = RunStore(run).read(victim)
    assert record.status == "error" and record.error.startswith("WorkerDied")
    _stored_once(run)

    again = _ray_run(monkeypatch, run)  # resume: nothing pending
    assert again.ran == 0 and again.workers == []
    healed = _ray_run(monkeypatch, run, retry_errors=True)  # only the error cell runs again
    assert healed.ran == 1 and healed.errors == 0
    assert [w["cells"] for w in healed.workers] == [[victim]]
    assert _metrics(run) == local_metrics
    _stored_once(run)
