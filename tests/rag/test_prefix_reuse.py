"""The prefix-reuse mode's settings and chunk boundaries (the model's side is in
test_prefix_reuse_model.py)."""

from __future__ import annotations

from ragleak.config import StackConfig
from ragleak.rag.cache import cache_key
from ragleak.rag.generator import DecodingParams
from ragleak.rag.prompt import ChatMessage, message_ends, render_chatml
from ragleak.records import digest


def test_the_mode_enters_every_key_and_leaves_the_default_settings_as_they_were():
    assert "reuse_prefix" not in DecodingParams().model_dump(mode="json")
    assert DecodingParams(reuse_prefix=True).model_dump(mode="json")["reuse_prefix"] is True
    assert cache_key("m", DecodingParams(reuse_prefix=True), "p") != cache_key("m", DecodingParams(), "p")
    assert digest(StackConfig(decoding=DecodingParams(reuse_prefix=True))) != digest(StackConfig())
    both = DecodingParams(batch=4, reuse_prefix=True)
    assert DecodingParams.model_validate_json(both.model_dump_json()) == both


def test_message_ends_are_the_complete_messages_of_a_rendered_prompt():
    messages = [ChatMessage(role="system", content="S"), ChatMessage(role="user", content="q1"),
                ChatMessage(role="assistant", content="a1 <|im_end|> inside"), ChatMessage(role="user", content="q2")]
    prompt = render_chatml(messages)
    ends = message_ends(prompt)
    # every complete message, not the opened assistant turn; an end marker quoted without its newline is not one
    assert [prompt[:e] for e in ends] == [render_chatml(messages[:i]).removesuffix("<|im_start|>assistant\n")
                                           for i in range(1, 5)]
    assert message_ends("no chat markup") == []
