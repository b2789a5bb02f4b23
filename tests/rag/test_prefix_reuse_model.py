"""The prefix-reuse mode on the real default model: the claims its cache keys rest on.

* A text depends on the prompt alone: a turn generated right after the previous turn of its
  conversation (the KV state of the shared messages reused) is the turn generated cold, after
  an unrelated prompt or after the one-shot mode cleared the context.
* Only the messages a prompt does not share with the previous one are prefilled: a
  conversation's third turn reuses its system prompt and first turn.
"""

from __future__ import annotations

import pytest

from ragleak.rag.generator import DecodingParams
from ragleak.rag.prompt import ChatMessage, build_rag_messages, message_ends
from ragleak.records import Passage, Turn

pytestmark = pytest.mark.model

REUSE = DecodingParams(max_tokens=24, reuse_prefix=True)
PASSAGES = [Passage(id="p0", doc_id="d0", text="Mara Oyelaran keeps the ledger for the Harrow Street clinic; "
                                                 "her extension is 4471 and she started in March 2021.")]
QUESTIONS = ["Who keeps the ledger?", "What is her extension?", "When did she start?"]


def _conversation(llm, params):
    """Each turn's messages and generation, one turn after the other."""
    history, turns = [], []
    for q in QUESTIONS:
        messages = build_rag_messages(q, PASSAGES, history=history)
        before = llm.prefilled_tokens
        out = llm.generate(messages, params)
        turns.append((messages, out, llm.prefilled_tokens - before))
        history = history + [Turn(query=q, answer=out.text)]
    return turns


def test_a_reused_prefix_gives_the_cold_text_and_prefills_only_the_new_messages(generator):
    llm = generator.inner  # the LlamaCppGenerator itself: no cache between the paths compared
    warm = _conversation(llm, REUSE)
    unrelated = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Name a colour.")]
    for i, (messages, out, prefilled) in enumerate(warm):
        # cold: another prompt of this mode, then the one-shot mode, left the context elsewhere
        llm.generate(unrelated, REUSE if i % 2 else DecodingParams(max_tokens=4))
        before = llm.prefilled_tokens
        cold = llm.generate(messages, REUSE)
        assert llm.prefilled_tokens - before == cold.prompt_tokens  # nothing was reusable
        assert (cold.text, cold.completion_tokens, cold.finish_reason) == \
            (out.text, out.completion_tokens, out.finish_reason)
    # the third turn shares the system prompt, the first question and its answer with the second
    messages, out, prefilled = warm[2]
    prompt = llm.render(messages)
    shared = len(llm.tokenize(prompt[:message_ends(prompt)[2]]))
    assert 0 < prefilled == out.prompt_tokens - shared
