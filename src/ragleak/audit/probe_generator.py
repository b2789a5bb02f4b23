"""The scripted probe's generator: answers from the prompt, under decoding settings as a model applies them.

``--probe scripted`` runs the real embedder and index with this in place of the LLM: a reply that
quotes its first passage (so a hook that releases or masks context has something to act on),
carries the fact words of the others and the question, and reads the system prompt; no digits of
its own, so a digit filter finds nothing in a neutral reply.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from ragleak.rag.generator import DecodingParams, Generation
from ragleak.rag.prompt import ChatMessage
from ragleak.testing import ScriptedGenerator

# words for a sampled reply's tag: no digits, so a digit filter has nothing to act on in a neutral reply
_TAG_WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "iris", "juniper",
              "kestrel", "linden", "maple", "nettle", "osprey", "plover")


def _fact_words(text: str) -> list[str]:
    """Capitalised words, e-mail addresses and words with digits: what a leaking answer repeats."""
    words = [w.strip(".,;:()") for w in text.split() if not w.startswith("Passage")]
    return [w for w in words if w and ("@" in w or any(ch.isdigit() for ch in w) or w[:1].isupper())]


def probe_reply(user: str) -> str:
    """The scripted probe's answer to a RAG user turn: the first passage verbatim (an answer that
    quotes its context), the fact words of the others, and the question."""
    if "Context:\n" not in user:
        return f"The question was: {user.removeprefix('Question: ').strip()}. I do not know."
    context, _, question = user.split("Context:\n", 1)[1].partition("\n\nQuestion:")
    passages = [line.split(": ", 1)[1] if ": " in line else line for line in context.splitlines() if line.strip()]
    first = passages[0] if passages else ""
    facts = "; ".join(w for p in passages[1:] for w in _fact_words(p))  # separated: no invented name pairs
    return (f"The question was: {question.strip()}. According to the records: {first} "
            f"Also noted: {facts or 'nothing else'}.")


class ProbeGenerator(ScriptedGenerator):
    """The scripted probe's generator: ``probe_reply`` on the prompt, under decoding settings as a
    real model applies them. Greedy decoding (temperature 0) ignores ``top_p``, ``top_k`` and the
    seed; ``max_tokens`` cuts the reply (one word a token) and a repeat penalty other than the
    built one changes it; a sampled reply (temperature > 0) depends on every setting."""

    def __init__(self, params: DecodingParams | None = None) -> None:
        super().__init__(probe_reply, model_id="scripted:audit-probe", params=params)

    def _reply(self, messages: Sequence[ChatMessage], prompt: str) -> str:
        # a model reads every message: the system prompt and earlier turns change the reply too
        # (a tag of words, so that a digit filter finds nothing in a neutral reply)
        rest = [(m.role, m.content) for m in list(messages)[:-1]]
        key = hashlib.sha256(repr(rest).encode()).digest()
        tag = " ".join(_TAG_WORDS[b % len(_TAG_WORDS)] for b in key[:2])
        return f"{probe_reply(messages[-1].content if messages else '')} (guided by {tag})"

    def generate(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation:
        prompt = self.render(messages)
        self.calls += 1
        self.prompts.append(prompt)
        used = params or self.params
        words = self._reply(messages, prompt).split()
        if used.repeat_penalty != self.built_params.repeat_penalty:
            seen: set[str] = set()  # a penalty on repeats drops repeated words
            words = [w for w in words if not (w.lower() in seen or seen.add(w.lower()))]
        if used.temperature > 0:
            key = hashlib.sha256(repr((used.temperature, used.top_p, used.top_k, used.seed, prompt)).encode()).digest()
            words = [w for i, w in enumerate(words) if key[i % len(key)] % 5] + \
                ["(sampled:", " ".join(_TAG_WORDS[b % len(_TAG_WORDS)] for b in key[:3]) + ")"]
        text = " ".join(words[: used.max_tokens])
        return Generation(text=text, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()),
                          finish_reason="stop", seconds=0.0)
