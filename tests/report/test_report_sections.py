"""The report's Private-RAG U(t) and knowledge-asymmetry sections, from a run directory written
by hand (records and transcripts as the grid writes them), so the logic is checked without a model;
test_report.py and tests/grid cover the same sections on real cells."""

from __future__ import annotations

import json
from pathlib import Path

from ragleak.attacks.base import QueryRecord, Transcript
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import CellRecord, RunStore
from ragleak.metrics import MetricResult
from ragleak.report.build import build_report
from ragleak.report.summary import summarize

CONFIG = GridConfig(attacks=["ps", "asymmetry"], defenses=["none", "private-rag"], corpora=["synthetic-corp"])


def _transcript(attack: str, answers: list[str | None]) -> str:
    queries = [QueryRecord(index=i, query=f"q{i}", answer=a, error=None if a is not None else "boom")
               for i, a in enumerate(answers)]
    return Transcript(attack=attack, attack_version="1", threat_model="black-box", params={}, seed=0,
                      budget=len(answers), target="t", exposes_retrieved_ids=False, queries=queries).to_json()


def _write(store: RunStore, spec, answers, **fields) -> CellRecord:
    record = CellRecord(cell_id=spec.cell_id, spec=spec, status="ok", transcript_digest=spec.cell_id, **fields)
    store.write_transcript(spec.cell_id, _transcript(spec.attack, answers))
    store.write(record)
    return record


def _run(tmp_path):
    cells = CONFIG.expand()
    store = RunStore(tmp_path)
    store.init(CONFIG, cells)
    by = {(c.attack, c.defense): c for c in cells}
    answers = ["alice smith works at acme", "bob jones phone 555", "carol white email carol@x.org"]
    _write(store, by[("ps", "none")], answers)
    log = [{"t": t, "relevant": r, "charged": r, "active_docs": a, "real_voters": min(r, 3), "agreement": 0.5,
            "tokens": 10} for t, r, a in [(1, 2, 30), (2, 2, 28), (3, 0, 28)]]
    _write(store, by[("ps", "private-rag")], ["alice smith works at acme", "bob", "no idea"],
           defense_state={"log": log, "retired": 2, "truncated_queries": 0})
    def reading(value, interval, sentences, private, note=None):
        flag_all = {"esr": 1.0, "precision": private / sentences, "f1": 2 * private / (sentences + private)}
        return MetricResult(value=value, n=sentences, n_of="sentences", interval=interval, interval_over="queries",
                            note=note, details={"sentences": sentences, "private": private, "precision": 0.5,
                                                "flag_all": flag_all})

    attribution = {"attribution_esr": reading(0.75, (0.5, 1.0), 12, 4), "attribution_f1": reading(0.6, (0.4, 0.8), 12, 4),
                   "attribution_auc": reading(0.9, (0.7, 1.0), 12, 4)}
    _write(store, by[("asymmetry", "none")], answers, metrics=attribution)
    _write(store, by[("asymmetry", "private-rag")], answers,
           metrics={"attribution_esr": reading(None, None, 5, 0, "no private sentence: ESR undefined"),
                    "attribution_f1": reading(0.0, (0.0, 0.0), 5, 0)},
           defense_state={"log": log[:2], "retired": 0})  # log shorter than the transcript
    return tmp_path


def test_utility_curve_pairs_each_query_with_the_baseline_answer(tmp_path):
    summary = summarize(_run(tmp_path))
    curves = {c["label"].split("/")[0]: c for c in summary["utility_curves"]}
    ps = curves["ps"]
    assert [p["active_docs"] for p in ps["points"]] == [30, 28, 28]
    q = [p["quality"] for p in ps["points"]]
    assert q[0] == 1.0 and 0 < q[1] < 1 and q[2] == 0.0
    assert ps["baseline_cell"] and ps["note"] is None
    unaligned = curves["asymmetry"]
    assert all(p["quality"] is None for p in unaligned["points"]) and "differ" in unaligned["note"]


def test_attribution_rows_carry_intervals_and_undefined_values(tmp_path):
    summary = summarize(_run(tmp_path))
    rows = {r["defense"]: r for r in summary["attribution"]}
    assert rows["none"]["esr"] == 0.75 and rows["none"]["esr_ci"] == [0.5, 1.0] and rows["none"]["private"] == 4
    assert rows["none"]["precision"] == 0.5 and rows["none"]["flag_all_f1"] == 0.5  # beside ESR, always
    assert rows["private-rag"]["esr"] is None  # no private sentence: ESR undefined, not zero


def test_the_page_shows_both_sections(tmp_path):
    paths = build_report(_run(tmp_path))
    page = Path(paths["report"]).read_text()
    assert "Private-RAG: utility against query index U(t)" in page and "answer quality U(t)" in page
    assert "Knowledge asymmetry: sentence attribution" in page
    assert "0.75 [0.5, 1]" in page and "undefined" in page
    summary = json.loads(Path(paths["summary"]).read_text())
    assert len(summary["utility_curves"]) == 2 and len(summary["attribution"]) == 2


def test_a_single_cell_reading_uses_its_query_interval_or_claims_none(tmp_path):
    from ragleak.report.diff import diff_runs

    run = _run(tmp_path)
    levels = {(r["defense"], r["metric"]): r for r in summarize(run)["levels"]}
    esr = levels[("none", "attribution_esr")]
    assert (esr["low"], esr["high"], esr["interval_over"]) == (0.5, 1.0, "queries of one cell")
    assert ("private-rag", "attribution_esr") not in levels  # undefined in its only cell: no level, not a zero
    f1 = levels[("private-rag", "attribution_f1")]
    assert f1["interval_over"] == "queries of one cell" and f1["low"] == 0.0
    deltas = {(d["defense"], d["metric"]): d for d in summarize(run)["deltas"]}
    assert deltas[("private-rag", "attribution_f1")]["low"] is None  # one pair: no interval, not [x, x]
    assert all(row["moved"] is False for row in diff_runs(run, run))


def test_a_cell_whose_attack_ended_before_its_budget_is_listed_with_what_it_sent(tmp_path):
    from ragleak.grid.store import QueryCounts

    cells = CONFIG.expand()
    store = RunStore(tmp_path)
    store.init(CONFIG, cells)
    early, whole = cells[0], cells[1]
    _write(store, early, ["a", "b"], counts=QueryCounts(queries=2, answered=2, errors=0, budget=256))
    _write(store, whole, ["a", "b"], counts=QueryCounts(queries=2, answered=2, errors=0, budget=2))
    summary = summarize(tmp_path)
    assert [c["label"] for c in summary["ended_early"]] == [early.label]
    page = Path(build_report(tmp_path)["report"]).read_text()
    assert "ended before its budget" in page and ">256<" in page
