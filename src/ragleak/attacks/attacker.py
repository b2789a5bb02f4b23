"""The attacker's own LLM for agent attacks (RAG-Thief, DEAL, IKEA).

It is a separate ``LlamaCppGenerator`` instance of the local model, with the attacker's own
prompts and decoding settings, wrapped in the generation cache. It never sees the target's
context: the only corpus text it reads is what the target already answered.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from ragleak.rag.generator import DecodingParams, Generator
from ragleak.rag.prompt import ChatMessage

log = logging.getLogger(__name__)

_NUMBERED = re.compile(r"^\s*(?:\d+|[-*•])[.):]?\s+(.*\S)\s*$")


def make_attacker_llm(config: Any = None) -> Generator:
    """A fresh generator of the stack's model (default stack config when ``config`` is None)."""
    from ragleak.config import StackConfig
    from ragleak.rag.stack import make_generator

    return make_generator(config or StackConfig())


class LLMAttackMixin:
    """Holds the attacker LLM: passed in, set from a stack config by the CLI, or built on first use."""

    _attacker: Generator | None = None
    _attacker_calls: int = 0

    def use_stack(self, config: Any) -> None:
        if self._attacker is None:
            self._attacker = make_attacker_llm(config)

    def attacker_llm(self) -> Generator:
        if self._attacker is None:
            self._attacker = make_attacker_llm()
        return self._attacker

    def ask_attacker(self, system: str, user: str, max_tokens: int, temperature: float = 0.0, seed: int = 0) -> str:
        params = DecodingParams(max_tokens=max_tokens, temperature=temperature, top_k=1 if temperature == 0 else 40,
                                top_p=1.0 if temperature == 0 else 0.95, seed=seed)
        self._attacker_calls += 1
        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        return self.attacker_llm().generate(messages, params).text


def numbered_items(text: str, min_chars: int = 3) -> list[str]:
    """Items of a numbered or bulleted list in the attacker LLM's output (one per line)."""
    items = []
    for line in text.splitlines():
        match = _NUMBERED.match(line)
        if match and len(match.group(1)) >= min_chars:
            items.append(match.group(1).strip().strip('"'))
    return items
