"""The user's own corpus: a folder (searched recursively, in sorted order) or a single file.

Supported files: ``.txt`` and ``.md`` (one Document per file), ``.jsonl`` (one per line: field
``text`` required, ``id`` optional, other fields become metadata) and ``.csv`` (one per row: the
``text`` column required, ``id`` optional, other columns become metadata). The text field or
column can be renamed with ``text_column``. Hidden files and folders are skipped.

Big inputs: ``.jsonl`` and ``.csv`` files are streamed line by line (memory holds the documents,
never a whole file's text as well); a ``.txt``/``.md`` file is one document and is read whole. A
file above ``LARGE_FILE_MB`` MB, or a corpus above it in total, is logged as a warning (the CLI
shows it) saying what that costs.

Every problem is a ``CorpusError`` naming the file (and the line or CSV row): a non-UTF-8 file
(with the offending byte offset), a malformed JSONL line, a CSV without the text column, a
folder without supported files, duplicate ids, or a corpus whose documents are all empty. The
loader returns every document or raises: never a partial corpus.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any, ClassVar, Iterator

from pydantic import Field

from ragleak.corpora.base import Corpus, CorpusKind, CorpusParams
from ragleak.errors import CorpusError
from ragleak.records import Document, MetaValue

log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".md")
SUFFIXES = (".txt", ".md", ".jsonl", ".csv")
_BOM = b"\xef\xbb\xbf"
LARGE_FILE_MB = 20  # above this (one file, or the corpus in total) loading and indexing take minutes
_MB = 2**20


class FilesParams(CorpusParams):
    path: Path = Field(description="a folder (searched recursively) or one .txt/.md/.jsonl/.csv file")
    text_column: str = Field(default="text", min_length=1, description="JSONL field / CSV column holding the text")
    id_column: str = Field(default="id", min_length=1, description="optional JSONL field / CSV column holding the id")


class Files(Corpus):
    """Documents read from the user's files (.txt, .md, .jsonl, .csv)."""

    name: ClassVar[str] = "files"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "Your own folder or file: .txt/.md (one doc per file), .jsonl/.csv (one per line/row)"
    kind: ClassVar[CorpusKind] = "user"
    Params: ClassVar[type[CorpusParams]] = FilesParams

    def load(self) -> list[Document]:
        params: FilesParams = self.params  # type: ignore[assignment]
        root = params.path
        if root.is_dir():
            files = supported_files(root)
            if not files:
                raise CorpusError(f"{root}: no supported files ({', '.join(SUFFIXES)}) in this folder or below")
            base = root
        elif root.is_file():
            if root.suffix.lower() not in SUFFIXES:
                raise CorpusError(f"{root}: unsupported file type {root.suffix or '(none)'!r}; supported: {', '.join(SUFFIXES)}")
            files, base = [root], root.parent
        else:
            raise CorpusError(f"{root}: no such file or folder")

        warn_if_large(files, root)
        docs: list[Document] = []
        origin: dict[str, str] = {}
        n_empty = 0
        for path in files:
            for doc, where in self._read(path, path.relative_to(base).as_posix()):
                if not doc.text.strip():
                    n_empty += 1
                    log.debug("%s: empty document skipped", where)
                    continue
                if doc.id in origin:
                    raise CorpusError(f"{where}: duplicate document id {doc.id!r} (first seen at {origin[doc.id]})")
                origin[doc.id] = where
                docs.append(doc)
        if not docs:
            raise CorpusError(f"{root}: empty corpus (all {n_empty} documents are empty)")
        if n_empty:
            log.warning("%s: skipped %d empty documents", root, n_empty)
        return docs

    def _read(self, path: Path, rel: str) -> Iterator[tuple[Document, str]]:
        suffix = path.suffix.lower()
        if suffix in TEXT_SUFFIXES:
            return iter([(Document(id=rel, text=read_utf8(path), metadata={"source": rel}), str(path))])
        if suffix == ".jsonl":
            return self._jsonl(path, rel)
        return self._csv(path, rel)

    def _jsonl(self, path: Path, rel: str) -> Iterator[tuple[Document, str]]:
        params: FilesParams = self.params  # type: ignore[assignment]
        for line_no, line in enumerate(utf8_lines(path), start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{where}: malformed JSONL line: {exc.msg} at column {exc.colno}") from exc
            if not isinstance(row, dict):
                raise CorpusError(f"{where}: expected a JSON object per line, got {type(row).__name__}")
            if params.text_column not in row:
                raise CorpusError(f"{where}: no {params.text_column!r} field")
            body = row.pop(params.text_column)
            if not isinstance(body, str):
                raise CorpusError(f"{where}: field {params.text_column!r} must be a string, got {type(body).__name__}")
            raw_id = row.pop(params.id_column, None)
            if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or str(raw_id) == ""):
                raise CorpusError(f"{where}: field {params.id_column!r} must be a non-empty string or integer")
            doc_id = str(raw_id) if raw_id is not None else f"{rel}:{line_no}"
            metadata = {"source": rel, **{str(k): _meta_value(v) for k, v in row.items()}}
            yield Document(id=doc_id, text=body, metadata=metadata), where

    def _csv(self, path: Path, rel: str) -> Iterator[tuple[Document, str]]:
        params: FilesParams = self.params  # type: ignore[assignment]
        reader = csv.DictReader(utf8_lines(path), strict=True)
        try:
            header = reader.fieldnames
        except csv.Error as exc:
            raise CorpusError(f"{path}: malformed CSV header: {exc}") from exc
        if not header:
            raise CorpusError(f"{path}: CSV has no header row")
        if params.text_column not in header:
            raise CorpusError(f"{path}: CSV has no {params.text_column!r} column (columns: {', '.join(header)}); "
                              "name the text column with text_column")
        row_no = 0
        try:
            for row in reader:
                row_no += 1
                where = f"{path}: row {row_no} (line {reader.line_num})"
                if None in row:
                    raise CorpusError(f"{where}: more fields than the header's {len(header)}")
                values = {k: (v if v is not None else "") for k, v in row.items()}
                body = values.pop(params.text_column)
                raw_id = values.pop(params.id_column, "")
                doc_id = raw_id if raw_id else f"{rel}:{row_no}"
                yield Document(id=doc_id, text=body, metadata={"source": rel, **values}), where
        except csv.Error as exc:
            raise CorpusError(f"{path}: malformed CSV at line {reader.line_num}: {exc}") from exc


