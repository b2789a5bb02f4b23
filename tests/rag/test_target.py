"""Targets: a Python callable, and an HTTP endpoint served for real on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ragleak.errors import EndpointError, TargetError
from ragleak.pipeline.conversation import Conversation
from ragleak.pipeline.target import CallableTarget, HttpTarget, PipelineTarget, json_path
from ragleak.records import Turn


def test_callable_target_shapes():
    assert CallableTarget(lambda q: q.upper()).answer("hi").answer == "HI"
    r = CallableTarget(lambda q: ("a", ["d1", 2]), exposes_retrieved_ids=True).answer("q")
    assert r.retrieved_ids == ["d1", "2"]
    r = CallableTarget(lambda q: {"answer": "b", "retrieved_ids": ["x"]}).answer("q")
    assert (r.answer, r.retrieved_ids) == ("b", ["x"])


def test_callable_target_receives_history_when_it_asks_for_it():
    seen = []

    def chat(query, history):
        seen.append(len(history))
        return f"turn {len(history)}"

    conversation = Conversation(CallableTarget(chat))
    conversation.ask("one")
    assert conversation.ask("two").answer == "turn 1"
    assert seen == [0, 1]


def test_callable_target_errors_are_clear():
    with pytest.raises(TargetError, match="expected str"):
        CallableTarget(lambda q: 42).answer("q")
    with pytest.raises(TargetError, match="ZeroDivisionError"):
        CallableTarget(lambda q: 1 / 0).answer("q")


def test_json_path():
    doc = {"choices": [{"message": {"content": "hi"}}], "ids": [1, 2]}
    assert json_path(doc, "$.choices[0].message.content") == "hi"
    assert json_path(doc, "ids[1]") == 2
    with pytest.raises(EndpointError, match="response has no"):
        json_path(doc, "choices[3].message")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served_pipeline(pipeline):
    import uvicorn

    from ragleak.serve import make_app

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(make_app(PipelineTarget(pipeline)), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.mark.model
def test_http_target_against_the_real_pipeline_served_locally(served_pipeline, pipeline):
    target = HttpTarget(f"{served_pipeline}/ask", request_template='{"query": "{query}", "history": "{history}"}',
                        answer_path="answer", retrieved_ids_path="retrieved_ids")
    question = 'Who founded the "Halvorsen Foundry"?'  # quotes must survive the JSON template
    over_http = target.answer(question)
    direct = pipeline.answer(question)
    assert over_http.answer == direct.answer and "Ingrid Pettersen" in over_http.answer
    assert over_http.retrieved_ids == direct.trace.retrieved_ids
    followup = target.answer("And when?", history=[Turn(query=question, answer=over_http.answer)])
    assert followup.answer


@pytest.mark.model
def test_serve_speaks_the_openai_shape_so_one_config_audits_ours_and_theirs(served_pipeline, pipeline):
    target = HttpTarget(f"{served_pipeline}/v1/chat/completions", shape="openai", retrieved_ids_path="retrieved_ids")
    question = 'Who founded the "Halvorsen Foundry"?'
    over_http = target.answer(question)
    direct = pipeline.answer(question)  # the generation cache answers both alike
    assert over_http.answer == direct.answer and over_http.retrieved_ids == direct.trace.retrieved_ids


def test_http_target_bad_request_is_not_retried(served_pipeline):
    target = HttpTarget(f"{served_pipeline}/ask", request_template='{"q": "{query}"}', retries=3, backoff_s=5)
    t0 = time.monotonic()
    with pytest.raises(EndpointError, match="HTTP 400"):
        target.answer("x")
    assert time.monotonic() - t0 < 5


def test_unreachable_endpoint_fails_after_retries_with_a_clear_error():
    port = _free_port()  # nothing listens there any more
    target = HttpTarget(f"http://127.0.0.1:{port}/ask", retries=2, backoff_s=0.01, timeout_s=2)
    with pytest.raises(EndpointError, match=r"could not reach .* after 3 attempts: ConnectError"):
        target.answer("hello")


def test_template_must_be_json_with_a_query_slot():
    with pytest.raises(EndpointError, match="not valid JSON"):
        HttpTarget("http://127.0.0.1:1/", request_template="{query}")
    with pytest.raises(EndpointError, match=r"must contain \{query\}"):
        HttpTarget("http://127.0.0.1:1/", request_template='{"q": "x"}')
