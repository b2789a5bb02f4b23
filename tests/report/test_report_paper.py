"""The paper's tables (report.paper) from cell records written by hand: Table II per defense,
Table III with Fisher and McNemar, and the findings, without a model."""

from __future__ import annotations

import pytest

from ragleak.grid.spec import CellSpec
from ragleak.grid.store import CellRecord, QueryCounts
from ragleak.metrics import MetricResult
from ragleak.report.paper import EMAIL, MI, PERSON, paper_tables
from ragleak.report.paper_html import paper_html
from ragleak.report.summary import aggregate, audit_tables

EMAILS = {"none": [3, 4, 5, 6], "pad-regex": [0, 0, 0, 0], "dp-retrieval": [3, 4, 5, 7]}
PERSONS = {"none": [2, 2, 3, 3], "pad-regex": [2, 3, 3, 2], "dp-retrieval": [2, 2, 3, 2]}
MI_AUC = {"none": [0.90, 0.85, 0.88, 0.92], "pad-regex": [0.90, 0.85, 0.88, 0.92], "dp-retrieval": [0.50, 0.45, 0.52, 0.41]}
HOOKS = {"pad-regex": {"postprocess": {"changed": 3, "calls": 4}},
         "dp-retrieval": {"score_retrieval": {"changed": 4, "calls": 4}}}


def _record(attack, defense, seed, metrics, corpus="synthetic-corp", **spec):
    s = CellSpec(attack=attack, defense=defense, corpus=corpus, seed=seed, **spec)
    return CellRecord(cell_id=s.cell_id, spec=s, status="ok", release_digest=f"{s.cell_id}-{seed}",
                      counts=QueryCounts(queries=10, answered=10, errors=0), hook_summary=HOOKS.get(defense, {}),
                      metrics={k: MetricResult(value=float(v), n=10, n_of="answered queries") for k, v in metrics.items()})


def _canary(defense, seed, hits, total=50):
    s = CellSpec(attack="canary", defense=defense, corpus="synthetic-email", seed=seed)
    result = MetricResult(value=len(hits) / total, n=total, n_of="canaries", interval=(0.0, 1.0),
                          details={"recovered": len(hits), "total": total, "hits": sorted(hits)})
    return CellRecord(cell_id=s.cell_id, spec=s, status="ok", release_digest=s.cell_id, hook_summary=HOOKS.get(defense, {}),
                      counts=QueryCounts(queries=50, answered=50, errors=0), metrics={"canary_recovery": result})


@pytest.fixture(scope="module")
def paper():
    records = []
    for defense in EMAILS:
        for seed in range(4):
            records.append(_record("ps", defense, seed, {EMAIL: EMAILS[defense][seed], PERSON: PERSONS[defense][seed]}))
            records.append(_record("mi", defense, seed, {MI: MI_AUC[defense][seed]}))
            # MI on another corpus must not enter the Synthetic-Corp column
            records.append(_record("mi", defense, seed, {MI: 1.0}, corpus="synthetic-email"))
    recovered = {101: 21, 102: 16, 103: 16}
    for seed, k in recovered.items():
        records.append(_canary("none", seed, {f"operator_{seed}_{i}@x" for i in range(k)}))
        records.append(_canary("lprag", seed, set()))
        records.append(_canary("pad-regex", seed, {f"operator_{seed}_{i}@x" for i in range(k - 1)}))
    agg = aggregate(records)
    audit = audit_tables(records, agg["deltas"])
    mi_agg = aggregate([r for r in records if r.spec.corpus == "synthetic-corp"])
    return paper_tables(records, agg, mi_agg, audit["table_two"])


def test_table_two_shows_the_baseline_level_and_signed_reductions(paper):
    rows = {r["defense"]: r for r in paper["table_two"]}
    assert [r["defense"] for r in paper["table_two"]][0] == "none"
    base = rows["none"]["email"]
    assert base["kind"] == "level" and base["value"] == pytest.approx(4.5) and base["low"] < 4.5 < base["high"]
    pad = rows["pad-regex"]["email"]
    assert pad["kind"] == "reduction" and pad["delta"] == pytest.approx(-4.5) and pad["relative_change"] == pytest.approx(-1.0)
    assert pad["moved"] and pad["interpretable"] and "postprocess" in pad["reason"]
    assert rows["pad-regex"]["person"]["moved"] is False  # names are not what a regex masker removes
    mi = {d: rows[d]["mi_auc_synthetic_corp"] for d in rows}
    assert mi["none"]["value"] == pytest.approx(0.8875) and mi["dp-retrieval"]["value"] == pytest.approx(0.47)
    assert mi["dp-retrieval"]["moved"] and mi["dp-retrieval"]["interpretable"]
    assert mi["pad-regex"]["interpretable"] is False  # postprocess does not reach retrieval


def test_table_three_tests_recovery_against_the_baseline(paper):
    rows = {r["defense"]: r for r in paper["table_three"]}
    assert (rows["none"]["recovered"], rows["none"]["total"]) == (53, 150)
    assert [s["recovered"] for s in rows["none"]["per_seed"]] == [21, 16, 16]
    assert rows["none"]["fisher_p"] is None and rows["lprag"]["fisher_p"] < 1e-14
    assert rows["lprag"]["mcnemar_p"] == pytest.approx(0.5 ** 53)
    # three fewer recoveries of 150, all three paired discordances one way: P[Binom(3, 1/2) >= 3]
    assert rows["pad-regex"]["fisher_p"] > 0.3 and rows["pad-regex"]["mcnemar_p"] == pytest.approx(0.125)


def test_findings_say_what_moved_and_whether_the_defense_acts_there(paper):
    f = {row["defense"]: row for row in paper["findings"]}
    assert EMAIL in f["pad-regex"]["moved_where_it_acts"] and PERSON not in f["pad-regex"]["moved"]
    assert MI in f["dp-retrieval"]["moved_where_it_acts"]
    # LPRAG substitutes: its example.* e-mails are excluded by NEL, its pseudonyms counted as names
    assert f["lprag"]["scorer_overlap"]["swallowed"] == 12 and f["lprag"]["scorer_overlap"]["counted"] > 10
    assert f["pad-regex"]["scorer_overlap"] is None
    verdicts = {i["metric"]: i["verdict"] for i in f["pad-regex"]["metrics"]}
    assert "acts there" in verdicts[EMAIL] and "within its interval" in verdicts[PERSON]


def test_the_tables_render(paper):
    page = paper_html(paper)
    assert "Table III" in page and "Findings per defense" in page and "53/150" in page and "(-100%)" in page and "Scorer check" in page
    assert paper_html({"table_two": [], "table_three": [], "findings": [], "columns": {}}) == ""
