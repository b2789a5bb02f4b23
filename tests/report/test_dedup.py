"""The dedup fingerprint is what the target released, never timings, and duplicates are collapsed
before any bootstrap: two cells that differ only by an inert epsilon share a fingerprint, and a
pooled level's interval is the bootstrap over the distinct runs of a synthetic pool."""

from __future__ import annotations

import pytest

from ragleak.attacks import make_attack
from ragleak.grid.cell import _defense
from ragleak.grid.spec import CellSpec
from ragleak.grid.store import CellRecord, QueryCounts
from ragleak.metrics import MetricResult
from ragleak.metrics.stats import bootstrap_mean
from ragleak.pipeline.build import build_target
from ragleak.records import Document, digest
from ragleak.report.summary import aggregate
from ragleak.testing import copy_context, tiny_stack

DOCS = [Document(id="a", text="Maria Gonzales was treated at Riverside Clinic for asthma in May 2023."),
        Document(id="b", text="The ferry between Dunmore and Clarebay leaves every ninety minutes from pier 4."),
        Document(id="c", text="Storage room B-17 keeps the spare servo motors for the night shift.")]


def _cell(epsilon: float):
    """A ps cell on pad-regex (a defense with no epsilon: the grid's epsilon is inert for it), run on
    a fresh stack whose target copies its context."""
    spec = CellSpec(attack="ps", defense="pad-regex", corpus="synthetic-corp", epsilon=epsilon, budget=4)
    assert spec.applied_epsilon is None  # the axis does not reach the defense
    stack = tiny_stack(target=copy_context)
    ctx = stack.context(spec.seed)
    target = build_target(stack, stack.index(DOCS), _defense(spec), ctx=ctx)
    transcript = make_attack("ps").run(target, ctx, budget=spec.budget)
    return spec, transcript


def test_cells_differing_only_by_an_inert_epsilon_share_the_fingerprint():
    (spec_1, t_1), (spec_5, t_5) = _cell(1.0), _cell(5.0)
    assert spec_1.cell_id != spec_5.cell_id
    assert all(q.ok and q.trace is not None for q in t_1.queries + t_5.queries)
    # the whole transcripts differ (wall-clock timings are in them) ...
    assert digest(t_1.to_json()) != digest(t_5.to_json())
    # ... what the target released does not
    assert t_1.release_digest() == t_5.release_digest()
    # and a release that differs in one answer has another fingerprint
    changed = t_5.model_copy(update={"queries": [t_5.queries[0].model_copy(update={"answer": "other"}),
                                                 *t_5.queries[1:]]})
    assert changed.release_digest() != t_1.release_digest()


def _record(seed: int, value: float, release: str) -> CellRecord:
    spec = CellSpec(attack="ps", defense="none", corpus="synthetic-corp", seed=seed)
    return CellRecord(cell_id=spec.cell_id, spec=spec, status="ok", release_digest=release,
                      counts=QueryCounts(queries=10, answered=10, errors=0),
                      metrics={"verbatim_leaks": MetricResult(value=value, n=10, n_of="answered queries")})


def test_the_pooled_interval_is_computed_over_distinct_runs():
    # seven cells: seeds 1-3 copy seed 0 (same release, same reading), seed 5 copies seed 4; seed 6
    # released what seed 0 did but reads differently (other ground truth), so it is not a copy
    pool = [(0, 0.2, "r0"), (1, 0.2, "r0"), (2, 0.2, "r0"), (3, 0.2, "r0"), (4, 0.9, "r4"), (5, 0.9, "r4"),
            (6, 0.5, "r0")]
    records = [_record(*row) for row in pool]
    agg = aggregate(records, seed=3)
    level = next(r for r in agg["levels"] if r["metric"] == "verbatim_leaks")
    distinct = bootstrap_mean([0.2, 0.9, 0.5], seed=3)
    assert (level["n_runs"], level["n_unique"], level["collapsed"]) == (7, 3, 4)
    assert level["estimate"] == pytest.approx(distinct.estimate)
    assert (level["low"], level["high"]) == pytest.approx((distinct.low, distinct.high))
    # resampling all seven as if independent would weight the copies and give another interval
    naive = bootstrap_mean([v for _, v, _ in pool], seed=3)
    assert (naive.estimate, naive.low, naive.high) != (distinct.estimate, distinct.low, distinct.high)
    assert agg["collapsed"]["level_readings"] == 4
