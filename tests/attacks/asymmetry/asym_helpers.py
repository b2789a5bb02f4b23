"""Helpers for the knowledge-asymmetry tests (a unique module name, so no conftest clash)."""

from __future__ import annotations

from ragleak.rag.generator import DecodingParams, Generation
from ragleak.rag.prompt import render_chatml


class ScriptedGenerator:
    """A generator whose answer is ``script(last user message)``; counts its calls."""

    model_id = "scripted"

    def __init__(self, script) -> None:
        self.script = script
        self.params = DecodingParams()
        self.calls = 0

    def render(self, messages):
        return render_chatml(messages)

    def generate(self, messages, params=None):
        self.calls += 1
        text = self.script(messages[-1].content)
        return Generation(text=text, prompt_tokens=1, completion_tokens=1, finish_reason="stop", seconds=0.0)

    def next_token_logprobs(self, prompt):
        raise AssertionError("logic tests must not ask a scripted generator for log-probabilities")
