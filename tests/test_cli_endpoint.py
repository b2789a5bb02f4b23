"""``ragleak ask`` and ``ragleak attack`` against an endpoint in the OpenAI shape, with a bearer
token read from the environment ($env:NAME), the multi-turn check and the early stop; the
service is ``ragleak serve``'s app over a callable (no model)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ragleak.cli import app
from ragleak.pipeline.target import CallableTarget
from ragleak.serve import make_app
from served import bearer_only, free_port, served

TOKEN = "tok-Lp2Ds7Hv4Qn8"


@pytest.fixture(scope="module")
def endpoint():
    def answer(query, history):
        return {"answer": f"[{len(history)} earlier] ops@fjordline.example says: {query}", "retrieved_ids": ["ops.txt"]}

    service = bearer_only(make_app(CallableTarget(answer, exposes_retrieved_ids=True)), TOKEN)
    with served(service) as base:
        yield f"{base}/v1/chat/completions"


OPENAI = ["--shape", "openai", "--retrieved-ids-path", "retrieved_ids", "--header", "Authorization: Bearer $env:RAG_TOKEN"]


def test_ask_an_openai_endpoint_with_a_token_from_the_environment(endpoint, monkeypatch):
    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    result = CliRunner().invoke(app, ["ask", "who runs ops?", "--endpoint", endpoint, *OPENAI, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"answer": "[0 earlier] ops@fjordline.example says: who runs ops?",
                                         "retrieved_ids": ["ops.txt"]}
    monkeypatch.setenv("RAG_TOKEN", "wrong-token")
    denied = CliRunner().invoke(app, ["ask", "x", "--endpoint", endpoint, *OPENAI])
    assert denied.exit_code != 0 and "HTTP 401" in str(denied.exception)


def test_attack_in_multi_turn_mode_sends_the_history_as_messages(endpoint, monkeypatch, tmp_path):
    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    out = tmp_path / "pm.json"
    result = CliRunner().invoke(app, ["attack", "ps", "--endpoint", endpoint, *OPENAI, "--mode", "multi",
                                      "--budget", "3", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    transcript = json.loads(out.read_text())
    assert [q["answer"][:11] for q in transcript["queries"]] == ["[0 earlier]", "[1 earlier]", "[2 earlier]"]
    assert TOKEN not in out.read_text() and transcript["stopped"] is None


def test_attack_refuses_multi_turn_without_history_and_stops_on_a_dead_endpoint(tmp_path):
    refused = CliRunner().invoke(app, ["attack", "ps", "--endpoint", "http://127.0.0.1:9/ask", "--mode", "multi",
                                       "--request-template", '{"q": "{query}"}', "--out", str(tmp_path / "a.json")])
    assert refused.exit_code != 0 and "carries the history" in refused.output
    out = tmp_path / "dead.json"
    dead = CliRunner().invoke(app, ["attack", "ps", "--endpoint", f"http://127.0.0.1:{free_port()}/ask",
                                    "--retries", "0", "--stop-after", "2", "--budget", "8", "--out", str(out)])
    assert dead.exit_code == 1
    transcript = json.loads(out.read_text())
    assert len(transcript["queries"]) == 2 and transcript["stopped"].startswith("stopped after 2 of 8 queries")
