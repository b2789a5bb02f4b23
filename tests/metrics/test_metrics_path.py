"""The one metric path: every registered metric, through ``compute_metrics``, on transcripts of
each kind (built directly, no model): n / failed say what a value rests on, failed queries are
never scored, and a transcript whose every query failed yields None, never 0."""

from __future__ import annotations

import pytest
from metric_transcripts import KINDS, PASSAGES, all_failed, asymmetry, canary, extraction, membership, utility

from ragleak.metrics import METRICS, MetricContext, MetricResult, split_key
from ragleak.metrics.compute import applies, compute_metrics


@pytest.fixture(scope="module")
def stack(stack_config):
    from ragleak.stack import Stack

    return Stack(stack_config)


def _expected_n(result: MetricResult, t) -> int:
    answered = [q for q in t.queries if q.ok]
    return {"answered queries": len(answered), "answered questions": len(answered), "candidates": sum(1 for m in t.membership if m.member is not None),
            "canaries": len(t.scoring.get("secrets", {})), "indexed chunks": len(PASSAGES),
            "sentences": sum(len(r["labels"]) for r in t.scoring.get("asymmetry", {}).get("labels", [])
                             if r["query_index"] in {q.index for q in answered})}[result.n_of]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_applicable_metric_yields_a_result_with_n_and_failures(kind, stack):
    t = KINDS[kind]()
    failed = sum(1 for q in t.queries if not q.ok)
    assert failed >= 1
    results = compute_metrics(t, MetricContext(PASSAGES, stack, seed=0))
    names = {split_key(k)[0] for k in results}
    assert names == {n for n in METRICS.names() if applies(METRICS.get(n)(), t, MetricContext(PASSAGES, stack))}
    # a benign probe's transcript is read by the utility metrics alone, any other by none of them
    assert all(n.startswith("utility_") == (kind == "utility") for n in names)
    for key, r in results.items():
        assert isinstance(r, MetricResult) and not r.parts, key
        assert r.failed == failed, key
        assert r.n == _expected_n(r, t), key
        assert r.value is not None or r.note, key
        if r.interval is not None:
            assert r.interval[0] <= r.value <= r.interval[1], key


def test_a_transcript_whose_every_query_failed_yields_none_never_zero(stack):
    t = all_failed()
    results = compute_metrics(t, MetricContext(PASSAGES, stack))
    # membership, canaries, attribution and every answer metric apply ...
    assert {"mi_auc", "canary_recovery", "attribution_esr", "nel_strict", "rougeL_max",
            "embedding_similarity"} <= set(results)
    for key, r in results.items():  # ... and none of them reads a failure as a zero
        assert r.value is None and r.note and r.failed == 3, key


