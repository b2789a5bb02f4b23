"""Membership inference under failed probes: a candidate with no answered probe is left out and
counted, a candidate missing one scorer's probe is left out of that scorer only, and neither the
metric nor the report's ROC plot raises or silently drops MI AUC (the first candidate included)."""

from __future__ import annotations

import pytest

from ragleak.attacks.base import MembershipScore
from ragleak.attacks.membership import MembershipInference
from ragleak.grid.spec import CellSpec
from ragleak.grid.store import CellRecord, QueryCounts, RunStore
from ragleak.metrics import MetricContext
from ragleak.metrics.compute import compute_metrics
from ragleak.metrics.membership import MembershipAUC
from ragleak.pipeline.target import CallableTarget
from ragleak.records import Document
from ragleak.report import plots
from ragleak.testing import tiny_stack

# ten documents: the first six are the knowledge base, three of them tested as members, against
# the four after it as non-members
DOCS = [Document(id=f"d{i}", text=f"Record {i}: patient {i} of ward {i % 3} was seen on day {i} by doctor "
                 f"number {100 + i} about a sprained ankle number {i}.") for i in range(10)]


class MemberEcho:
    """Answers every probe from the knowledge base (so members score higher), failing the calls listed."""

    def __init__(self, kb: list[Document], failing: set[int]) -> None:
        self.kb, self.failing, self.calls = kb, failing, 0

    def __call__(self, query: str) -> str:
        call, self.calls = self.calls, self.calls + 1
        if call in self.failing:
            raise TimeoutError("probe timed out")
        hit = next((d for d in self.kb if d.text.split(" by ")[0] in query or d.text[:30] in query), None)
        return f"Yes. {hit.text}" if hit is not None else "No."


def _run(failing: set[int]):
    attack = MembershipInference(scorers=("heuristic", "rag-mia"), n_members=3, n_nonmembers=4, kb_size=6)
    kb, view = attack.prepare_corpus(DOCS, seed=0)
    transcript = attack.run(CallableTarget(MemberEcho(kb, failing)), tiny_stack().context(0), corpus_view=view)
    return transcript


@pytest.fixture(scope="module")
def faulty():
    """Calls 0 and 1 are both probes of the first candidate; call 4 is the heuristic probe of the third."""
    transcript = _run({0, 1, 4})
    return transcript, compute_metrics(transcript, MetricContext(seed=0))


def test_a_candidate_without_answered_probes_is_excluded_and_counted(faulty):
    transcript, result = faulty
    first, third = transcript.membership[0], transcript.membership[2]
    assert first.scores == {} and set(third.scores) == {"rag-mia"}
    mi = result["mi_auc"]
    assert mi.value is not None and mi.failed == 3
    assert mi.details["excluded_candidates"] == 1
    assert result["mi_auc[heuristic]"].n == 5 and result["mi_auc[heuristic]"].details["excluded_candidates"] == 2
    assert result["mi_auc[rag-mia]"].n == 6 and result["mi_auc[rag-mia]"].details["excluded_candidates"] == 1
    assert mi.n == result[f"mi_auc[{mi.details['headline_scorer']}]"].n


def test_every_probe_failed_gives_no_reading_and_counts_every_candidate():
    transcript = _run(set(range(14)))
    mi = MembershipAUC().compute(transcript, MetricContext(seed=0))
    assert mi.value is None and mi.n == 0 and mi.failed == 14 and mi.details["excluded_candidates"] == 7


def test_one_scorer_missing_on_every_candidate_keeps_the_other():
    scores = [MembershipScore(doc_id=f"c{i}", scores={"rag-mia": float(i % 2)}, member=bool(i % 2)) for i in range(6)]
    transcript = _run(set()).model_copy(update={"membership": scores})
    mi = MembershipAUC().compute(transcript, MetricContext(seed=0))
    assert mi.value == 100.0 and set(mi.parts) == {"rag-mia"}


def test_the_roc_plot_reads_only_scored_candidates(tmp_path, faulty):
    transcript, metrics = faulty
    spec = CellSpec(attack="mi", defense="none", corpus="synthetic-corp")
    store = RunStore(tmp_path)
    store.cells_dir.mkdir(parents=True)
    store.transcripts_dir.mkdir(parents=True)
    store.write_transcript(spec.cell_id, transcript.to_json())
    record = CellRecord(cell_id=spec.cell_id, spec=spec, status="partial", counts=QueryCounts.of(transcript),
                        metrics=metrics)
    assert record.metrics["mi_auc"].details["headline_scorer"] == "heuristic"  # the scorer the first candidate lacks
    svg = plots.roc_curves(tmp_path, [record])
    assert svg is not None and "<svg" in svg
