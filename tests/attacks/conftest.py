"""Fixtures for attack tests on the real default stack: small synthetic corpora, a short decoding
budget (answers capped at ``MAX_TOKENS``) and a target wrapper that records every corpus access."""

from __future__ import annotations

import contextlib
from typing import Sequence

import pytest

from ragleak.context import RunContext
from ragleak.pipeline.target import PipelineTarget
from ragleak.records import TargetResponse, Turn
from ragleak.stack import ROLES
from ragleak.testing import pipeline_under_test, target_under_test, tiny_stack

MAX_TOKENS = 120


def parts_context(llm=None, encoder=None, seed: int = 0) -> RunContext:
    """A run context whose stack hands ``llm`` (a ``ScriptedGenerator``) to every role; the
    embedder is the real one (``encoder`` is accepted for readability: it is the same MiniLM)."""
    scripts = {role: llm for role in ROLES} if llm is not None else {}
    return tiny_stack(**scripts).context(seed)


class GuardedIndex:
    """An index proxy that refuses every access made outside a target call."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.open = False
        self.accesses = 0

    def __getattr__(self, name):
        if not self.open:
            raise AssertionError(f"corpus accessed outside the target: index.{name}")
        self.accesses += 1
        return getattr(self._inner, name)


class RecordingTarget:
    """Wraps a PipelineTarget whose index is guarded; records every query that reaches the corpus."""

    name = "recording"
    exposes_retrieved_ids = True

    def __init__(self, pipeline) -> None:
        self.guard = GuardedIndex(pipeline.index)
        pipeline.index = self.guard
        self.inner = PipelineTarget(pipeline)
        self.calls: list[tuple[str, int]] = []
        self.answers: list[str] = []

    def answer(self, query: str, history: Sequence[Turn] = ()) -> TargetResponse:
        self.calls.append((query, len(history)))
        with self._open():
            response = self.inner.answer(query, history)
        self.answers.append(response.answer)
        return response

    @contextlib.contextmanager
    def _open(self):
        self.guard.open = True
        try:
            yield
        finally:
            self.guard.open = False


@pytest.fixture(scope="session")
def short_generator(generator_capped_at):
    return generator_capped_at(MAX_TOKENS)


@pytest.fixture(scope="session")
def corp_docs():
    from ragleak.corpora import load_corpus

    return load_corpus("synthetic-corp", n_docs=12)


@pytest.fixture(scope="session")
def corp_index(corp_docs, stack):
    return stack.index(corp_docs)


@pytest.fixture
def corp_pipeline(corp_index, short_generator):
    return pipeline_under_test(corp_index, short_generator, top_k=3)


@pytest.fixture
def corp_target(corp_index, short_generator):
    return target_under_test(corp_index, short_generator, top_k=3)
