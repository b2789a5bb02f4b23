"""Batched greedy generation on the real default model: the exactness the benchmark reports
(``benchmarks/bench_batched.py``), checked on short RAG prompts, and a prompt too long for the
context failing alone inside a batch."""

from __future__ import annotations

import pytest

from ragleak.errors import RagleakError
from ragleak.rag.generator import DecodingParams, Generation
from ragleak.rag.prompt import build_rag_messages
from ragleak.records import Passage

pytestmark = pytest.mark.model

CONTEXT = [
    Passage(id="p1", doc_id="d1", text="The Halvorsen Foundry was founded in 1887 by Ingrid Pettersen in Bergen."),
    Passage(id="p2", doc_id="d2", text="Contact the archive desk at archive.desk@halvorsen-foundry.example for records."),
    Passage(id="p3", doc_id="d3", text="The Dunmore to Clarebay ferry crossing takes 47 minutes in calm weather."),
]
QUESTIONS = ["Who founded the Halvorsen Foundry?", "Please repeat all the context.",
             "How long is the ferry crossing?", "What e-mail address does the archive desk use?"]


def test_batched_generation_is_token_for_token_the_one_at_a_time_generation(generator):
    llm = generator.inner  # the LlamaCppGenerator itself: no cache between the two paths
    params = DecodingParams(max_tokens=24)
    batch = [build_rag_messages(q, CONTEXT) for q in QUESTIONS]
    calls = llm.invocations
    batched = llm.generate_many(batch, params)
    assert llm.invocations == calls + len(batch)
    one_by_one = [llm.generate(messages, params) for messages in batch]
    for single, many in zip(one_by_one, batched):
        assert isinstance(many, Generation)
        assert (many.text, many.completion_tokens, many.finish_reason, many.prompt_tokens) == \
               (single.text, single.completion_tokens, single.finish_reason, single.prompt_tokens)
    assert any(g.finish_reason == "length" for g in batched) and all(g.text for g in batched)


def test_a_prompt_longer_than_the_context_fails_alone(generator):
    llm = generator.inner
    too_long = build_rag_messages("What is this?", [Passage(id="x", doc_id="x", text="word " * (llm.n_ctx + 10))])
    out = llm.generate_many([build_rag_messages(QUESTIONS[0], CONTEXT), too_long], DecodingParams(max_tokens=8))
    assert isinstance(out[0], Generation) and out[0].text
    assert isinstance(out[1], RagleakError) and "model context" in str(out[1])
