"""Corpus view files: what ``--view`` reads, and the MI view built from two folders.

A view file is either

* a ``CorpusView`` as JSON (``documents``: the MI candidates; ``member_ids``: which candidates
  the target indexed; ``secrets``: canary strings; ``topic``), written by ``mi_view`` (``ragleak mi
  view``) or ``attacks.canary.export_canary_kb``; or
* a canary manifest (``attacks.plant``, ``ragleak canary plant``), read as a view whose
  ``secrets`` are its canaries.

The format is documented in docs/own-corpus.md.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError

from ragleak.attacks.base import CorpusView
from ragleak.attacks.canary import MANIFEST_FORMAT, CanaryManifest
from ragleak.corpora import load_corpus
from ragleak.errors import ConfigError


def read_view(path: Path, sha256: str | None = None) -> CorpusView:
    """The corpus view in ``path`` (a CorpusView JSON or a canary manifest). ``sha256``: the digest
    the file had when a grid was planned on it; the bytes read are checked against it, so the view
    used is the one planned, never a file changed in between."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"corpus view file {path} does not exist") from exc
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
        raise ConfigError(f"view file {path} changed since the grid was planned; run the grid again")
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path}: not a corpus view or canary manifest (not JSON: {exc})") from exc
    try:
        if isinstance(data, dict) and data.get("format") == MANIFEST_FORMAT:
            return CorpusView(secrets=CanaryManifest.model_validate(data).secrets)
        return CorpusView.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: not a corpus view or canary manifest: {exc.errors()[0]['msg']}") from exc


def mi_view(members: Path | str, non_members: Path | str, topic: str | None = None) -> CorpusView:
    """The MI view of two folders: every document of both is a candidate, and those of
    ``members`` (the documents the target indexed) are the members. Document ids are the
    loader's (the file's path relative to its folder; a JSONL/CSV ``id``), so they must not
    repeat across the two folders."""
    inside, outside = load_corpus(members), load_corpus(non_members)
    clash = sorted({d.id for d in inside} & {d.id for d in outside})
    if clash:
        raise ConfigError(f"document ids occur in both folders ({', '.join(clash[:5])}): rename them so that a "
                          "candidate is a member or a non-member, never both")
    same_text = {d.text.strip() for d in inside} & {d.text.strip() for d in outside}
    if same_text:
        raise ConfigError(f"{len(same_text)} documents have the same text in both folders: a non-member must not "
                          "be a copy of a member")
    return CorpusView(documents=[*inside, *outside], member_ids=[d.id for d in inside], topic=topic)
