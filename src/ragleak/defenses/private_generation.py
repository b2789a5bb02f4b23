"""Single-query pure-DP answer generation by voting over public candidate tokens.

This is the per-query mechanism ``private-rag`` (and ``ca-dp``'s generation mode) run on the
passages they selected; a simplified member of the sample-and-aggregate family of Koga et al.
(algorithms.md §7), honestly different from it in one way: the vote is over a *public* candidate
set instead of the whole vocabulary.

Per generated token n (at most ``max_new_tokens``):

1. public prompt = the question with no context plus the tokens released so far. Its model
   distribution depends only on public data (the query and earlier DP outputs), so its top-m
   tokens C_n are a public, data-independent candidate set.
2. voter j (one per selected passage, at most ``voters``; empty slots abstain) sees the
   question with only passage j and votes for argmax_{c in C_n} logp_j(c).
3. histogram h(c) = #votes for c (+ ``public_weight`` on the public prompt's own top token, a
   public constant). Adding, removing or replacing one passage adds, removes or changes one
   vote (an empty slot abstains), so every h(c) moves by <= 1.
4. release c_n = argmax_c h(c) + Gumbel(2 / eps_token): the exponential mechanism with utility
   h, sensitivity 1, which is eps_token-DP (report-noisy-max with Gumbel noise).

Every passage that is a voter therefore pays at most max_new_tokens * eps_token =: eps_query
per query (basic composition; stopping early only spends less). The answer stops at an
end-of-turn token, itself a DP release. Assumption: voters are distinct documents (one passage
per document), so one document touches one voter.

Utility: only tokens the no-context model already ranks in its top m can be emitted, so facts
the model cannot phrase without the context come out only partially; this is the price of
releasing nothing outside a public candidate set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ragleak.defenses.dp_select import noisy_argmax
from ragleak.errors import RagleakError
from ragleak.rag.generator import Generator
from ragleak.rag.prompt import ChatMessage, format_context
from ragleak.records import Passage

STOP_TEXTS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>")


@dataclass(frozen=True)
class VoteSettings:
    eps_token: float
    max_new_tokens: int
    voters: int
    candidates: int = 20
    public_weight: float = 0.5


@dataclass
class VoteResult:
    text: str
    tokens: int
    agreement: float  # share of released tokens that were the voters' plurality choice
    real_voters: int


def _user(query: str, passages: Sequence[Passage]) -> ChatMessage:
    content = f"Context:\n{format_context(passages)}\n\nQuestion: {query}" if passages else f"Question: {query}"
    return ChatMessage(role="user", content=content)


def private_answer(query: str, head: Sequence[ChatMessage], passages: Sequence[Passage], generator: Generator,
                   settings: VoteSettings, rng: np.random.Generator) -> VoteResult:
    """Generate an answer whose dependence on each passage is eps_token-DP per token."""
    token_text = getattr(generator, "token_text", None)
    if token_text is None:
        raise RagleakError("DP token voting needs a generator with token_text() (the llama.cpp generator)")
    real = list(passages)[: settings.voters]
    voter_prompts = [generator.render([*head, _user(query, [p])]) for p in real]
    public_prompt = generator.render([*head, _user(query, [])])
    released, agree = "", 0
    n = 0
    for n in range(1, settings.max_new_tokens + 1):
        public = generator.next_token_logprobs(public_prompt + released)
        cand = np.argsort(-public, kind="stable")[: settings.candidates]
        counts = np.zeros(len(cand))
        counts[0] += settings.public_weight
        for prompt in voter_prompts:
            logp = generator.next_token_logprobs(prompt + released)
            counts[int(np.argmax(logp[cand]))] += 1
        choice = noisy_argmax(counts, settings.eps_token, rng)
        agree += int(counts[choice] == counts.max())
        piece = token_text(int(cand[choice]))
        if piece in STOP_TEXTS:
            break
        released += piece
    return VoteResult(text=released.strip(), tokens=n, agreement=agree / max(n, 1), real_voters=len(real))