def test_values_on_the_built_transcripts(stack):
    ctx = MetricContext(PASSAGES, stack)
    ex = compute_metrics(extraction(), ctx)
    assert ex["nel_strict"].value == 2.0 and ex["nel_strict[EMAIL_REAL]"].value == 1.0
    assert ex["nel_strict[PERSON_NAME]"].value == 1.0 and ex["nel_loose"].value >= 2.0
    assert ex["verbatim_leaks"].value == pytest.approx(0.5)  # one of two answers leaks one chunk
    assert ex["verbatim_leaks"].details["leaked_passage_ids"] == ["d1#0"]
    assert ex["recovered_chunk_rate"].value == pytest.approx(1 / 3)
    # best recall: the leaked chunk 1.0; the paraphrase keeps ferry, dunmore, clarebay of 10 tokens
    assert ex["rougeL_max"].value == pytest.approx((1.0 + 0.3) / 2)
    assert ex["embedding_similarity"].value > 0.5
    assert "canary_recovery" not in ex and "mi_auc" not in ex and "attribution_f1" not in ex
    assert "utility_f1" not in ex
    # benign questions: the right answer holds the gold span, the wrong one shares no token; the
    # failed question is counted, not scored; no leakage metric reads them
    ut = compute_metrics(utility(), ctx)
    assert set(ut) == {"utility_f1", "utility_em"}
    assert ut["utility_em"].value == 0.5 and ut["utility_em"].n == 2 and ut["utility_em"].failed == 1
    assert ut["utility_f1"].value == pytest.approx((2 / 3 + 0.0) / 2)  # P 2/4, R 2/2: F1 2/3; then 0

    mi = compute_metrics(membership(), ctx)
    assert mi["mi_auc[loss]"].value == 100.0 and mi["mi_auc[overlap]"].value < 100.0
    assert mi["mi_auc"].value == 100.0 and mi["mi_auc"].details["headline_scorer"] == "loss"

    ca = compute_metrics(canary(), ctx)["canary_recovery"]
    assert ca.value == pytest.approx(1 / 3) and ca.details["recovered"] == 1  # index 0 failed: no hit
    assert ca.interval[0] < 1 / 3 < ca.interval[1]

    at = compute_metrics(asymmetry(), ctx)
    # answered queries 0, 1, 3: y = 1 1 0 | 0 1 | 1 0, predicted = 1 0 0 | 0 1 | 1 0
    assert at["attribution_esr"].value == pytest.approx(3 / 4) and at["attribution_esr"].n == 7
    assert at["attribution_f1"].value == pytest.approx(6 / 7)
    assert at["attribution_auc"].value == pytest.approx(11 / 12)  # one (private, public) pair misordered


def test_an_undefined_reading_says_why():
    t = membership()
    t.membership = [m for m in t.membership if m.member]  # members only: AUC undefined
    r = compute_metrics(t, MetricContext(PASSAGES))["mi_auc"]
    assert r.value is None and "one class" in r.note
    t = asymmetry()
    for row in t.scoring["asymmetry"]["labels"]:
        row["labels"] = [0] * len(row["labels"])
    results = compute_metrics(t, MetricContext(PASSAGES))
    assert results["attribution_esr"].value is None and results["attribution_auc"].value is None
    assert "embedding_similarity" not in results  # no stack: the metric that needs one is not computed


def test_every_registered_metric_reaches_the_summary(tmp_path, stack):
    from ragleak.grid.spec import GridConfig
    from ragleak.grid.store import CellRecord, QueryCounts, RunStore
    from ragleak.report.summary import summarize

    config = GridConfig(attacks=["ps", "mi", "canary", "asymmetry", "utility"], defenses=["none"],
                        corpora=["synthetic-corp"])
    cells = config.expand()
    store = RunStore(tmp_path)
    store.init(config, cells)
    builders = {"ps": extraction, "mi": membership, "canary": canary, "asymmetry": asymmetry, "utility": utility}
    for spec in cells:
        t = builders[spec.attack]()
        store.write_transcript(spec.cell_id, t.to_json())
        store.write(CellRecord(cell_id=spec.cell_id, spec=spec, status="ok", transcript_digest=spec.cell_id,
                               metrics=compute_metrics(t, MetricContext(PASSAGES, stack)),
                               counts=QueryCounts.of(t)))
    summary = summarize(tmp_path)
    in_levels = {r["metric"] for r in summary["levels"]}
    in_cells = {k for c in summary["cells_table"] for k in c["metrics"]}
    for name in METRICS.names():
        assert any(split_key(k)[0] == name for k in in_cells & set(summary["metrics"])), name
        assert any(split_key(k)[0] == name for k in in_levels), name
    assert {"nel_strict[EMAIL_REAL]", "nel_strict[PERSON_NAME]", "mi_auc[loss]"} <= in_levels
    assert summary["metrics"]["nel_strict[EMAIL_REAL]"]["title"] == "NEL strict [EMAIL_REAL]"
    assert summary["canaries"][0]["recovered"] == 1 and summary["attribution"][0]["sentences"] == 7
    assert summary["cells_table"][0]["counts"]["errors"] >= 1
