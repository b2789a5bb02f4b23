"""Big inputs: JSONL and CSV files are streamed (memory does not grow with the file), large files
and corpora are warned about with the size stated, and index building reports its progress."""

from __future__ import annotations

import io
import json
import logging
import tracemalloc
from pathlib import Path

import pytest
from rich.console import Console

from ragleak.cli.progress import embedding_progress
from ragleak.corpora import files as corpus_files
from ragleak.corpora import load_corpus
from ragleak.errors import CorpusError
from ragleak.rag.index import EMBED_SLICE, PassageIndex
from ragleak.records import Passage

MB = 2**20


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_jsonl_and_csv_are_streamed(tmp_path: Path, suffix: str) -> None:
    """A 24 MB file of which only three rows hold text: loading it peaks far below its size
    (reading it whole would hold its bytes and its decoded text: over 48 MB)."""
    path = tmp_path / f"big{suffix}"
    if suffix == ".csv":
        header, row = "id,text\n", lambda i: f"r{i},row {i} says something\n"
        filler = lambda i: f"p{i}{'x' * 1000},\n"  # noqa: E731 - an empty text: skipped as empty
    else:
        header, row = "", lambda i: json.dumps({"id": f"r{i}", "text": f"row {i} says something"}) + "\n"
        filler = lambda i: " " * 1000 + "\n"  # noqa: E731 - a blank line: skipped
    with open(path, "w", encoding="utf-8") as f:
        f.write(header + row(0))
        for i in range(24 * 1024):
            f.write(filler(i))
        f.write(row(1))
    size = path.stat().st_size
    assert size > 20 * MB
    tracemalloc.start()
    try:
        docs = load_corpus(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [d.id for d in docs] == ["r0", "r1"]
    assert peak < size / 4, (peak, size)


def test_large_files_and_corpora_are_warned_about(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(corpus_files, "LARGE_FILE_MB", 1)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "book.txt").write_text("word " * (MB // 4), encoding="utf-8")  # 1.25 MB
    (tmp_path / "c" / "rows.jsonl").write_text(
        "".join(json.dumps({"text": f"row {i} " + "x" * 100}) + "\n" for i in range(9000)), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ragleak.corpora.files"):
        load_corpus(str(tmp_path / "c"))
    messages = [r.getMessage() for r in caplog.records]
    assert any("book.txt is 1 MB (above 1 MB): read whole into memory" in m for m in messages), messages
    assert any("rows.jsonl" in m and "streamed line by line" in m for m in messages), messages
    assert any("2 files" in m and "in total (above 1 MB)" in m for m in messages), messages
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ragleak.corpora.files"):
        load_corpus(str(tmp_path / "c" / "rows.jsonl"))
    assert not any("in total" in r.getMessage() for r in caplog.records)  # one file: one warning


def test_streamed_files_still_name_the_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "fine"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(CorpusError, match=r"invalid byte 0xe9 at byte offset 33 \(line 2\)"):
        load_corpus(str(path))


def test_index_building_reports_progress(embedder) -> None:
    n = EMBED_SLICE * 2 + 10
    passages = [Passage(id=f"d{i}#0", doc_id=f"d{i}", text=f"note {i}") for i in range(n)]
    calls = []
    index = PassageIndex.build(passages, embedder, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, n), (EMBED_SLICE, n), (2 * EMBED_SLICE, n), (n, n)]
    assert len(index) == n and index.search("note 300", 1)[0].passage.id == "d300#0"


def test_the_cli_progress_bar_shows_rate_and_eta() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with embedding_progress(console) as progress:
        progress(0, 1000)
        progress(500, 1000)
        console.file.flush()
        progress(1000, 1000)
    text = out.getvalue()
    assert "1000/1000" in text or "500/1000" in text
    assert "passages/s" in text and "ETA" in text
