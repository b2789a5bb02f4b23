"""Word-window chunking of documents into passages, preserving the original text spans.

A document's words are its maximal runs of non-whitespace. Windows of ``chunk_words`` words
start every ``chunk_words - overlap_words`` words; the last window ends at the last word. Each
passage is the original text sliced from its first word's start to its last word's end, so
whitespace and newlines inside a chunk are kept as written. With ``n`` words, a document yields
``0`` passages if ``n == 0``, ``1`` if ``n <= chunk_words``, and otherwise
``1 + ceil((n - chunk_words) / (chunk_words - overlap_words))``.
"""

from __future__ import annotations

import logging
import re
from typing import Sequence

from ragleak.errors import CorpusError
from ragleak.records import Document, Passage

log = logging.getLogger(__name__)

_WORD = re.compile(r"\S+")


def validate_chunking(chunk_words: int, overlap_words: int) -> None:
    """``ValueError`` unless ``chunk_words >= 1`` and ``0 <= overlap_words < chunk_words``."""
    for name, value in (("chunk_words", chunk_words), ("overlap_words", overlap_words)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if chunk_words < 1:
        raise ValueError(f"chunk_words must be at least 1, got {chunk_words}")
    if overlap_words < 0:
        raise ValueError(f"overlap_words must not be negative, got {overlap_words}")
    if overlap_words >= chunk_words:
        raise ValueError(f"overlap_words ({overlap_words}) must be smaller than chunk_words ({chunk_words})")


def chunk_spans(text: str, chunk_words: int = 120, overlap_words: int = 20) -> list[tuple[int, int]]:
    """The (start, end) character spans of ``text``'s chunks, in order."""
    validate_chunking(chunk_words, overlap_words)
    words = [m.span() for m in _WORD.finditer(text)]
    if not words:
        return []
    step = chunk_words - overlap_words
    spans = []
    start = 0
    while True:
        stop = min(start + chunk_words, len(words))
        spans.append((words[start][0], words[stop - 1][1]))
        if stop == len(words):
            return spans
        start += step


def chunk_count(n_words: int, chunk_words: int = 120, overlap_words: int = 20) -> int:
    """How many passages a document of ``n_words`` words yields (the formula in the module doc)."""
    validate_chunking(chunk_words, overlap_words)
    if n_words <= 0:
        return 0
    if n_words <= chunk_words:
        return 1
    step = chunk_words - overlap_words
    return 1 + -(-(n_words - chunk_words) // step)


def chunk_documents(docs: Sequence[Document], chunk_words: int = 120, overlap_words: int = 20) -> list[Passage]:
    """Split ``docs`` into passages ``f"{doc.id}#{n}"`` carrying a copy of the document's metadata.

    Documents without any word yield no passage. Document ids must be unique (``CorpusError``
    otherwise), which makes passage ids unique.
    """
    validate_chunking(chunk_words, overlap_words)
    seen: set[str] = set()
    passages: list[Passage] = []
    for doc in docs:
        if doc.id in seen:
            raise CorpusError(f"duplicate document id {doc.id!r}: passage ids would collide")
        seen.add(doc.id)
        spans = chunk_spans(doc.text, chunk_words, overlap_words)
        if not spans:
            log.debug("document %s has no words; no passage", doc.id)
        for n, (start, end) in enumerate(spans):
            passages.append(Passage(id=f"{doc.id}#{n}", doc_id=doc.id, text=doc.text[start:end], metadata=dict(doc.metadata)))
    return passages
