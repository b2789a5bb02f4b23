"""A scripted next-token distribution for generation-side mechanisms (``dp-vote``,
``private-rag``), run through their own ``generate`` code instead of a llama.cpp context.

The decoder has the interface of ``rag.multiseq.LlamaMultiSequence`` (``session``,
``end_tokens``, ``is_end``, ``detokenize``) over a four-token vocabulary. Every sequence's
distribution is a fixed function of its prompt: at the first step a prompt that holds the
scenario's marker fact prefers ``alpha``, any other prompt (the public one and the voters
without the fact) prefers ``beta``; from the second step on every prompt prefers the end token.
So a voter's vote says exactly whether the private fact reached it, which is the worst case a
vote-based mechanism must withstand, and the answers are short enough to count.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ragleak.testing import ScriptedGenerator

MARKER = "SECRET-FACT"
VOCABULARY = ("<end>", "alpha", "beta", "gamma")
END, PRIVATE, PUBLIC = 0, 1, 2
SCRIPTED_MODEL_PATH = Path("verify-scripted-distribution")


def _row(preferred: int) -> np.ndarray:
    logits = np.full(len(VOCABULARY), -4.0)
    logits[preferred] = 0.0
    return logits - np.log(np.exp(logits).sum())


class ScriptedSession:
    def __init__(self, prompts: Sequence[str]) -> None:
        self._private = [MARKER in p for p in prompts]
        self.step = 0

    def logprobs(self) -> np.ndarray:
        if self.step > 0:
            return np.stack([_row(END) for _ in self._private])
        return np.stack([_row(PRIVATE if private else PUBLIC) for private in self._private])

    def append(self, token: int) -> None:
        self.step += 1


class ScriptedDecoder:
    """``LlamaMultiSequence``'s interface over the scripted distribution."""

    model_path = SCRIPTED_MODEL_PATH
    n_threads = 1

    @contextmanager
    def session(self, prompts: Sequence[str], max_new_tokens: int) -> Iterator[ScriptedSession]:
        yield ScriptedSession(prompts)

    def end_tokens(self) -> list[int]:
        return [END]

    def is_end(self, token: int) -> bool:
        return token == END

    def detokenize(self, tokens: Sequence[int]) -> str:
        return " ".join(VOCABULARY[t] for t in tokens)


class ScriptedLlamaGenerator(ScriptedGenerator):
    """A scripted generator that names the scripted decoder's model path, so a defense's
    ``decoder_for(generator, current)`` keeps the scripted decoder it was given."""

    path = SCRIPTED_MODEL_PATH
    n_threads = 1

    def __init__(self) -> None:
        super().__init__("", model_id="verify-scripted")
