"""``build_target`` is the one place a target is built: from an index (the pipeline, with the
stack's target generator and settings) or from an endpoint's ``TargetConfig``; every command and
the grid cell go through it, and no other module constructs a pipeline or a target adapter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ragleak.cli.attack import endpoint_config
from ragleak.config import StackConfig, TargetConfig
from ragleak.defenses import make_defense
from ragleak.errors import ConfigError
from ragleak.pipeline import AuditPolicy, CallableTarget, HttpTarget, PipelineTarget, StopRule, build_target
from ragleak.records import Document
from ragleak.testing import copy_context, tiny_stack

SRC = Path(__file__).resolve().parents[2] / "src" / "ragleak"
DOCS = [Document(id="ferry", text="The ferry to Clarebay leaves from pier four every ninety minutes."),
        Document(id="garden", text="The walled garden opens in May and closes at dusk.")]


def test_an_index_becomes_the_pipeline_with_the_stacks_generator_and_settings():
    config = StackConfig(n_threads=1, top_k=1, candidate_k=2, system_prompt="Answer briefly.", seed=7)
    stack = tiny_stack(config=config, target=copy_context)
    defense = make_defense("pad-regex")
    target = build_target(stack, stack.index(DOCS), defense, audit=AuditPolicy("off"), principal="alice")
    assert isinstance(target, PipelineTarget) and target.principal == "alice"
    pipeline = target.pipeline
    assert pipeline.generator is stack.generator("target") and pipeline.defense is defense
    assert (pipeline.top_k, pipeline.candidate_k, pipeline.system_prompt) == (1, 2, "Answer briefly.")
    assert pipeline.audit == AuditPolicy("off")
    assert pipeline.ctx.stack is stack and pipeline.ctx.seed == 7  # the stack's context at its seed
    response = target.answer("When does the ferry leave?")
    assert response.retrieved_ids == ["ferry"] and "pier four" in response.answer
    assert response.trace is not None and response.trace.defense == "pad-regex"
    assert stack.usage().calls_by_role["target"]["model_calls"] == 1  # the stack's target generator answered


def test_a_given_run_context_is_the_one_the_defense_is_prepared_with():
    stack = tiny_stack(target=copy_context)
    ctx = stack.context(3)
    assert build_target(stack, stack.index(DOCS), ctx=ctx).pipeline.ctx is ctx


def test_an_index_needs_a_stack():
    with pytest.raises(ConfigError, match="needs a stack"):
        build_target(None, tiny_stack().index(DOCS))


def test_an_http_config_becomes_an_http_target_with_its_stop_rule(monkeypatch):
    monkeypatch.setenv("RAG_TOKEN", "tok-4Fh8Kq2Lz")
    config = TargetConfig(kind="http", url="http://svc.example/ask", shape="openai", api_model="m1",
                          headers={"Authorization": "Bearer $env:RAG_TOKEN"}, timeout_s=5.0, retries=1,
                          stop_after_failures=3, error_window=10, max_error_rate=0.4)
    target = build_target(None, config)
    assert isinstance(target, HttpTarget)
    assert (target.url, target.shape, target.api_model, target.timeout_s, target.retries) == (
        "http://svc.example/ask", "openai", "m1", 5.0, 1)
    assert target.headers == {"Authorization": "Bearer $env:RAG_TOKEN"} and "tok-4Fh8Kq2Lz" not in repr(target)
    assert target.stop_rule == StopRule(3, 10, 0.4)


def test_a_callable_config_becomes_a_callable_target():
    target = build_target(tiny_stack(), TargetConfig(kind="callable", callable="posixpath:basename",
                                                     exposes_retrieved_ids=True))
    assert isinstance(target, CallableTarget) and target.exposes_retrieved_ids
    assert target.answer("a/b.txt").answer == "b.txt"


def test_an_endpoint_runs_its_own_defense():
    config = TargetConfig(kind="callable", callable="posixpath:basename")
    assert isinstance(build_target(None, config, make_defense("external")), CallableTarget)
    assert isinstance(build_target(None, config, make_defense("none")), CallableTarget)
    with pytest.raises(ConfigError, match="runs its own defense"):
        build_target(None, config, make_defense("pad-regex"))
    with pytest.raises(ConfigError, match="built from its index"):
        build_target(tiny_stack(), TargetConfig())


def test_the_command_lines_endpoint_keeps_literal_credentials_and_its_stop_setting():
    """``--header`` may carry a credential literally (it is masked, never stored), which a grid's
    ``TargetConfig`` refuses; ``--stop-after 0`` never stops the session."""
    with pytest.raises(ValueError, match="literally"):
        TargetConfig(kind="http", url="http://svc.example/ask", headers={"Authorization": "Bearer abc123"})
    config = endpoint_config("http://svc.example/ask", "json", None, None, None, None, 5.0, 0,
                             ["Authorization: Bearer abc123"], stop_after=0)
    target = build_target(None, config)
    assert isinstance(target, HttpTarget) and target.headers == {"Authorization": "Bearer abc123"}
    assert "abc123" not in target.name and target.retries == 0
    assert target.stop_rule is not None and target.stop_rule.reason([False] * 50) is None
    stopping = build_target(None, endpoint_config("http://svc.example/ask", "json", None, None, None, None, 5.0, 0,
                                                  None, stop_after=5))
    assert stopping.stop_rule == StopRule(5, 20, 0.5)  # type: ignore[union-attr]


# -- one place ---------------------------------------------------------------------------------

#: What only ``ragleak.pipeline`` constructs.
BUILT_HERE = {"RAGPipeline", "PipelineTarget", "HttpTarget", "CallableTarget"}
#: The callers the issue names: each builds its target through ``build_target``.
CALLERS = ["grid/cell.py", "cli/attack.py", "cli/__init__.py", "cli/tour.py", "verify/run.py"]


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
    return names


@pytest.mark.parametrize("module", CALLERS)
def test_each_caller_builds_its_target_through_build_target(module):
    calls = _calls(SRC / module)
    assert "build_target" in calls
    assert not calls & BUILT_HERE


def test_no_module_outside_the_pipeline_package_constructs_a_target():
    """``testing`` is the one exception: its ``pipeline_under_test`` builds a pipeline around a
    generator a test hands it, with no stack."""
    found = {str(p.relative_to(SRC)): sorted(_calls(p) & BUILT_HERE) for p in sorted(SRC.rglob("*.py"))
             if p.relative_to(SRC).parts[0] != "pipeline" and p.name != "testing.py"}
    assert not {k: v for k, v in found.items() if v}


def test_the_stack_no_longer_builds_a_pipeline():
    from ragleak.stack import Stack

    assert not hasattr(Stack, "pipeline")
