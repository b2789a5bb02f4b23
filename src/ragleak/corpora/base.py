"""The corpus plugin contract: declared metadata, frozen parameters, ``load() -> list[Document]``.

A corpus class declares what it is (``name``, ``version``, ``description``, ``kind``) as typed
class variables, so a contract test can check every registered corpus without loading any. Its
constructor stores validated parameters only; all reading and generating happens in ``load()``,
which returns every document or raises ``CorpusError`` (never a partial corpus).
"""

from __future__ import annotations

import hashlib
import random
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from ragleak.errors import CorpusError
from ragleak.params import build_params
from ragleak.records import Document, canonical_json

CorpusKind = Literal["synthetic", "public", "user"]

#: Metadata keys under which generators record the entities they planted in a document's text.
#: A key holds one value, or several joined by ``ENTITY_SEPARATOR``; every value occurs verbatim
#: in the document's text, so metrics can score leakage against known ground truth.
ENTITY_KEYS: tuple[str, ...] = ("person", "email", "phone", "company", "title", "address", "date", "amount")
ENTITY_SEPARATOR = "; "


class CorpusParams(BaseModel):
    """Parameters of a corpus: frozen and JSON-round-trippable, so a cell spec is hashable."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Corpus(ABC):
    """Base class of every corpus loader (built-in or third-party)."""

    name: ClassVar[str]
    version: ClassVar[str]
    description: ClassVar[str]
    kind: ClassVar[CorpusKind]
    Params: ClassVar[type[CorpusParams]] = CorpusParams

    def __init__(self, params: CorpusParams | None = None, **kwargs: Any) -> None:
        # constructors store parameters only; reading or generating happens in load()
        self.params = build_params(type(self), "corpus", params, kwargs)

    @abstractmethod
    def load(self) -> list[Document]:
        """Every document of the corpus, in a deterministic order."""

    def spec(self) -> dict[str, Any]:
        """What identifies this corpus in a grid cell: name, version and parameters (JSON)."""
        return {"name": self.name, "version": self.version, "params": self.params.model_dump(mode="json")}


def seeded_rng(corpus: str, seed: int) -> random.Random:
    """A local RNG for ``corpus`` and ``seed``; string seeds hash with SHA-512, stable across runs."""
    return random.Random(f"ragleak.corpora.{corpus}:{seed}")


def planted_entities(doc: Document) -> dict[str, list[str]]:
    """The ground-truth entities a generator planted in ``doc``, by type (see ``ENTITY_KEYS``)."""
    found: dict[str, list[str]] = {}
    for key in ENTITY_KEYS:
        value = doc.metadata.get(key)
        if isinstance(value, str) and value:
            found[key] = value.split(ENTITY_SEPARATOR)
    return found


def check_unique_ids(docs: list[Document], source: str) -> None:
    """Raise ``CorpusError`` if two documents share an id (passage ids would collide)."""
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise CorpusError(f"{source}: duplicate document id {doc.id!r}")
        seen.add(doc.id)


def documents_digest(docs: list[Document]) -> str:
    """SHA-256 over every document (id, text, metadata) in order: what a grid cell's id covers of
    its corpus, so editing one document of a user's files changes every cell on that corpus."""
    h = hashlib.sha256()
    for doc in docs:
        # canonical JSON escapes newlines, so one line per document is unambiguous
        h.update(canonical_json(doc).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
