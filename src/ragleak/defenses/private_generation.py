"""Single-query pure-DP answer generation by voting over public candidate tokens.

This is the per-query mechanism ``private-rag`` runs on the passages it selected; a simplified
member of the sample-and-aggregate family of Koga et al. (2024, arXiv 2412.04697), honestly different
from it in one way: the vote is over a *public* candidate set instead of the whole vocabulary.

Per generated token n (at most ``max_new_tokens``):

1. public prompt = the question with no context plus the tokens released so far. Its model
   distribution depends only on public data (the query and earlier DP outputs), so its top-m
   tokens C_n (plus the end-of-turn tokens) are a public, data-independent candidate set. It is
   decoded in a llama.cpp session of its own: a batched step's arithmetic may depend on the
   batch (how many sequences, how long the longest), near-tied tokens flip with it (``rag.multiseq``),
   and the voters' batch is sized by how many documents are relevant, which is private.
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

Cost: the voters decode in lock-step in one llama.cpp context (``rag.multiseq``) and the public
prompt in a second one beside it: one prefill per prompt, then two steps per released token (one
batched over the voters, one for the public prompt alone).

Utility: only tokens the no-context model already ranks in its top m can be emitted, so facts
the model cannot phrase without the context come out only partially; this is the price of
releasing nothing outside a public candidate set.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ragleak.defenses._vote import candidate_domain, vote_histogram
from ragleak.defenses.dp_select import noisy_argmax
from ragleak.rag.multiseq import LlamaMultiSequence
from ragleak.rag.prompt import build_rag_messages
from ragleak.records import Passage, Turn


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
    candidates: list[tuple[int, ...]] = field(default_factory=list)  # the public candidate set of each step


def private_answer(system: str, query: str, history: Sequence[Turn], passages: Sequence[Passage], render,
                   decoder: LlamaMultiSequence, settings: VoteSettings, rng: np.random.Generator) -> VoteResult:
    """Generate an answer whose dependence on each passage is eps_token-DP per token.

    ``render`` turns chat messages into the model's prompt string (the generator's ``render``).
    """
    real = list(passages)[: settings.voters]
    public = render(build_rag_messages(query, [], system, history))
    voters = [render(build_rag_messages(query, [p], system, history)) for p in real]
    tokens: list[int] = []
    candidates: list[tuple[int, ...]] = []
    agree = steps = 0
    with ExitStack() as sessions:
        # the public prompt alone in its own session: its rows cannot depend on the voters' batch
        alone = sessions.enter_context(decoder.session([public], settings.max_new_tokens))
        voting = sessions.enter_context(decoder.session(voters, settings.max_new_tokens)) if voters else None
        ends = decoder.end_tokens()
        for _ in range(settings.max_new_tokens):
            steps += 1
            domain = candidate_domain(alone.logprobs()[0], settings.candidates, ends)  # domain[0] = public argmax
            candidates.append(tuple(int(t) for t in domain))
            counts = (vote_histogram(voting.logprobs(), domain) if voting is not None
                      else np.zeros(len(domain), dtype=np.float64))
            counts[0] += settings.public_weight
            choice = noisy_argmax(counts, settings.eps_token, rng)
            agree += int(counts[choice] == counts.max())
            token = int(domain[choice])
            if decoder.is_end(token):
                break
            tokens.append(token)
            alone.append(token)
            if voting is not None:
                voting.append(token)
    return VoteResult(text=decoder.detokenize(tokens).strip(), tokens=steps, agreement=agree / max(steps, 1),
                      real_voters=len(real), candidates=candidates)
