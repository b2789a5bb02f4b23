"""The Ray executor's coordinator (``grid.ray_actors.run_on_actors``) on an in-process stand-in for
Ray, so its bookkeeping is checked in milliseconds with no cluster: which actor runs which cell,
what an actor's death costs, and when the run gives up on a cell or on the cluster. The same
paths on a real Ray cluster are in ``test_ray_actors`` (marked ``model``: it starts one).

The stand-in runs an actor's method when its result is waited on, in submission order, so a run
is deterministic; a cell "kills its actor" by raising ``Die``, which the stand-in turns into what
Ray reports for a dead actor (``RayActorError``) and every later call on that actor fails too.
"""

from __future__ import annotations

import pytest

from ragleak.errors import RagleakError
from ragleak.grid.ray_actors import MAX_ATTEMPTS, run_on_actors
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import CellRecord, RunStore
from ragleak.pipeline.rag import AuditPolicy

exceptions = pytest.importorskip("ray.exceptions")

CONFIG = GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"], seeds=[0, 1, 2, 3], budget=1,
                    corpus_params={"synthetic-corp": {"n_docs": 12}})
AUDIT = AuditPolicy("off", 0.0)


class Die(Exception):
    """Raised by a cell function to take its actor down, as SIGKILL or an OOM would."""


class Ref:
    def __init__(self, actor: "Actor", method: str, args: tuple) -> None:
        self.actor, self.method, self.args = actor, method, args

    def result(self):
        if self.actor.init_error is not None:
            raise exceptions.RayActorError(error_msg=f"init failed: {self.actor.init_error}", actor_init_failed=True)
        if not self.actor.alive:
            raise exceptions.RayActorError(error_msg="the actor is dead")
        try:
            return getattr(self.actor.obj, self.method)(*self.args)
        except Die:
            self.actor.alive = False
            raise exceptions.RayActorError(error_msg="the actor died mid-task") from None


class Method:
    def __init__(self, actor: "Actor", name: str) -> None:
        self.actor, self.name = actor, name

    def remote(self, *args) -> Ref:
        return Ref(self.actor, self.name, args)


class Actor:
    def __init__(self, cls, args: tuple, born: list) -> None:
        self.alive, self.init_error, self.obj = True, None, None
        try:
            self.obj = cls(*args)
        except Exception as exc:  # noqa: BLE001 - Ray reports it on the actor's first call
            self.init_error = exc
        born.append(self)

    def __getattr__(self, name: str) -> Method:
        return Method(self, name)


class FakeRay:
    """``remote``, ``wait``, ``get`` and ``kill``: what ``run_on_actors`` uses of Ray."""

    def __init__(self) -> None:
        self.actors: list[Actor] = []
        self.killed: list[Actor] = []

    def remote(self, **options):
        assert options == {"num_cpus": 1, "max_restarts": 0}
        ray = self

        def wrap(cls):
            class Handle:
                @staticmethod
                def remote(*args) -> Actor:
                    return Actor(cls, args, ray.actors)

            return Handle

        return wrap

    def wait(self, refs: list[Ref], num_returns: int = 1):
        return refs[:num_returns], refs[num_returns:]

    def get(self, refs):
        return [r.result() for r in refs] if isinstance(refs, list) else refs.result()

    def kill(self, actor: Actor, no_restart: bool = True) -> None:
        actor.alive = False
        self.killed.append(actor)


def _chains(cells, size=2):
    """Pairs of cells standing in for streams with a twin."""
    return [cells[i:i + size] for i in range(0, len(cells), size)]


def _run(tmp_path, cell_fn, slots=2):
    run = tmp_path / "run"
    cells = CONFIG.expand()
    RunStore(run).init(CONFIG, cells)
    got: list[CellRecord] = []
    ray = FakeRay()
    result = run_on_actors(ray, _chains(cells), str(run), slots, AUDIT, cell_fn, got.append)
    return cells, ray, result, got, RunStore(run)


def ok_cell(spec, run_dir, audit):
    record = CellRecord(cell_id=spec.cell_id, spec=spec, status="ok")
    RunStore(run_dir).write(record)
    return record


def test_each_actor_runs_whole_chains_in_order(tmp_path):
    cells, ray, result, got, store = _run(tmp_path, ok_cell)
    ids = [c.cell_id for c in cells]
    assert result.restarts == 0 and result.lost == []
    assert sorted(w["cells"] for w in result.workers) == sorted([ids[0:2], ids[2:4]])
    assert len(ray.actors) == 2 and ray.killed == ray.actors  # all killed at the end: the cluster gets its CPUs back
    assert sorted(r.cell_id for r in got) == sorted(ids) and len(store.records()) == 4


def test_a_dead_actor_costs_its_cell_only_which_runs_again_on_a_fresh_actor(tmp_path):
    victim = CONFIG.expand()[1].cell_id  # the twin of the first chain
    died = []

    def cell(spec, run_dir, audit):
        if spec.cell_id == victim and not died:
            died.append(spec.cell_id)
            raise Die
        return ok_cell(spec, run_dir, audit)

    cells, ray, result, got, store = _run(tmp_path, cell)
    ids = [c.cell_id for c in cells]
    assert result.restarts == 1 and result.lost == [victim]
    assert len(ray.actors) == 3  # two, and the dead one's successor
    assert sorted(w["cells"] for w in result.workers) == sorted([ids[2:4], [victim]])
    assert [r.cell_id for r in got].count(victim) == 1 and sorted(r.cell_id for r in got) == sorted(ids)
    assert all(r.status == "ok" for r in store.records()) and len(store.records()) == 4


@pytest.mark.parametrize("at, actors", [(0, 4), (1, 3)])
def test_a_cell_that_kills_every_actor_becomes_an_error_record_and_its_chain_goes_on(tmp_path, at, actors):
    # at 0: a chain's first cell, whose twin still runs, on a fresh actor; at 1: the chain's last
    # cell, after which the slot has no work, so no successor is started
    victim = CONFIG.expand()[at].cell_id

    def cell(spec, run_dir, audit):
        if spec.cell_id == victim:
            raise Die
        return ok_cell(spec, run_dir, audit)

    cells, ray, result, got, store = _run(tmp_path, cell)
    assert result.restarts == MAX_ATTEMPTS and result.lost == [victim] * MAX_ATTEMPTS
    record = store.read(victim)
    assert record.status == "error" and record.error.startswith("WorkerDied")
    assert {r.cell_id: r.status for r in got} == {c.cell_id: "error" if c.cell_id == victim else "ok" for c in cells}
    assert len(ray.actors) == actors
    if at == 0:
        assert [w["cells"] for w in result.workers if cells[1].cell_id in w["cells"]] == [[cells[1].cell_id]]


def test_actors_that_cannot_start_stop_the_run(tmp_path, monkeypatch):
    import ragleak.grid.ray_actors as module

    class Broken(module.CellWorker):
        def __init__(self, cell_fn):
            raise ImportError("No module named 'ragleak'")

    monkeypatch.setattr(module, "CellWorker", Broken)
    with pytest.raises(RagleakError, match="could not start"):
        _run(tmp_path, ok_cell)
