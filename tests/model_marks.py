"""The `model` mark, kept exact: `make test-fast` (-m "not model") must run no LLM and no NLI model.

* A test that uses a fixture which runs the LLM or the NLI model (directly or through another
  fixture) is marked `model` at collection.
* A test not marked `model` that reaches the LLM or the NLI model anyway (a model built in the
  test body, a CLI command that runs the real stack in-process) fails, naming the mark it lacks.
"""

from __future__ import annotations

import importlib

import pytest

# Fixtures (defined in a conftest) whose value runs a real model when used.
MODEL_FIXTURES = frozenset({"generator", "generator_capped_at", "pipeline", "short_generator", "corp_pipeline", "nli"})

# Every path into the real models: llama.cpp is reached through LlamaCppGenerator.llm, the ONNX
# NLI classifier through PackagedOnnxNLI.p1 (wherever the class lives on this branch).
_ENTRY_POINTS = [
    ("ragleak.rag.generator", "LlamaCppGenerator", "llm"),
    ("ragleak.nlp.nli", "PackagedOnnxNLI", "p1"),
    ("ragleak.attacks.asymmetry.nli", "PackagedOnnxNLI", "p1"),
]


def _uses_model_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name in MODEL_FIXTURES & set(item.fixturenames):
        defs = info.name2fixturedefs.get(name) or ()
        # the fixture the test resolves to (a test module may define its own, model-free one)
        if defs and defs[-1].func.__module__.split(".")[-1] == "conftest":
            return True
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("model") is None and _uses_model_fixture(item):
            item.add_marker(pytest.mark.model)


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"this test runs {what} but is not marked `model` (add @pytest.mark.model)")

    return refuse


@pytest.fixture(autouse=True)
def _models_only_in_model_tests(request, monkeypatch):
    if request.node.get_closest_marker("model") is not None:
        yield
        return
    for module_name, class_name, attribute in _ENTRY_POINTS:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):  # the class lives in one of the two modules
            continue
        refuse = _refuse(f"{class_name} (a real model)")
        monkeypatch.setattr(cls, attribute, property(refuse) if isinstance(getattr(cls, attribute), property)
                            else refuse)
    yield
