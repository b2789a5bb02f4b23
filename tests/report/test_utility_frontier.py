"""The privacy-utility frontier: per defense and applied epsilon, the benign-question utility (with
an interval over seeds and questions), the similarity to the undefended answers, and the leakage
reading of the same defense and epsilon."""

from __future__ import annotations

import pytest

from ragleak.attacks import make_attack
from ragleak.attacks.utility import benign_qa
from ragleak.context import RunContext
from ragleak.grid.spec import CellSpec
from ragleak.grid.store import CellRecord, QueryCounts, RunStore, measured_record
from ragleak.measure import run_attack
from ragleak.metrics import MetricResult
from ragleak.records import Document, TargetResponse
from ragleak.report.utility import cluster_bootstrap, frontier_figure, utility_frontier

DOCS = [Document(id=f"d{i}", text=f"Client record {i}: Ann{i} Lee, CFO of Firm{i} Holdings, signed on Monday.",
                 metadata={"person": f"Ann{i} Lee", "company": f"Firm{i} Holdings"}) for i in range(12)]


class Oracle:
    """Answers the first ``right`` questions it is asked with the gold answer, the rest wrongly."""

    name = "oracle"

    def __init__(self, gold: dict[str, str], right: int) -> None:
        self.gold, self.right, self.asked = gold, right, 0

    def answer(self, query, history):
        self.asked += 1
        text = f"That is {self.gold[query]}." if self.asked <= self.right else "I cannot say."
        return TargetResponse(query=query, answer=text)


def _utility_cell(store: RunStore, defense: str, eps: float, seed: int, right: int) -> CellRecord:
    spec = CellSpec(attack="utility", defense=defense, corpus="synthetic-corp", epsilon=eps, seed=seed, budget=4,
                    attack_params={"questions": 4})
    probe = make_attack("utility", questions=4)
    _, view = probe.prepare_corpus(DOCS, seed)
    gold = {qa.question: qa.answer for qa in map(benign_qa, view.documents)}
    transcript, metrics = run_attack(probe, Oracle(gold, right), RunContext(seed=seed), [], budget=4, corpus_view=view)
    return store.write_cell(measured_record(spec, transcript, metrics, None, 0.8), transcript)


def _attack_cell(store: RunStore, defense: str, eps: float, seed: int, value: float) -> CellRecord:
    spec = CellSpec(attack="ps", defense=defense, corpus="synthetic-corp", epsilon=eps, seed=seed, budget=4)
    record = CellRecord(cell_id=spec.cell_id, spec=spec, status="ok", release_digest=f"{defense}{eps}{seed}{value}",
                        counts=QueryCounts(queries=4, answered=4, errors=0),
                        metrics={"pii_leaks": MetricResult(value=value, n=4, n_of="answered queries")})
    return store.write_cell(record)


def test_rows_pair_utility_and_leakage_per_defense_and_epsilon(tmp_path):
    store = RunStore(tmp_path)
    records = []
    for seed in (0, 1):
        for eps in (1.0, 5.0):  # none's epsilon is inert: its two cells per seed are one release
            records.append(_utility_cell(store, "none", eps, seed, right=4))
            records.append(_attack_cell(store, "none", eps, seed, value=6.0))
            records.append(_utility_cell(store, "dp-retrieval", eps, seed, right=1 if eps == 1.0 else 3))
            records.append(_attack_cell(store, "dp-retrieval", eps, seed, value=1.0 if eps == 1.0 else 4.0 + seed))
    out = utility_frontier(tmp_path, records, seed=0)
    assert out["leakage_metric"] == "pii_leaks" and out["utility_metric"] == "utility_f1"
    rows = {(r["defense"], r["epsilon"]): r for r in out["rows"]}
    assert set(rows) == {("none", None), ("dp-retrieval", 1.0), ("dp-retrieval", 5.0)}
    none, low_eps, high_eps = rows[("none", None)], rows[("dp-retrieval", 1.0)], rows[("dp-retrieval", 5.0)]
    assert none["cells"] == 2 and none["seeds"] == [0, 1]  # the epsilon copies collapsed
    assert none["exact_match"]["estimate"] == 1.0 and none["similarity"] is None
    assert low_eps["exact_match"]["estimate"] == pytest.approx(2 / 8)  # 1 of 4 right, two seeds
    assert high_eps["exact_match"]["estimate"] == pytest.approx(6 / 8)
    # the headline reading (token F1) sits in the row itself, beside its interval over seeds and questions
    assert low_eps["metric"] == "utility_f1" and low_eps["questions"] == 8 and low_eps["cells"] == 2
    assert low_eps["low"] <= low_eps["estimate"] <= low_eps["high"] and low_eps["epsilon_setting"] == "epsilon=1"
    # the answers the baseline gave to the same questions: equal ones read 1, refusals less
    sim = high_eps["similarity"]["rouge_l"]
    assert sim["n"] == 8 and sim["estimate"] < 1.0 and max(sim["estimate"], sim["high"]) <= 1.0
    assert low_eps["similarity"]["rouge_l"]["estimate"] < sim["estimate"]
    assert (none["leakage"]["estimate"], low_eps["leakage"]["estimate"]) == (6.0, 1.0)
    assert none["leakage"]["title"] == out["leakage_title"] and none["leakage"]["higher_is_leakier"]
    assert high_eps["leakage"]["estimate"] == pytest.approx(4.5) and high_eps["leakage"]["cells"] == 2
    svg = frontier_figure(out["rows"], out["leakage_title"])
    assert svg.startswith("<svg") and "dp-retrieval" in svg and "eps=5" in svg


def test_a_run_without_the_probe_has_no_utility_section_and_no_figure(tmp_path):
    store = RunStore(tmp_path)
    assert utility_frontier(tmp_path, [_attack_cell(store, "none", 1.0, 0, 1.0)]) is None
    assert frontier_figure([]) is None


def test_the_interval_covers_run_to_run_variation_not_only_questions():
    # two seeds that disagree completely, each unanimous within: resampling questions alone would
    # call the mean 0.5 precise; resampling the cells too shows it is not
    out = cluster_bootstrap([[0.0] * 6, [1.0] * 6], seed=0)
    assert out["estimate"] == 0.5 and out["low"] == 0.0 and out["high"] == 1.0
    one = cluster_bootstrap([[0.0, 1.0, 1.0, 0.0]], seed=0)
    assert one["cells"] == 1 and 0.0 <= one["low"] < 0.5 < one["high"] <= 1.0
    assert cluster_bootstrap([[0.4]], seed=0)["low"] is None  # one question: no interval
