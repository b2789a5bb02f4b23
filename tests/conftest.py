"""Shared fixtures: the real default stack (packaged Qwen2.5-Coder-0.5B, MiniLM, FAISS), built once.

Model tests use one llama.cpp thread (set by `make test` via RAGLEAK_THREADS=1; set here too) and
a generation cache private to the test session, so no test is served from a cache another run
filled.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAGLEAK_THREADS", "1")

from model_marks import _models_only_in_model_tests, pytest_collection_modifyitems  # noqa: E402,F401
from ragleak.config import StackConfig  # noqa: E402
from ragleak.records import Document  # noqa: E402

# Facts chosen so each answer sits in exactly one passage and is not world knowledge.
FACT_DOCS = [
    Document(id="foundry", text="The Halvorsen Foundry in the town of Skarvik was founded in 1874 by Ingrid Pettersen, "
             "who ran it for thirty years and cast the bells of the harbour church."),
    Document(id="lab", text="The Quillfeather Robotics Lab keeps its spare servo motors in storage room B-17, "
             "next to the calibration bench used by the night shift."),
    Document(id="clinic", text="Patient record 4471: Maria Gonzales, born 1984-03-12, was treated at Riverside Clinic "
             "for asthma in May 2023. Her phone number is 555-0187."),
    Document(id="garden", text="The Oberlin community garden opens at 7 am on weekdays and is closed on Mondays "
             "for irrigation maintenance."),
    Document(id="ferry", text="The ferry between Dunmore and Clarebay leaves every ninety minutes and the crossing "
             "takes forty minutes in calm weather."),
    Document(id="library", text="The Westbrook library lends telescopes to members for two weeks; the waiting list "
             "is kept by the head librarian, Tomas Eriksen."),
]


@pytest.fixture(scope="session")
def stack_config(tmp_path_factory) -> StackConfig:
    return StackConfig(n_threads=1, cache_path=tmp_path_factory.mktemp("cache") / "generations.sqlite",
                       decoding={"max_tokens": 160})


@pytest.fixture(scope="session")
def stack(stack_config):
    """The default stack, assembled once for the test session (its cache is the session's own)."""
    from ragleak.stack import Stack

    return Stack(stack_config)


@pytest.fixture(scope="session")
def embedder(stack):
    e = stack.embedder()
    e.prepare()
    return e


@pytest.fixture(scope="session")
def fact_index(stack):
    return stack.index(FACT_DOCS)


@pytest.fixture(scope="session")
def generator(stack):
    return stack.generator("target")


@pytest.fixture(scope="session")
def generator_capped_at(stack_config):
    """``make(max_tokens)``: the real target generator with answers capped at ``max_tokens`` (keeps
    model tests short), assembled by the Stack over the session's cache."""
    from ragleak.rag.generator import DecodingParams
    from ragleak.stack import Stack

    def make(max_tokens: int):
        return Stack(stack_config.model_copy(update={"decoding": DecodingParams(max_tokens=max_tokens)})).generator()

    return make


@pytest.fixture(scope="session")
def pipeline(fact_index, stack_config):
    from ragleak.pipeline.build import build_target
    from ragleak.stack import Stack

    return build_target(Stack(stack_config.model_copy(update={"top_k": 3})), fact_index).pipeline
