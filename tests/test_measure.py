"""``run_attack``: an attack run against a target and measured by every metric that applies, or a
transcript written earlier measured as it stands; the transcript is handed to ``keep`` before any
metric runs."""

from __future__ import annotations

import pytest

from ragleak import measure
from ragleak.attacks import make_attack
from ragleak.errors import ConfigError
from ragleak.measure import run_attack
from ragleak.metrics.base import MetricContext
from ragleak.metrics.compute import compute_metrics
from ragleak.pipeline import CallableTarget, build_target
from ragleak.records import Document, Passage
from ragleak.testing import copy_context, tiny_stack

DOCS = [Document(id=f"d{i}", text=f"Record {i}: Zorbel Quant{i} can be reached at zq{i}@quant.example.")
        for i in range(4)]


def test_an_attack_is_run_and_measured_on_the_given_passages():
    stack = tiny_stack(target=copy_context)
    index = stack.index(DOCS)
    ctx = stack.context(3)
    transcript, metrics = run_attack(make_attack("ps"), build_target(stack, index, ctx=ctx), ctx, index.passages,
                                     budget=3)
    assert transcript.attack == "ps" and len(transcript.queries) == 3 and transcript.seed == 3
    assert metrics == compute_metrics(transcript, MetricContext(index.passages, stack, 3))
    assert metrics["verbatim_leaks"].value > 0  # the target copied its context: the passages are the ground truth


def test_a_transcript_written_earlier_is_measured_as_it_stands():
    stack = tiny_stack(target=copy_context)
    index = stack.index(DOCS)
    ran = run_attack(make_attack("ps"), build_target(stack, index), stack.context(0), index.passages, budget=2)
    again = run_attack(ran.transcript, None, stack.context(0), index.passages)
    assert again.transcript is ran.transcript and again.metrics == ran.metrics
    blind = run_attack(ran.transcript, None, stack.context(0))  # no corpus: no extraction ground truth
    assert ran.metrics["verbatim_leaks"].value == 3 and blind.metrics["verbatim_leaks"].value is None


def test_a_transcript_queries_no_target_and_an_attack_needs_one():
    stack = tiny_stack()
    transcript = run_attack(make_attack("ps"), CallableTarget(lambda q: "no"), stack.context(0), budget=1).transcript
    with pytest.raises(ConfigError, match="no target"):
        run_attack(transcript, CallableTarget(lambda q: "no"), stack.context(0))
    with pytest.raises(ConfigError, match="needs a target"):
        run_attack(make_attack("ps"), None, stack.context(0))


def test_the_transcript_is_kept_before_a_metric_can_fail(monkeypatch):
    kept = []

    def failing(transcript, context):
        assert kept == [transcript]  # already handed over
        raise RuntimeError("a metric failed")

    monkeypatch.setattr(measure, "compute_metrics", failing)
    with pytest.raises(RuntimeError, match="a metric failed"):
        run_attack(make_attack("ps"), CallableTarget(lambda q: "no"), tiny_stack().context(0),
                   [Passage(id="d0#0", doc_id="d0", text="x")], budget=2, keep=kept.append)
    assert len(kept) == 1 and len(kept[0].queries) == 2
