"""private-rag's public candidate tokens cannot depend on the private documents: the public prompt
is decoded alone, so neither the passages' text nor how many are relevant (the voters' batch)
reaches the candidate set."""

from __future__ import annotations

import zlib
from contextlib import contextmanager

import numpy as np
import pytest

from ragleak.defenses.private_generation import VoteSettings, private_answer
from ragleak.records import Passage

VOCAB, END = 40, 39
# the public vote outweighs any noise and every voter: the released tokens are the public argmax,
# so two runs whose candidates agree see the same public prompts at every step
PUBLIC_ONLY = VoteSettings(eps_token=1e4, max_new_tokens=6, voters=3, candidates=5, public_weight=1e6)


class _Session:
    def __init__(self, prompts):
        self.prompts, self.appended = list(prompts), []

    def logprobs(self) -> np.ndarray:
        rows = []
        for p in self.prompts:
            rng = np.random.default_rng(zlib.crc32((p + repr(self.appended)).encode()))
            row = np.round(rng.normal(size=VOCAB), 1)  # many ties at one decimal
            row[END] = -9.0
            # like a batched llama.cpp step: the arithmetic depends on the batch, and near-ties flip with it
            row += 1e-6 * np.cos(np.arange(VOCAB) * len(self.prompts))
            rows.append(row)
        return np.stack(rows)

    def append(self, token: int) -> None:
        self.appended.append(token)


class BatchSensitiveDecoder:
    """``LlamaMultiSequence``'s interface whose rows depend on how many sequences share a session."""

    @contextmanager
    def session(self, prompts, max_new_tokens):
        yield _Session(prompts)

    def end_tokens(self):
        return [END]

    def is_end(self, token):
        return token == END

    def detokenize(self, tokens):
        return " ".join(f"t{t}" for t in tokens)


def _passages(texts):
    return [Passage(id=f"p{i}#0", doc_id=f"p{i}", text=t) for i, t in enumerate(texts)]


@pytest.mark.parametrize("private", [["Maria Gonzales was treated for asthma."],
                                     ["Ingrid Pettersen founded the foundry.", "Room B-17 holds the servos.",
                                      "The ferry leaves every ninety minutes."],
                                     []])
def test_public_candidates_do_not_change_with_the_private_documents(private):
    def run(passages):
        return private_answer("system", "Who founded it?", [], passages, lambda m: repr(m), BatchSensitiveDecoder(),
                              PUBLIC_ONLY, np.random.default_rng(0))

    reference = run(_passages(["A public-looking filler passage."]))
    other = run(_passages(private))
    assert len(reference.candidates) >= 2
    assert other.candidates == reference.candidates and other.text == reference.text

