"""From a corpus name or a user's files to a built PassageIndex."""

from __future__ import annotations

from pathlib import Path

from ragleak.corpora import load_corpus
from ragleak.rag.index import PassageIndex
from ragleak.stack import Stack


def build_index(source: str, stack: Stack, seed: int | None = None) -> PassageIndex:
    """Load ``source`` (a seed applies to a synthetic corpus, not to files) and index it with the
    stack's chunking and embedder; the index metadata records the source and seed."""
    params = {} if seed is None or Path(source).exists() else {"seed": seed}
    documents = load_corpus(source, **params)
    metadata: dict = {"source": str(source)}
    if seed is not None:
        metadata["seed"] = seed
    return stack.index(documents, metadata)
