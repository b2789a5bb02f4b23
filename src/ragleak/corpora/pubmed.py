"""PubMedQA: the published JSON layout (``ori_pqal.json``), read from a file the user supplies.

The file is a JSON object keyed by PMID; each value holds ``QUESTION`` (str), ``CONTEXTS``
(list of abstract sections, the conclusion removed), ``LABELS`` and ``MESHES`` (lists of str),
``LONG_ANSWER`` (the conclusion), ``final_decision`` (yes/no/maybe) and optionally ``YEAR``,
``reasoning_required_pred`` and ``reasoning_free_pred``. The unlabeled and artificial subsets
(``ori_pqau.json``, ``ori_pqaa.json``) share the layout without some of these, so only
``QUESTION`` and ``CONTEXTS`` are required.

Membership protocol (as in the seed papers): the first ``limit`` entries in file order are the
indexed members; the remaining entries are available as non-members for membership inference.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from ragleak.corpora.base import ENTITY_SEPARATOR, Corpus, CorpusKind, CorpusParams
from ragleak.errors import CorpusError
from ragleak.records import Document

log = logging.getLogger(__name__)

Split = Literal["members", "non-members", "all"]


class PubMedQAParams(CorpusParams):
    path: Path = Field(description="a PubMedQA JSON file, e.g. ori_pqal.json")
    limit: int = Field(default=50, ge=1, description="the first `limit` entries are the members")
    split: Split = Field(default="members", description="which part load() returns")


class PubMedQA(Corpus):
    """PubMedQA abstracts (contexts joined) with question and answer in the metadata."""

    name: ClassVar[str] = "pubmedqa"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "PubMedQA abstracts from a user-supplied ori_pqal.json (first `limit` = members)"
    kind: ClassVar[CorpusKind] = "public"
    Params: ClassVar[type[CorpusParams]] = PubMedQAParams

    def load(self) -> list[Document]:
        """The documents of ``params.split``: members, non-members, or all in file order."""
        params: PubMedQAParams = self.params  # type: ignore[assignment]
        members, non_members = self.load_split()
        if params.split == "members":
            return members
        if params.split == "non-members":
            if not non_members:
                raise CorpusError(f"{params.path}: no non-members: the file has only {len(members)} entries (limit {params.limit})")
            return non_members
        return members + non_members

    def load_split(self) -> tuple[list[Document], list[Document]]:
        """(members, non_members): the first ``limit`` entries and the rest, in file order."""
        params: PubMedQAParams = self.params  # type: ignore[assignment]
        docs = read_pubmedqa(params.path)
        if len(docs) < params.limit:
            log.warning("%s has %d entries, fewer than limit %d; all are members", params.path, len(docs), params.limit)
        return docs[: params.limit], docs[params.limit :]


def read_pubmedqa(path: Path) -> list[Document]:
    """Every entry of a PubMedQA JSON file as a Document, in file order; ``CorpusError`` if malformed."""
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError as exc:
        raise CorpusError(f"{path}: PubMedQA file not found") from exc
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read the PubMedQA file: {exc.strerror or exc}") from exc
    try:
        raw = json.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from exc
    if not isinstance(raw, dict):
        raise CorpusError(f"{path}: expected a JSON object keyed by PMID, got a JSON {_json_type(raw)}")
    if not raw:
        raise CorpusError(f"{path}: empty corpus (the JSON object has no entries)")
    return [_document(path, str(pmid), entry) for pmid, entry in raw.items()]


def _document(path: Path, pmid: str, entry: Any) -> Document:
    where = f"{path}: entry {pmid!r}"
    if not isinstance(entry, dict):
        raise CorpusError(f"{where}: expected an object, got a JSON {_json_type(entry)}")
    for key in ("QUESTION", "CONTEXTS"):
        if key not in entry:
            raise CorpusError(f"{where}: missing {key}")
    question = entry["QUESTION"]
    if not isinstance(question, str):
        raise CorpusError(f"{where}: QUESTION must be a string, got a JSON {_json_type(question)}")
    contexts = entry["CONTEXTS"]
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise CorpusError(f"{where}: CONTEXTS must be a list of strings")
    text = "\n".join(c.strip() for c in contexts if c.strip())
    if not text:
        raise CorpusError(f"{where}: CONTEXTS is empty")
    metadata: dict[str, str | None] = {"pmid": pmid, "question": question}
    for key, meta_key in (
        ("final_decision", "final_decision"),
        ("LONG_ANSWER", "long_answer"),
        ("YEAR", "year"),
        ("reasoning_required_pred", "reasoning_required_pred"),
        ("reasoning_free_pred", "reasoning_free_pred"),
    ):
        value = entry.get(key)
        if value is not None and not isinstance(value, (str, int)):
            raise CorpusError(f"{where}: {key} must be a string, got a JSON {_json_type(value)}")
        if value is not None:
            metadata[meta_key] = str(value)
    for key, meta_key in (("LABELS", "labels"), ("MESHES", "meshes")):
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise CorpusError(f"{where}: {key} must be a list of strings")
        metadata[meta_key] = ENTITY_SEPARATOR.join(value)
    return Document(id=f"pubmed-{pmid}", text=text, metadata=metadata)


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )
