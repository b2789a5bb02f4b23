"""The text of a completion, token by token, exactly as llama-cpp-python's ``create_completion`` makes it.

Batched generation (``LlamaCppGenerator.generate_many``) decodes outside llama-cpp-python's
completion loop, so it must stop where that loop stops and return the text it returns, or a
batched answer would differ from a one-at-a-time one even where the tokens agree. This mirrors
the non-streaming path of ``Llama._create_completion`` (llama-cpp-python 0.3.36):

* an end-of-generation token stops the sequence and is not part of the text (``finish "stop"``);
* otherwise the token is kept and the text so far is checked for the stop strings in their
  order (the first listed that occurs cuts the text before it, ``finish "stop"``), then for the
  token limit (``finish "length"``);
* while the text ends inside a multi-byte UTF-8 character both checks are skipped (its
  ``multibyte_fix`` countdown, which can carry a sequence a few tokens past the limit);
* the bytes are decoded as UTF-8 dropping invalid bytes; a leading space is dropped when the
  first token is the BOS token.
"""

from __future__ import annotations

from typing import Callable, Literal, Sequence


class CompletionText:
    """The ``Stopper`` of one sequence: ``push`` each generated token until it returns True."""

    def __init__(self, piece: Callable[[int], bytes], is_end: Callable[[int], bool], max_tokens: int,
                 stops: Sequence[str], bos: int | None = None) -> None:
        self._piece, self._is_end, self.max_tokens, self._bos = piece, is_end, max_tokens, bos
        self._stops = [s.encode("utf-8") for s in stops]
        self.tokens: list[int] = []
        self._raw = b""
        self._text: bytes | None = None
        self._multibyte_fix = 0
        self.finish_reason: Literal["stop", "length"] | None = None

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    def _all_text(self) -> bytes:
        if self.tokens and self.tokens[0] == self._bos and self._raw[:1] == b" ":
            return self._raw[1:]
        return self._raw

    def push(self, token: int) -> bool:
        if self.done:
            raise ValueError("the sequence is already finished")
        if self._is_end(token):
            return self._finish(self._all_text(), "stop")
        self.tokens.append(token)
        self._raw += self._piece(token)
        all_text = self._all_text()
        for k, char in enumerate(all_text[-3:]):  # llama-cpp-python's check, verbatim
            k = 3 - k
            for num, pattern in ((2, 192), (3, 224), (4, 240)):
                if num > k and pattern & char == pattern:
                    self._multibyte_fix = num - k
        if self._multibyte_fix > 0:
            self._multibyte_fix -= 1
            return False
        hits = [s for s in self._stops if s in all_text]
        if hits:
            return self._finish(all_text[: all_text.index(hits[0])], "stop")
        if len(self.tokens) >= self.max_tokens:
            return self._finish(all_text, "length")
        return False

    def _finish(self, text: bytes, reason: Literal["stop", "length"]) -> bool:
        self._text, self.finish_reason = text, reason
        return True

    @property
    def text(self) -> str:
        if self._text is None:
            raise ValueError("the sequence is not finished")
        return self._text.decode("utf-8", errors="ignore")
