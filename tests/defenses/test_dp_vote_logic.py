"""dp-vote's plumbing without the LLM: prompt parsing, the voter partition, the guarantee."""

from __future__ import annotations

import zlib
from contextlib import contextmanager

import numpy as np
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
    assert vote.unit.kind == "document" and vote.adjacency == "add-remove" and "citations" in vote.notes
    assert {a.name: a.met for a in vote.assumptions} == {
        "pool-covers-corpus": None, "one-voter-per-document": True, "model-not-trained-on-corpus": None}
    assert DPVote().hooks == {"score_retrieval", "generate"} and DPVote().overrides("generate")


def test_all_passages_of_a_document_go_to_one_voter():
    d = DPVote(voters=3)
    d.prepare(RunContext(seed=4))
    chunked = [Passage(id=f"d{i}#{j}", doc_id=f"d{i}", text=f"fact {i}.{j}") for i in range(5) for j in range(i % 3 + 1)]
    for _ in range(20):
        groups = d.voter_groups(chunked)
        owners = {}
        for v, group in enumerate(groups):
            for p in group:
                assert owners.setdefault(p.doc_id, v) == v
        assert sorted(p.id for g in groups for p in g) == sorted(p.id for p in chunked)


def test_retrieval_keeps_one_passage_per_document_best_first():
    from ragleak.records import Scored

    d = DPVote(k=2)
    cands = [Scored(passage=Passage(id=f"{doc}#{j}", doc_id=doc, text="t"), score=s)
             for doc, j, s in [("a", 0, 0.9), ("a", 1, 0.8), ("b", 0, 0.7), ("c", 0, 0.75), ("b", 1, 0.95)]]
    out = d.score_retrieval("q", cands)
    assert [(s.passage.id, s.score) for s in out] == [("b#1", 0.95), ("a#0", 0.9)]


class _LengthSensitiveSession:
    """A batched step whose rows depend on every prompt in the session (like llama.cpp's batched
    arithmetic): near-tied tokens flip with the batch-mates' lengths."""

    def __init__(self, prompts):
        self.prompts, self.appended = list(prompts), []

    def logprobs(self):
        batch = sum(len(p) for p in self.prompts)
        rows = []
        for p in self.prompts:
            row = np.round(np.random.default_rng(zlib.crc32((p + repr(self.appended)).encode())).normal(size=40), 1)
            row[39] = -9.0
            rows.append(row + 1e-6 * np.cos(np.arange(40) * batch))  # many ties at one decimal: the batch decides
        return np.stack(rows)

    def append(self, token):
        self.appended.append(token)


class _LengthSensitiveDecoder:
    @contextmanager
    def session(self, prompts, max_new_tokens):
        yield _LengthSensitiveSession(prompts)

    def end_tokens(self):
        return [39]

    def is_end(self, token):
        return token == 39

    def detokenize(self, tokens):
        return " ".join(map(str, tokens))


@pytest.mark.parametrize("texts", [["Maria Gonzales was treated for asthma."],
                                   ["Ingrid Pettersen founded the foundry.", "Room B-17 holds the servos.",
                                    "The ferry leaves every ninety minutes, from pier four, all year round."]])
def test_public_candidates_do_not_change_with_the_private_documents(texts):
    """The public prompt decodes alone: its candidate tokens at step 1 cannot depend on the voters' prompts."""

    class Render:
        def render(self, messages):
            return repr([(m.role, m.content) for m in messages])

    def first_domain(passages):
        d = DPVote(voters=3, domain_size=5, max_new_tokens=4)
        d.prepare(RunContext(seed=1))
        d.decoder = lambda generator: _LengthSensitiveDecoder()
        d.generate(build_rag_messages("Who founded it?", passages, "sys", []), passages, Render())
        return d.last_domains[0]

    reference = first_domain([Passage(id="f#0", doc_id="f", text="A public-looking filler passage.")])
    private = [Passage(id=f"p{i}#0", doc_id=f"p{i}", text=t) for i, t in enumerate(texts)]
    assert first_domain(private) == reference
