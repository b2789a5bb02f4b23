"""Fault injection: a target that fails 100%, 30% and 0% of its queries, taken from the attack
through the cell record to every report output (summary.json, report.html, JUnit, SARIF, the
terminal tables). A failed query is never a zero: the cells are ``failed``, ``partial`` and
``ok``, each metric rests on the answered queries and says so, and the failed cell is left out of
every aggregate, which says how many it left out.

The target is a ``CallableTarget`` (what a user's endpoint looks like to an attack), run and
measured by ``measure.run_attack`` and recorded by ``grid.store.measured_record``, as ``execute_cell``
does, so no model is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from typer.testing import CliRunner

from ragleak.attacks import make_attack
from ragleak.defenses import DEFENSES
from ragleak.grid.cell import min_answered_share
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import QueryCounts, RunStore, measured_record
from ragleak.measure import run_attack
from ragleak.pipeline.target import CallableTarget
from ragleak.records import Passage
from ragleak.testing import tiny_stack

PASSAGES = [
    Passage(id="d1#0", doc_id="d1", text="Maria Gonzales was treated at Riverside Clinic for asthma in May 2023; "
            "write to maria.gonzales@riverside-health.org for the record."),
    Passage(id="d2#0", doc_id="d2", text="The ferry between Dunmore and Clarebay leaves every ninety minutes from pier 4."),
]
# seed -> the share of queries the endpoint fails (ps asks its 10 pool queries in a seeded order)
FAILING = {0: 1.0, 1: 0.3, 2: 0.0}
# 30% failed leaves 70% answered: partial only under a threshold below the default 0.8
CONFIG = GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"], seeds=sorted(FAILING),
                    budget=10, min_answered_share=0.6)


class FlakyEndpoint:
    """Leaks a passage verbatim, and fails the first ``round(share * 10)`` of every 10 calls."""

    def __init__(self, share: float) -> None:
        self.failing = round(share * 10)
        self.calls = 0

    def __call__(self, query: str) -> dict:
        call, self.calls = self.calls, self.calls + 1
        if call % 10 < self.failing:
            raise ConnectionError("endpoint unreachable")
        passage = PASSAGES[call % len(PASSAGES)]
        return {"answer": f"Sure: {passage.text}", "retrieved_ids": [passage.doc_id]}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("faults")
    cells = CONFIG.expand()
    store = RunStore(out)
    store.init(CONFIG, cells)
    stack = tiny_stack()
    defense = DEFENSES.get("none")()
    for spec in cells:
        target = CallableTarget(FlakyEndpoint(FAILING[spec.seed]), exposes_retrieved_ids=True)
        transcript, metrics = run_attack(make_attack("ps"), target, stack.context(spec.seed), PASSAGES,
                                         budget=spec.budget)
        store.write_cell(measured_record(spec, transcript, metrics, defense, min_answered_share(out),
                                         usage=stack.usage()), transcript)
    return out


def _by_seed(run_dir):
    return {r.spec.seed: r for r in RunStore(run_dir).records()}


def test_cells_are_failed_partial_and_ok_by_the_share_answered(run_dir):
    records = _by_seed(run_dir)
    assert {s: r.status for s, r in records.items()} == {0: "failed", 1: "partial", 2: "ok"}
    assert {s: (r.counts.answered, r.counts.errors) for s, r in records.items()} == {0: (0, 10), 1: (7, 3), 2: (10, 0)}
    # the threshold came from the run's plan; under the default the 30% cell would be failed too
    assert min_answered_share(run_dir) == 0.6 and records[1].counts.status(0.8) == "failed"


def test_metrics_rest_on_answered_queries_only(run_dir):
    records = _by_seed(run_dir)
    for seed, r in records.items():
        for key, m in r.metrics.items():
            assert m.failed == r.counts.errors, (seed, key)
            if m.n_of == "answered queries":
                assert m.n == r.counts.answered, (seed, key)
    # every answer leaks a passage verbatim: the rate is 1 over what was answered, never diluted by failures
    assert records[1].metrics["verbatim_leaks"].value == 1.0 == records[2].metrics["verbatim_leaks"].value
    assert all(m.value is None and m.note for m in records[0].metrics.values())  # nothing answered: no zeros


def test_summary_and_aggregates_count_and_exclude(run_dir):
    from ragleak.report.build import build_report

    paths = build_report(run_dir)
    summary = json.loads(Path(paths["summary"]).read_text())
    assert summary["status_counts"] == {"ok": 1, "partial": 1, "failed": 1, "error": 0, "missing": 0, "corrupt": 0}
    assert summary["queries"] == {"queries": 30, "answered": 17, "refused": 0, "failed": 13}
    assert [c["counts"]["errors"] for c in summary["failed"]] == [10]
    assert [c["counts"]["errors"] for c in summary["partial"]] == [3]
    assert summary["excluded"]["failed"] == 1 and summary["excluded"]["by_defense"] == {"none": {"failed": 1, "error": 0}}
    level = next(r for r in summary["levels"] if r["metric"] == "verbatim_leaks")
    # the failed cell is left out (it has no value to read), the partial one is in with its n
    assert level["n_runs"] == 2 and sorted(level["n_per_cell"]) == [7, 10]
    assert level["excluded_failed"] == 1 and level["partial_cells"] == 1

    junit = ET.parse(paths["junit"]).getroot()
    cells = next(s for s in junit if s.get("name") == "cells")
    assert (cells.get("tests"), cells.get("failures"), cells.get("errors")) == ("3", "1", "0")
    cases = {c.get("name").rsplit("seed=", 1)[1]: c for c in cells}
    assert cases["0"].find("failure") is not None and "10 failed of 10" in cases["0"].find("failure").get("message")
    props = {p.get("name"): p.get("value") for p in cases["1"].iter("property")}
    assert cases["1"].find("failure") is None and props["status"] == "partial" and props["queries.errors"] == "3"
    assert props["verbatim_leaks.n"] == "7"

    sarif = json.loads(Path(paths["sarif"]).read_text())
    rules = [r["ruleId"] for r in sarif["runs"][0]["results"]]
    assert rules.count("ragleak.cell-failed") == 1 and rules.count("ragleak.cell-partial") == 1

    page = Path(paths["report"]).read_text()
    assert "Failed and partial cells" in page and "leave out 1 failed and 0 crashed cells" in page


def test_terminal_report_shows_failed_and_partial_cells(run_dir):
    from ragleak.cli import app

    result = CliRunner().invoke(app, ["report", str(run_dir)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "1 ok, 1 partial, 1 failed, 0 errors" in result.output
    assert "failed cells (left out of aggregates)" in result.output


def test_a_target_reported_refusal_is_a_response_not_a_failure():
    answers = iter([{"answer": "I will not share that.", "refused": True}, {"answer": "the ferry leaves hourly"}])
    target = CallableTarget(lambda q: next(answers))
    transcript = make_attack("ps").run(target, tiny_stack().context(0), budget=2)
    assert [q.outcome for q in transcript.queries] == ["refused", "answered"]
    counts = QueryCounts.of(transcript)
    assert (counts.answered, counts.refused, counts.errors) == (1, 1, 0) and counts.status(0.8) == "ok"
    assert len(transcript.answered) == 2  # both are responses the metrics read


def test_diff_says_how_many_failed_cells_each_run_left_out(run_dir):
    from ragleak.cli import app
    from ragleak.report.diff import diff_runs

    rows = diff_runs(run_dir, run_dir)
    assert rows and all(r["excluded_failed"] == {"a": 1, "b": 1} and r["moved"] is not True for r in rows)
    result = CliRunner().invoke(app, ["diff", str(run_dir), str(run_dir)], env={"COLUMNS": "250"})
    assert result.exit_code == 0 and "1 / 1" in result.output, result.output
