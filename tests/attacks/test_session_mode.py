"""The grid's mode axis at the session: ``multi`` chains an attack's queries into conversations
of MULTI_TURNS turns (the history reaches the target), ``single`` sends each one fresh."""

from __future__ import annotations

import pytest

from ragleak.attacks import QuerySession, Transcript, make_attack
from ragleak.attacks.base import MULTI_TURNS
from ragleak.context import RunContext
from ragleak.errors import ConfigError
from ragleak.pipeline.target import CallableTarget


def _recording_target():
    seen: list[tuple[str, list[str]]] = []

    def answer(query, history):
        seen.append((query, [t.query for t in history]))
        return f"answer to {query}"

    return CallableTarget(answer), seen


def test_single_mode_sends_every_query_without_history():
    target, seen = _recording_target()
    session = QuerySession(target, budget=4, seed=0)
    for i in range(4):
        session.ask(f"q{i}")
    assert [h for _, h in seen] == [[], [], [], []]
    assert all(r.conversation is None for r in session.records)


def test_multi_mode_chains_queries_into_conversations_of_fixed_length():
    target, seen = _recording_target()
    session = QuerySession(target, budget=7, seed=0, mode="multi")
    for i in range(8):
        session.ask(f"q{i}")
    assert len(seen) == 7                                   # the budget still binds
    assert [h for _, h in seen[:4]] == [[], ["q0"], ["q0", "q1"], []]
    assert [r.conversation for r in session.records] == [0, 0, 0, 1, 1, 1, 2]
    assert [r.turn for r in session.records] == [0, 1, 2, 0, 1, 2, 0]
    assert MULTI_TURNS == 3


def test_multi_mode_leaves_an_attacks_own_conversations_alone():
    target, seen = _recording_target()
    session = QuerySession(target, budget=5, seed=0, mode="multi", turns=2)
    conv = session.conversation()
    conv.ask("a")
    conv.ask("b")
    conv.ask("c")                                           # an explicit conversation is not cut at 2
    session.ask("d")
    assert [h for _, h in seen] == [[], ["a"], ["a", "b"], []]


def test_attack_run_records_its_mode_and_transcripts_round_trip():
    target, seen = _recording_target()
    single = make_attack("ps").run(target, RunContext(), budget=3)
    multi = make_attack("ps").run(target, RunContext(), budget=3, mode="multi")
    assert single.mode == "single" and multi.mode == "multi"
    assert [q.query for q in single.queries] == [q.query for q in multi.queries]
    assert [q.turn for q in multi.queries] == [0, 1, 2]
    assert Transcript.from_json(multi.to_json()) == multi
    assert seen[-1][1] == [q.query for q in multi.queries[:2]]


def test_bad_mode_is_a_config_error():
    target, _ = _recording_target()
    with pytest.raises(ConfigError, match="mode"):
        QuerySession(target, budget=1, seed=0, mode="parallel")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="turns"):
        QuerySession(target, budget=1, seed=0, mode="multi", turns=0)
