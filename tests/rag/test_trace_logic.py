"""Hook tracing with a scripted generator (the logic, not the model)."""

from __future__ import annotations

from ragleak.defenses import Defense
from ragleak.pipeline.build import build_target
from ragleak.records import Document, Trace
from ragleak.testing import ScriptedGenerator, echo, pipeline_under_test, tiny_stack


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
    trace = pipeline_under_test(fact_index, echo, DropLowest(), top_k=2, candidate_k=6).answer("ferry").trace
    assert [h.hook for h in trace.hooks if h.changed] == ["score_retrieval"]
    assert len(trace.rescored) == len(trace.candidates) - 1


def test_overriding_without_changing_counts_as_unchanged(fact_index):
    gen = ScriptedGenerator()
    trace = pipeline_under_test(fact_index, gen, PassThroughOverride(), top_k=2).answer("garden").trace
    assert not any(h.changed for h in trace.hooks)
    assert gen.calls == 2  # the defense's own call plus the pipeline's reference for the audit


def test_generate_and_postprocess_changes_are_recorded(fact_index):
    response = pipeline_under_test(fact_index, echo, Redact(), top_k=2).answer("library")
    assert response.answer == "[x] text"
    assert {h.hook for h in response.trace.hooks if h.changed} == {"generate", "postprocess"}


def test_trace_round_trips_through_json(fact_index):
    from ragleak.records import Trace

    trace = pipeline_under_test(fact_index, echo, top_k=2).answer("garden").trace
    assert Trace.model_validate_json(trace.model_dump_json()) == trace


class Paraphrase(Defense):
    """Replaces generation with its own call on a different prompt (like a voting defense)."""

    name = "paraphrase"
    hooks = frozenset({"generate"})

    def generate(self, messages, passages, generator):
        return "paraphrased: " + generator.generate(messages[:1] + [messages[-1].model_copy(
            update={"content": "Rephrase: " + messages[-1].content})]).text


QUERIES = [f"what about the ferry schedule number {i}?" for i in range(12)]


def _run(stack, defense, policy):
    from ragleak.pipeline.rag import AuditPolicy

    pipeline = build_target(stack, stack.index(FACTS), defense, audit=AuditPolicy(*policy)).pipeline
    return pipeline, [pipeline.answer(q) for q in QUERIES]


FACTS = [Document(id=f"d{i}", text=t) for i, t in enumerate(
    ["The ferry leaves at noon.", "The garden opens in May.", "Invoices are due on Fridays."])]


def test_audit_policy_changes_the_trace_never_the_answer(tmp_path):
    stack = tiny_stack(tmp_path / "cache.sqlite", target=echo)
    runs = {}
    for policy in (("all",), ("sample", 0.0), ("sample", 1.0), ("off",)):
        fresh = tiny_stack(tmp_path / f"{policy}.sqlite", target=echo)
        pipeline, responses = _run(fresh, Paraphrase(), policy)
        runs[policy] = (pipeline.audit_counts.as_dict(), [r.answer for r in responses],
                        [r.trace.hook("generate") for r in responses], fresh.usage().model_calls)
    answers = {tuple(a) for _, a, _, _ in runs.values()}
    assert len(answers) == 1  # the policy never reaches the answer
    counts, _, hooks, calls = runs[("all",)]
    assert counts == {"generated": 12, "cached": 0, "skipped": 0} and calls == 24
    assert all(h.audited and h.changed for h in hooks)
    counts, _, hooks, calls = runs[("off",)]
    assert counts == {"generated": 0, "cached": 0, "skipped": 12} and calls == 12
    assert not any(h.audited or h.changed for h in hooks)
    counts, _, hooks, calls = runs[("sample", 0.0)]
    assert counts == {"generated": 1, "cached": 0, "skipped": 11} and calls == 13  # the first query only
    assert [h.audited for h in hooks] == [True] + [False] * 11
    assert runs[("sample", 1.0)][0] == {"generated": 12, "cached": 0, "skipped": 0}
    # a baseline run that made the plain generations: every reference is then a cache hit, even with audit off
    baseline = build_target(stack, stack.index(FACTS))
    for q in QUERIES:
        baseline.answer(q)
    before = stack.usage().model_calls
    pipeline, responses = _run(stack, Paraphrase(), ("off",))
    assert pipeline.audit_counts.as_dict() == {"generated": 0, "cached": 12, "skipped": 0}
    assert stack.usage().model_calls - before == 12  # the defense's own generations only
    assert all(r.trace.hook("generate").audited for r in responses)


def test_sampling_is_by_prompt_so_twins_sample_the_same_queries():
    from ragleak.pipeline.rag import AuditPolicy

    policy = AuditPolicy("sample", 0.3)
    prompts = [f"prompt {i}" for i in range(2000)]
    chosen = [p for p in prompts if policy.samples(p)]
    assert 0.25 < len(chosen) / len(prompts) < 0.35
    assert chosen == [p for p in prompts if AuditPolicy("sample", 0.3).samples(p)]
    assert set(chosen) <= {p for p in prompts if AuditPolicy("sample", 0.5).samples(p)}  # nested shares


def test_unaudited_calls_are_counted_apart_from_the_rate():
    from ragleak.audit.trace import hook_activity
    from ragleak.records import HookRecord

    def trace(digest_in):
        return Trace(query="q", defense="d", model="m", candidates=[], rescored=[], context=[], prompt="p",
                     answer="a", hooks=[HookRecord(hook="generate", digest_in=digest_in, digest_out="x")],
                     cache_hit=False, timings={})

    act = hook_activity([trace("x"), trace("y"), trace(None), trace(None)])["d"]["generate"]
    assert (act.changed, act.calls, act.unaudited) == (1, 2, 2) and act.rate == 0.5
