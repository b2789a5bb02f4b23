"""Canaries planted in a copy of the user's own corpus, with a manifest to score them by.

``plant_folder(source, out, n, seed)`` copies the folder ``source`` to ``out`` unchanged except
for ``n`` documents, each of which gains one canary sentence: half of them (rounded up)
out-of-vocabulary e-mail addresses, the rest invented person names (``attacks.canary``: random
``operator_N_<hex>@acmetest-internal.canary`` addresses and pseudo-word names no English word or
substitution vocabulary has). A ``.txt``/``.md`` document is its file; a ``.jsonl`` line or a
``.csv`` row is rewritten in place (the JSON field or CSV column named ``text_column``). The user
loads ``out`` into their own system, attacks it, and scores the answers with the manifest:
``ragleak attack canary --view MANIFEST`` or ``ragleak score TRANSCRIPT --view MANIFEST``.

The manifest is written next to ``out``, never inside it: a manifest indexed with the corpus would
hand the secrets to the retriever. Its format (``attacks.canary.CanaryManifest``, version 1) is documented in
docs/own-corpus.md.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

from ragleak.attacks.canary import CanaryManifest, ManifestCanary, PlantedCanary, email_canaries, name_canaries
from ragleak.corpora import load_corpus
from ragleak.corpora.canaries import inject_canaries
from ragleak.corpora.files import read_utf8
from ragleak.errors import ConfigError
from ragleak.files import atomic_write_text
from ragleak.records import Document

def manifest_path(out: Path) -> Path:
    """Where ``plant_folder`` writes the manifest by default: beside ``out`` (``OUT.canaries.json``)."""
    out = Path(out)
    return out.with_name(out.name + ".canaries.json")


def make_planted(n: int, seed: int) -> list[PlantedCanary]:
    """``n`` canaries: ceil(n/2) e-mail addresses, then person names, with distinct ids."""
    emails = [c.model_copy(update={"id": f"canary-email-{i:03d}"})
              for i, c in enumerate(email_canaries((n + 1) // 2, seed, entropy=True))]
    names = [c.model_copy(update={"id": f"canary-name-{i:03d}"}) for i, c in enumerate(name_canaries(n // 2, seed))]
    return emails + names


def plant_folder(source: Path, out: Path, n: int = 10, seed: int = 0, text_column: str = "text",
                 manifest: Path | None = None) -> CanaryManifest:
    """Copy ``source`` to ``out`` with ``n`` canaries planted; write and return the manifest."""
    source, out = Path(source), Path(out)
    if not source.is_dir():
        raise ConfigError(f"{source}: canaries are planted in a copy of a folder; give the corpus folder")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} exists and is not empty; give a new folder for the planted copy")
    if out.resolve().is_relative_to(source.resolve()):
        raise ConfigError(f"--out {out} is inside {source}: the copy would be part of the corpus it copies")
    if n < 1:
        raise ConfigError("plant at least one canary (--n >= 1)")
    documents = load_corpus(source, text_column=text_column)
    if n > len(documents):
        raise ConfigError(f"{n} canaries need as many documents; {source} has {len(documents)}")
    canaries = make_planted(n, seed)
    try:
        planted, placements = inject_canaries(documents, canaries, seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    changed = {d.id: d for d in planted if "canary" in d.metadata}
    shutil.copytree(source, out, dirs_exist_ok=True)
    for rel in sorted({str(d.metadata["source"]) for d in changed.values()}):
        _rewrite(out / rel, rel, {i: d for i, d in changed.items() if d.metadata["source"] == rel}, text_column)
    by_id = {c.id: c for c in canaries}
    entries = [ManifestCanary(id=p.canary_id, kind=by_id[p.canary_id].kind, secret=by_id[p.canary_id].secret,
                              sentence=by_id[p.canary_id].sentence, doc_id=p.doc_id,
                              file=str(changed[p.doc_id].metadata["source"])) for p in placements]
    _verify(out, entries, text_column)
    result = CanaryManifest(source=str(source), corpus=str(out), seed=seed, canaries=entries)
    target = manifest or manifest_path(out)
    atomic_write_text(target, result.model_dump_json(indent=2))
    _umask_mode(target)
    return result


def _umask_mode(path: Path) -> None:
    """Give ``path`` the mode a plain write gives under the user's umask: an atomic write's temp
    file is 0600, and a service running as another user could then read every document of the
    planted copy except exactly the planted ones."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def _rewrite(path: Path, rel: str, docs: dict[str, Document], text_column: str) -> None:
    """Put the planted texts of ``docs`` (all from the file ``path``) into that file, readable as
    the user's umask says."""
    _write_planted(path, rel, docs, text_column)
    _umask_mode(path)


def _write_planted(path: Path, rel: str, docs: dict[str, Document], text_column: str) -> None:
    suffix = path.suffix.lower()
    if suffix in (".txt", ".md"):
        atomic_write_text(path, next(iter(docs.values())).text)
    elif suffix == ".jsonl":
        lines = read_utf8(path).splitlines(keepends=True)
        for line_no, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            doc_id = str(row["id"]) if row.get("id") is not None else f"{rel}:{line_no}"
            if doc_id in docs:
                row[text_column] = docs[doc_id].text
                lines[line_no - 1] = json.dumps(row, ensure_ascii=False) + "\n"
        atomic_write_text(path, "".join(lines))
    else:
        reader = csv.DictReader(io.StringIO(read_utf8(path)))
        rows: list[dict[str, Any]] = list(reader)
        for row_no, row in enumerate(rows, start=1):
            doc_id = row.get("id") or f"{rel}:{row_no}"
            if doc_id in docs:
                row[text_column] = docs[doc_id].text
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=reader.fieldnames or [], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(path, buf.getvalue())


def _verify(out: Path, entries: list[ManifestCanary], text_column: str) -> None:
    """The copy, read back as the user's system would read it, holds each canary once, where stated."""
    texts = {d.id: d.text for d in load_corpus(out, text_column=text_column)}
    for c in entries:
        if texts.get(c.doc_id, "").count(c.secret) != 1:
            raise ConfigError(f"planting {c.id} in {c.file} did not survive a re-read of {out}")
