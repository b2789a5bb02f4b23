"""Scheduling by generation stream (model-free): every stream's first cell goes out before any twin,
the costliest chains first, twins after their first cell finished where they can, and no slot
idles while a cell is left."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.grid import runner as runner_module
from ragleak.grid.eta import Estimator, Rates
from ragleak.grid.runner import run_grid
from ragleak.grid.schedule import ChainDispatcher, simulated_makespan
from ragleak.grid.spec import GridConfig
from ragleak.grid.streams import stream_chains

CONFIG = GridConfig(attacks=["ps", "ikea"], defenses=["none", "pad", "dp-retrieval"], corpora=["synthetic-corp"],
                    epsilons=[1.0, 5.0], budgets={"ps": 2, "ikea": 5},
                    corpus_params={"synthetic-corp": {"n_docs": 12}})


def chains_of(cells):
    """The chains in the runner's order: by each stream's estimated seconds (``grid.eta``)."""
    estimate, rates = Estimator(), Rates(prefill_tok_s=100.0, decode_tok_s=10.0)
    return stream_chains(cells, lambda cell: estimate(cell).seconds(rates))


def _labels(chain):
    return [(c.attack, c.defense, c.epsilon) for c in chain]


def test_chains_group_twins_behind_their_first_cell_costliest_first():
    chains = chains_of(CONFIG.expand())
    # ikea (5 queries, its own calls beside) before ps (2); within ps: none and pad (postprocess only,
    # fixed queries, single prompts) share one stream across both epsilons; dp-retrieval is per epsilon;
    # ikea is adaptive, so pad is its own stream
    assert [_labels(c) for c in chains] == [
        [("ikea", "none", 1.0), ("ikea", "none", 5.0)],
        [("ikea", "pad", 1.0), ("ikea", "pad", 5.0)],
        [("ikea", "dp-retrieval", 1.0)],
        [("ikea", "dp-retrieval", 5.0)],
        [("ps", "none", 1.0), ("ps", "none", 5.0), ("ps", "pad", 1.0), ("ps", "pad", 5.0)],
        [("ps", "dp-retrieval", 1.0)],
        [("ps", "dp-retrieval", 5.0)],
    ]
    assert sorted(c.cell_id for chain in chains for c in chain) == sorted(c.cell_id for c in CONFIG.expand())


def test_the_dispatcher_hands_out_every_first_cell_before_a_twin_and_never_idles_a_slot():
    chains = chains_of(CONFIG.expand())
    first_of = {c.cell_id: chain[0].cell_id for chain in chains for c in chain}
    firsts = [chain[0].cell_id for chain in chains]
    beside = 0
    for seed in range(20):  # workers finish in random order
        rng = random.Random(seed)
        dispatch = ChainDispatcher(chains, slots=2)
        running = dispatch.start()
        assert [c.cell_id for c in running] == firsts[:2]
        started, finished = [c.cell_id for c in running], set()
        while running:
            done = running.pop(rng.randrange(len(running)))
            finished.add(done.cell_id)
            nxt = dispatch.finished(done)
            if nxt is None:  # a slot is let go only when every cell is handed out
                assert sorted(started) == sorted(first_of)
                continue
            if nxt.cell_id in firsts:
                assert started == [f for f in firsts if f in started]  # first cells in chain order, before any twin
            else:
                assert set(firsts) <= set(started)
                if first_of[nxt.cell_id] not in finished:  # beside its running first cell only when every
                    beside += 1  # twin still to go has its first cell running too
                    left = set(first_of) - set(started) - {nxt.cell_id}
                    assert all(first_of[t] not in finished for t in left)
            running.append(nxt)
            started.append(nxt.cell_id)
        assert dispatch.idle and sorted(started) == sorted(first_of) and len(started) == len(set(started))
    assert beside > 0  # the end of the grid did run a twin beside its first cell rather than idle


def test_fewer_chains_than_slots_start_twins_beside_their_first_cell():
    (chain,) = [c for c in chains_of(CONFIG.expand()) if len(c) == 4]
    dispatch = ChainDispatcher([chain], slots=3)
    assert [c.cell_id for c in dispatch.start()] == [c.cell_id for c in chain[:3]]
    assert dispatch.finished(chain[1]).cell_id == chain[3].cell_id
    assert dispatch.finished(chain[0]) is None and dispatch.finished(chain[3]) is None
    assert dispatch.finished(chain[2]) is None and dispatch.idle


def test_one_worker_runs_the_cells_chain_by_chain(tmp_path, monkeypatch):
    ran = []

    def fake_execute(spec, run_dir, audit):
        ran.append(spec)
        from ragleak.grid.store import CellRecord

        return CellRecord(cell_id=spec.cell_id, spec=spec, status="error", error="not run")

    monkeypatch.setattr(runner_module, "execute_cell", fake_execute)
    run_grid(CONFIG, tmp_path / "run", workers=1)
    assert [c.cell_id for c in ran] == [c.cell_id for chain in chains_of(CONFIG.expand())
                                        for c in chain]


def test_the_simulated_makespan_follows_the_dispatcher_and_twins_wait_for_their_first_cell():
    chains = chains_of(CONFIG.expand())  # 7 chains, 4 of them with twins
    seconds = [10.0, 9.0, 6.0, 6.0, 4.0, 1.0, 1.0]  # costliest first, as the chains are ordered
    cost = {chain[0].cell_id: s for chain, s in zip(chains, seconds)}
    price = lambda chain: cost[chain[0].cell_id]  # noqa: E731
    # one worker: every first cell in turn, the twins free
    assert simulated_makespan(chains, price, 1) == sum(seconds)
    # two: 10 | 9, 6 (t=15) ... the LPT list order: slot A 10, 6 (16), 1 (17), 1 (18): slot B 9, 6 (15), 4 (19)
    assert simulated_makespan(chains, price, 2) == 19.0
    # as many workers as cells: every first cell at once; a twin beside its first cell ends with it
    assert simulated_makespan(chains, price, 20) == 10.0


@settings(max_examples=60, deadline=None)
@given(seconds=st.lists(st.floats(min_value=0.0, max_value=1e4), min_size=7, max_size=7),
       slots=st.integers(min_value=1, max_value=9))
def test_the_simulated_makespan_is_within_the_list_scheduling_bounds(seconds, slots):
    chains = chains_of(CONFIG.expand())
    cost = {chain[0].cell_id: s for chain, s in zip(chains, seconds)}
    makespan = simulated_makespan(chains, lambda chain: cost[chain[0].cell_id], slots)
    total, longest = sum(seconds), max(seconds)
    lower = max(total / slots, longest)
    assert lower - 1e-6 <= makespan <= total + 1e-6
    # Graham (1969): list scheduling ends within (2 - 1/m) of the optimum, itself >= ``lower``
    assert makespan <= (2 - 1 / slots) * lower + 1e-6
