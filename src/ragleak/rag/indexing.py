"""From a corpus name or a user's files to a built PassageIndex."""

from __future__ import annotations

from pathlib import Path

from ragleak.config import StackConfig
from ragleak.corpora import load_corpus
from ragleak.corpora.chunking import chunk_documents
from ragleak.errors import CorpusError
from ragleak.rag.embedder import Embedder, make_embedder
from ragleak.rag.index import PassageIndex


def build_index(source: str, config: StackConfig, seed: int | None = None,
                embedder: Embedder | None = None) -> PassageIndex:
    params = {} if seed is None or Path(source).exists() else {"seed": seed}
    documents = load_corpus(source, **params)
    passages = chunk_documents(documents, chunk_words=config.chunk_words, overlap_words=config.chunk_overlap)
    passages = [p for p in passages if p.text.strip()]
    if not passages:
        raise CorpusError(f"corpus {source!r} has no text to index (empty corpus)")
    metadata = {"source": str(source), "chunk_words": config.chunk_words, "chunk_overlap": config.chunk_overlap}
    if seed is not None:
        metadata["seed"] = seed
    return PassageIndex.build(passages, embedder or make_embedder(config.embedder), metadata)
