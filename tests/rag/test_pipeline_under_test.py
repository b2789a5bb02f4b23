"""``ragleak.testing.pipeline_under_test``, the one way a test builds a pipeline: the real
pipeline, a script wrapped in a scripted generator, a generator used as given, and the options a
test leaves out at the pipeline's own defaults."""

from __future__ import annotations

import inspect

from ragleak.defenses import Defense
from ragleak.testing import ScriptedGenerator, pipeline_under_test, target_under_test


class Shout(Defense):
    name = "test-shout"
    hooks = frozenset({"postprocess"})

    def postprocess(self, query, answer, passages):
        return answer.upper()


def test_a_script_gets_a_scripted_generator_and_left_out_options_take_the_pipelines_defaults(fact_index):
    pipe = pipeline_under_test(fact_index, "the reply")
    defaults = inspect.signature(type(pipe)).parameters
    assert (pipe.top_k, pipe.candidate_k) == (defaults["top_k"].default, defaults["candidate_k"].default)
    assert pipe.audit == type(pipe.audit)() and pipe.ctx.seed == 0
    assert isinstance(pipe.generator, ScriptedGenerator)
    response = pipe.answer("When does the ferry leave?")
    assert response.answer == "the reply" and len(response.trace.context) == pipe.top_k


def test_a_generator_is_used_as_given_with_the_tests_options(fact_index):
    gen = ScriptedGenerator(lambda user: "ferry" if "ferry" in user else "no")
    pipe = pipeline_under_test(fact_index, gen, Shout(), top_k=2, candidate_k=4, seed=7)
    assert pipe.generator is gen and (pipe.top_k, pipe.candidate_k, pipe.ctx.seed) == (2, 4, 7)
    assert pipe.answer("When does the ferry leave?").answer == "FERRY" and gen.calls == 1


def test_a_target_wraps_that_pipeline_and_tells_its_principal(fact_index):
    target = target_under_test(fact_index, "ok", top_k=1, principal="alice")
    assert target.principal == "alice" and target.pipeline.top_k == 1
    assert target.answer("garden?").answer == "ok"
