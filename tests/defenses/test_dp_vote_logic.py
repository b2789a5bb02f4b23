"""dp-vote's plumbing without the LLM: prompt parsing, the voter partition, the guarantee."""

from __future__ import annotations

import pytest

from ragleak.context import RunContext
from ragleak.defenses.dp_vote import DPVote
from ragleak.errors import RagleakError
from ragleak.rag.prompt import DEFAULT_SYSTEM_PROMPT, ChatMessage, build_rag_messages, parse_rag_messages
from ragleak.records import Passage, Turn

PASSAGES = [Passage(id=f"d{i}#0", doc_id=f"d{i}", text=f"fact number {i}") for i in range(7)]


@pytest.mark.parametrize("passages", [PASSAGES[:3], []])
def test_prompt_parsing_round_trips_with_history(passages):
    history = [Turn(query="earlier?", answer="earlier answer")]
    messages = build_rag_messages("Who founded it?\n\nQuestion: twice", passages, "sys", history)
    assert parse_rag_messages(messages, passages) == ("sys", "Who founded it?\n\nQuestion: twice", history)


def test_prompt_parsing_refuses_a_foreign_layout():
    messages = [ChatMessage(role="system", content=DEFAULT_SYSTEM_PROMPT),
                ChatMessage(role="user", content="Docs: x\nQ: who?")]
    with pytest.raises(RagleakError):
        parse_rag_messages(messages, PASSAGES[:1])


def test_voter_groups_are_a_random_partition():
    d = DPVote(voters=3)
    d.prepare(RunContext(seed=1))
    splits = [d.voter_groups(PASSAGES) for _ in range(20)]
    for groups in splits:
        assert len(groups) == 3
        assert sorted(p.id for g in groups for p in g) == sorted(p.id for p in PASSAGES)
        assert sorted(len(g) for g in groups) == [2, 2, 3]
    assert len({tuple(tuple(p.id for p in g) for g in groups) for groups in splits}) > 1  # not rank order


def test_more_voters_than_passages_leaves_empty_voters():
    d = DPVote(voters=5)
    groups = d.voter_groups(PASSAGES[:2])
    assert sorted(len(g) for g in groups) == [0, 0, 0, 1, 1]


def test_a_generator_without_llama_weights_is_refused():
    class NoWeights:
        model_id = "x"

    with pytest.raises(RagleakError):
        DPVote().decoder(NoWeights())


def test_guarantees_state_the_per_answer_budget():
    vote = DPVote(eps_token=0.5, max_new_tokens=16).guarantee()
    assert vote.is_formal and vote.scope.kind == "per-response"
    assert vote.scope.eps_q == 8.0 and vote.scope.delta_q == 0.0 and vote.boundary == "answers"
    sparse = DPVote(variant="sparse", eps_token=2.0, max_discoveries=5).guarantee()
    assert sparse.scope.eps_q == 10.0 and "SVT 1" in sparse.notes
    assert vote.unit.kind == "document" and "group privacy" in vote.notes and "citations" in vote.notes
    assert DPVote().hooks == {"generate"} and DPVote().overrides("generate")
