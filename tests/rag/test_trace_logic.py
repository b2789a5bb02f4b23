"""Hook tracing with a scripted generator (the logic, not the model)."""

from __future__ import annotations

from ragleak.defenses import Defense
from ragleak.rag.pipeline import RAGPipeline
from ragleak.testing import ScriptedGenerator


class DropLowest(Defense):
    name = "drop-lowest"
    hooks = frozenset({"score_retrieval"})

    def score_retrieval(self, query, candidates):
        return candidates[:-1]


class PassThroughOverride(Defense):
    """Overrides every hook but changes nothing: the trace must say 'unchanged' for all four."""

    name = "noop-overrides"
    hooks = frozenset({"score_retrieval", "rewrite_context", "generate", "postprocess"})

    def score_retrieval(self, query, candidates):
        return list(candidates)

    def rewrite_context(self, query, passages):
        return list(passages)

    def generate(self, messages, passages, generator):
        return generator.generate(messages).text

    def postprocess(self, query, answer, passages):
        return answer


class Redact(Defense):
    name = "redact"
    hooks = frozenset({"postprocess", "generate"})

    def generate(self, messages, passages, generator):
        return "fixed text"

    def postprocess(self, query, answer, passages):
        return answer.replace("fixed", "[x]")


def test_score_hook_change_is_recorded(fact_index):
    trace = RAGPipeline(fact_index, ScriptedGenerator(), DropLowest(), top_k=2, candidate_k=6).answer("ferry").trace
    assert [h.hook for h in trace.hooks if h.changed] == ["score_retrieval"]
    assert len(trace.rescored) == len(trace.candidates) - 1


def test_overriding_without_changing_counts_as_unchanged(fact_index):
    gen = ScriptedGenerator()
    trace = RAGPipeline(fact_index, gen, PassThroughOverride(), top_k=2).answer("garden").trace
    assert not any(h.changed for h in trace.hooks)
    assert gen.calls == 2  # the defense's own call plus the pipeline's reference for the audit


def test_generate_and_postprocess_changes_are_recorded(fact_index):
    response = RAGPipeline(fact_index, ScriptedGenerator(), Redact(), top_k=2).answer("library")
    assert response.answer == "[x] text"
    assert {h.hook for h in response.trace.hooks if h.changed} == {"generate", "postprocess"}


def test_trace_round_trips_through_json(fact_index):
    from ragleak.records import Trace

    trace = RAGPipeline(fact_index, ScriptedGenerator(), top_k=2).answer("garden").trace
    assert Trace.model_validate_json(trace.model_dump_json()) == trace
