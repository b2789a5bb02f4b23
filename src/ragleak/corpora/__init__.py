"""Corpora: registered loaders (synthetic, public, the user's files), chunking and canaries.

``load_corpus("synthetic-corp")`` loads a registered corpus; ``load_corpus("path/to/folder")``
reads the user's own files. Each loader is one file plus one line in ``CORPORA``; third-party
corpora register through the ``ragleak.corpora`` entry-point group.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ragleak.corpora.base import (ENTITY_KEYS, Corpus, CorpusParams, check_unique_ids, documents_digest,
                                  planted_entities)
from ragleak.errors import ConfigError
from ragleak.records import Document
from ragleak.registry import Registry

log = logging.getLogger(__name__)

CORPORA: Registry[type[Corpus]] = Registry(
    "corpora",
    {
        "synthetic-corp": "ragleak.corpora.synthetic_corp:SyntheticCorp",
        "synthetic-email": "ragleak.corpora.synthetic_email:SyntheticEmail",
        "pubmedqa": "ragleak.corpora.pubmed:PubMedQA",
        "chatterbot-qa": "ragleak.corpora.public_qa:ChatterbotQA",
        "wordnet-glosses": "ragleak.corpora.wordnet:WordNetGlosses",
        "multi-domain": "ragleak.corpora.multi_domain:MultiDomain",
        "files": "ragleak.corpora.files:Files",
    },
)


def make_corpus(name_or_path: str | Path, **params: Any) -> Corpus:
    """The loader for a registered name, or a ``files`` loader for an existing file or folder.

    A registered name wins over a same-named path; write ``./NAME`` to mean the folder.
    """
    text = str(name_or_path)
    if not isinstance(name_or_path, Path) and text in CORPORA.names():
        if Path(text).exists():
            log.warning("%r is a registered corpus and also a path; using the corpus (write ./%s for the path)", text, text)
        return CORPORA.get(text)(**params)
    path = Path(name_or_path)
    if path.exists():
        return CORPORA.get("files")(path=path, **params)
    raise ConfigError(
        f"unknown corpus {text!r}: not a registered name ({', '.join(CORPORA.names())}) nor an existing file or folder"
    )


def load_corpus(name_or_path: str | Path, **params: Any) -> list[Document]:
    """Every document of a registered corpus or of the user's files; ids checked unique."""
    corpus = make_corpus(name_or_path, **params)
    docs = corpus.load()
    check_unique_ids(docs, f"corpus {corpus.name!r}")
    log.info("loaded %d documents from %s", len(docs), name_or_path)
    return docs


__all__ = ["CORPORA", "ENTITY_KEYS", "Corpus", "CorpusParams", "documents_digest", "load_corpus", "make_corpus", "planted_entities"]
