"""The attacker's own LLM for agent attacks (RAG-Thief, DEAL, IKEA).

It is the run's ``Stack`` generator of role ``attacker`` (the stack's model, in the run's one
generation cache, counted apart from the target's calls), with the attacker's own prompts and
decoding settings. It never sees the target's context: the only corpus text it reads is what
the target already answered.
"""

from __future__ import annotations

import logging
import re

from ragleak.context import RunContext
from ragleak.rag.generator import DecodingParams, Generator
from ragleak.rag.prompt import ChatMessage

log = logging.getLogger(__name__)

_NUMBERED = re.compile(r"^\s*(?:\d+|[-*•])[.):]?\s+(.*\S)\s*$")


class LLMAttackMixin:
    """An agent attack's access to its attacker LLM during one run: ``bind(ctx)`` at the start of
    ``execute``; the generator is taken from the context's stack on first use (an attack that
    never consults its LLM runs without a stack)."""

    name: str
    _ctx: RunContext | None = None
    _attacker: Generator | None = None
    _attacker_calls: int = 0

    def bind(self, ctx: RunContext) -> None:
        self._ctx, self._attacker, self._attacker_calls = ctx, None, 0

    def _stack(self):
        if self._ctx is None:
            raise RuntimeError(f"attack {self.name}: bind(ctx) before using the attacker's models")
        return self._ctx.require_stack(f"attack {self.name}")

    def attacker_llm(self) -> Generator:
        if self._attacker is None:
            self._attacker = self._stack().generator("attacker")
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
