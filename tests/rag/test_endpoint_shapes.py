"""Endpoint request shapes, environment-variable headers and the stop rule, against real HTTP
servers on 127.0.0.1: ``ragleak serve``'s app over a scripted callable (no model), so the OpenAI
route of ``serve`` and the OpenAI shape of ``HttpTarget`` are tested against each other."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragleak.attacks import make_attack
from ragleak.attacks.base import QuerySession
from ragleak.config import TargetConfig
from ragleak.errors import EndpointError
from ragleak.pipeline.conversation import Conversation
from ragleak.pipeline.build import build_target
from ragleak.pipeline.target import CallableTarget, HttpTarget, StopRule, chat_messages
from ragleak.records import Turn
from ragleak.serve import BadRequest, make_app, turns_from_messages
from ragleak.testing import tiny_stack
from served import served

TOKEN = "tok-Rw4Hs8Kq1Lz6"


class Recorder:
    """A service's logic: answers with what it got (query and history length) and its sources."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Turn]]] = []

    def __call__(self, query: str, history: list) -> dict:
        self.calls.append((query, list(history)))
        return {"answer": f"{query} after {len(history)} turns", "retrieved_ids": ["doc-7#0", "doc-2#1"]}


@pytest.fixture(scope="module")
def service():
    recorder = Recorder()
    with served(make_app(CallableTarget(recorder, exposes_retrieved_ids=True))) as base:
        yield base, recorder


def test_openai_shape_maps_the_history_into_messages_and_reads_the_answer(service):
    base, recorder = service
    target = HttpTarget(f"{base}/v1/chat/completions", shape="openai", retrieved_ids_path="retrieved_ids",
                        system_prompt="be brief")
    conversation = Conversation(target)
    first = conversation.ask("who signed?")
    second = conversation.ask("and when?")
    assert first.answer == "who signed? after 0 turns" and second.answer == "and when? after 1 turns"
    assert second.retrieved_ids == ["doc-7#0", "doc-2#1"]
    # the service got the earlier turn as a user/assistant pair, not a field it might ignore
    assert recorder.calls[-1] == ("and when?", [Turn(query="who signed?", answer="who signed? after 0 turns")])
    assert target.sends_history


def test_chat_messages_and_their_inverse():
    history = [Turn(query="q1", answer="a1"), Turn(query="q2", answer="a2")]
    messages = chat_messages("q3", history, "sys")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert turns_from_messages(messages) == ("q3", history)
    for bad in ([], [{"role": "assistant", "content": "x"}], [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
                [{"role": "tool", "content": "x"}]):
        with pytest.raises(BadRequest):
            turns_from_messages(bad)


def test_serve_answers_a_malformed_chat_request_with_400(service):
    import httpx

    base, _ = service
    r = httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": [{"role": "assistant", "content": "x"}]})
    assert r.status_code == 400 and "last message" in r.json()["error"]["message"]


def test_a_template_without_history_refuses_a_multi_turn_query(service):
    base, recorder = service
    target = HttpTarget(f"{base}/ask", request_template='{"query": "{query}"}')
    assert not target.sends_history
    n = len(recorder.calls)
    with pytest.raises(EndpointError, match="cannot reach this endpoint"):
        target.answer("q", history=[Turn(query="a", answer="b")])
    assert len(recorder.calls) == n  # nothing was sent
    assert HttpTarget(f"{base}/ask").sends_history  # the default json body carries "{history}"
    # a custom body in the chat shape: "{messages}" carries the query and the history
    chat = HttpTarget(f"{base}/v1/chat/completions", request_template='{"messages": "{messages}", "stream": false}',
                      answer_path="choices[0].message.content")
    assert chat.sends_history and chat.answer("q2", history=[Turn(query="q1", answer="a1")]).answer == "q2 after 1 turns"


def test_env_header_is_read_at_request_time_and_masked(monkeypatch, serve_echo):
    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    base, seen = serve_echo
    target = HttpTarget(f"{base}/ask", headers={"Authorization": "Bearer $env:RAG_TOKEN"}, retries=0)
    assert target.answer("hi").answer == "ok"
    assert seen[-1] == f"Bearer {TOKEN}"
    assert TOKEN not in repr(target) and "$env" not in target.name
    assert target._redact(f"echo {TOKEN}") == "echo ***"
    monkeypatch.delenv("RAG_TOKEN")
    with pytest.raises(EndpointError, match="RAG_TOKEN is not set"):
        HttpTarget(f"{base}/ask", headers={"Authorization": "Bearer ${env:RAG_TOKEN}"})


@pytest.fixture
def serve_echo():
    """A server that answers "ok" and keeps the Authorization header of each request."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    seen: list[str | None] = []

    async def ask(request):
        seen.append(request.headers.get("authorization"))
        return JSONResponse({"answer": "ok"})

    with served(Starlette(routes=[Route("/ask", ask, methods=["POST"])])) as base:
        yield base, seen


def test_target_config_refuses_literal_credentials_and_keeps_timeouts_out_of_the_identity():
    with pytest.raises(ValidationError, match="holds a credential literally"):
        TargetConfig(kind="http", url="http://h/ask", headers={"Authorization": "Bearer abcdef123"})
    with pytest.raises(ValidationError, match="URL parameter 'api_key'"):
        TargetConfig(kind="http", url="http://h/ask?api_key=abcdef123")
    with pytest.raises(ValidationError, match="needs a url"):
        TargetConfig(kind="http")
    with pytest.raises(ValidationError, match="module:function"):
        TargetConfig(kind="callable", callable="not a reference")
    ok = TargetConfig(kind="http", url="http://h/ask?api_key=$env:KEY", headers={"X-API-Key": "$env:KEY"})
    assert ok.identity == ok.model_copy(update={"timeout_s": 5.0, "retries": 0}).identity
    assert ok.identity != ok.model_copy(update={"shape": "openai"}).identity


def test_session_stops_on_sustained_errors_and_says_why():
    calls = []

    def down(query):
        calls.append(query)
        raise ConnectionError("connection refused")

    transcript = make_attack("ps").run(CallableTarget(down, stop_rule=StopRule(consecutive=3)),
                                       tiny_stack().context(0), budget=10)
    assert len(calls) == 3 and len(transcript.queries) == 3
    assert transcript.stopped.startswith("stopped after 3 of 10 queries: the last 3 queries failed")
    assert "connection refused" in transcript.stopped


def test_stop_rule_reads_the_rate_over_a_window_and_tolerates_scattered_failures():
    rule = StopRule(consecutive=4, window=10, max_rate=0.5)
    assert rule.reason([True, False] * 10) is None  # half failed is not more than half
    assert rule.reason([True, False, False] * 4) == "7 of the last 10 queries failed (more than 50%)"
    assert rule.reason([True] * 5 + [False] * 4) == "the last 4 queries failed"
    # without a rule (the built-in pipeline) a session runs its whole budget
    session = QuerySession(CallableTarget(lambda q: 1 / 0), budget=6, seed=0)
    while session.ask("q") is not None:
        pass
    assert session.used == 6 and session.stopped is None


def test_build_target_builds_a_callable_target_from_its_config():
    target = build_target(None, TargetConfig(kind="callable", callable="posixpath:basename"))
    assert target.name == "callable:posixpath:basename" and target.answer("a/b.txt").answer == "b.txt"
    assert target.stop_rule == StopRule(5, 20, 0.5)