def supported_files(root: Path) -> list[Path]:
    """Supported files under ``root``, recursively, sorted by relative path; hidden ones skipped."""
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and path.suffix.lower() in SUFFIXES:
            found.append(path)
        elif path.is_file():
            log.debug("%s: unsupported file type; skipped", path)
    return sorted(found, key=lambda p: p.relative_to(root).parts)


def warn_if_large(files: list[Path], root: Path) -> None:
    """Log a warning for each file above ``LARGE_FILE_MB`` MB and for a corpus above it in total."""
    total = 0
    for path in files:
        try:
            size = path.stat().st_size
        except OSError:
            continue  # reading it reports the problem
        total += size
        if size > LARGE_FILE_MB * _MB:
            how = ("read whole into memory (one document per .txt/.md file)" if path.suffix.lower() in TEXT_SUFFIXES
                   else "streamed line by line")
            log.warning("%s is %.0f MB (above %d MB): %s; chunking and embedding it will take a while",
                        path, size / _MB, LARGE_FILE_MB, how)
    if len(files) > 1 and total > LARGE_FILE_MB * _MB:
        log.warning("%s: %d files, %.0f MB in total (above %d MB); indexing will take a while",
                    root, len(files), total / _MB, LARGE_FILE_MB)


def utf8_lines(path: Path) -> Iterator[str]:
    """The file's lines, streamed, decoded as UTF-8 with their line ends (a leading BOM dropped).
    Lines end at ``\\n`` only (a U+2028 inside a JSON string stays inside its line); a bad byte is
    a ``CorpusError`` with its byte offset and line, as ``read_utf8`` reports it."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with f:
        offset = 0
        for line_no, raw in enumerate(f, start=1):
            skip = len(_BOM) if line_no == 1 and raw.startswith(_BOM) else 0
            try:
                yield raw[skip:].decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = offset + skip + exc.start
                raise CorpusError(
                    f"{path}: not UTF-8: invalid byte 0x{raw[skip + exc.start]:02x} at byte offset {bad} "
                    f"(line {line_no}); re-save the file as UTF-8") from exc
            offset += len(raw)


def read_utf8(path: Path) -> str:
    """The file decoded as UTF-8 (a leading BOM dropped); ``CorpusError`` with the bad byte's offset."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    skip = len(_BOM) if data.startswith(_BOM) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + skip
        line = data.count(b"\n", 0, offset) + 1
        raise CorpusError(
            f"{path}: not UTF-8: invalid byte 0x{data[offset]:02x} at byte offset {offset} (line {line}); "
            "re-save the file as UTF-8"
        ) from exc


def _meta_value(value: Any) -> MetaValue:
    """A JSON value as metadata: scalars kept, arrays and objects as compact JSON text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
