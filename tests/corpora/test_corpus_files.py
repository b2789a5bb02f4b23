"""The user's own files: formats, order, ids, metadata and every error path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragleak.corpora import load_corpus
from ragleak.errors import CorpusError


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write(tmp_path / "b.txt", "Second file.\n\nWith two paragraphs.\n")
    write(tmp_path / "a.md", "# Title\n\nMarkdown body.")
    write(tmp_path / "sub" / "rows.jsonl", '{"id": "r1", "text": "first row", "author": "x", "tags": ["a", "b"]}\n\n'
                                            '{"text": "second row", "score": 2.5}\n')
    write(tmp_path / "sub" / "table.csv", "id,text,team\nc1,\"a cell, with comma\",red\n,row without id,blue\n")
    write(tmp_path / "notes.pdf", b"%PDF-1.4 ignored")
    write(tmp_path / ".hidden" / "secret.txt", "hidden")
    write(tmp_path / ".dot.txt", "hidden too")
    return tmp_path


def test_folder_recursive_sorted(folder: Path) -> None:
    docs = load_corpus(str(folder))
    assert [d.id for d in docs] == ["a.md", "b.txt", "r1", "sub/rows.jsonl:3", "c1", "sub/table.csv:2"]
    assert docs[1].text == "Second file.\n\nWith two paragraphs.\n"
    assert docs[1].metadata == {"source": "b.txt"}
    assert docs[2].metadata == {"source": "sub/rows.jsonl", "author": "x", "tags": '["a","b"]'}
    assert docs[3].metadata == {"source": "sub/rows.jsonl", "score": 2.5}
    assert docs[4].text == "a cell, with comma" and docs[4].metadata == {"source": "sub/table.csv", "team": "red"}


def test_loading_twice_is_identical(folder: Path) -> None:
    assert load_corpus(str(folder)) == load_corpus(str(folder))


def test_single_file(tmp_path: Path) -> None:
    path = write(tmp_path / "one.jsonl", '{"text": "only"}\n')
    (doc,) = load_corpus(str(path))
    assert doc.id == "one.jsonl:1" and doc.text == "only"


def test_text_column_parameter(tmp_path: Path) -> None:
    write(tmp_path / "t.csv", "body,label\nhello there,1\n")
    write(tmp_path / "t.jsonl", '{"body": "from jsonl"}\n')
    docs = load_corpus(str(tmp_path), text_column="body")
    assert [d.text for d in docs] == ["hello there", "from jsonl"]
    assert docs[0].metadata["label"] == "1"


def test_utf8_bom_and_line_separator_inside_jsonl(tmp_path: Path) -> None:
    write(tmp_path / "bom.txt", b"\xef\xbb\xbfcaf\xc3\xa9")
    write(tmp_path / "u.jsonl", json.dumps({"text": "one\u2028two"}, ensure_ascii=False) + "\n")
    docs = load_corpus(str(tmp_path))
    assert [d.text for d in docs] == ["café", "one\u2028two"]


def test_non_utf8_names_file_and_byte_offset(tmp_path: Path) -> None:
    write(tmp_path / "ok.txt", "fine")
    bad = write(tmp_path / "latin1.txt", "line one\ncaf".encode() + b"\xe9 au lait")
    with pytest.raises(CorpusError) as info:
        load_corpus(str(tmp_path))
    message = str(info.value)
    assert str(bad) in message and "byte offset 12" in message and "line 2" in message and "0xe9" in message


def test_malformed_jsonl_line_number(tmp_path: Path) -> None:
    bad = write(tmp_path / "x.jsonl", '{"text": "ok"}\n{"text": broken}\n')
    with pytest.raises(CorpusError, match=rf"{bad}:2: malformed JSONL line"):
        load_corpus(str(tmp_path))


@pytest.mark.parametrize(
    ("line", "problem"),
    [('["text"]', "expected a JSON object"), ('{"body": "x"}', "no 'text' field"),
     ('{"text": 3}', "must be a string"), ('{"text": "x", "id": {"a": 1}}', "'id' must be")],
)
def test_jsonl_row_errors(tmp_path: Path, line: str, problem: str) -> None:
    bad = write(tmp_path / "x.jsonl", line + "\n")
    with pytest.raises(CorpusError) as info:
        load_corpus(str(bad))
    assert f"{bad}:1" in str(info.value) and problem in str(info.value)


def test_csv_without_text_column(tmp_path: Path) -> None:
    bad = write(tmp_path / "t.csv", "title,body\na,b\n")
    with pytest.raises(CorpusError) as info:
        load_corpus(str(tmp_path))
    assert str(bad) in str(info.value) and "no 'text' column" in str(info.value) and "title, body" in str(info.value)


def test_csv_row_with_extra_fields(tmp_path: Path) -> None:
    bad = write(tmp_path / "t.csv", "text,x\nfine,1\ntoo,many,fields\n")
    with pytest.raises(CorpusError, match=rf"{bad}: row 2 \(line 3\): more fields"):
        load_corpus(str(tmp_path))


def test_csv_without_header(tmp_path: Path) -> None:
    write(tmp_path / "t.csv", "")
    with pytest.raises(CorpusError, match="no header"):
        load_corpus(str(tmp_path))


def test_empty_folder_and_unsupported_only(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no supported files"):
        load_corpus(str(tmp_path))
    write(tmp_path / "x.pdf", b"%PDF")
    write(tmp_path / ".h.txt", "hidden")
    with pytest.raises(CorpusError, match="no supported files"):
        load_corpus(str(tmp_path))


def test_unsupported_single_file(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="unsupported file type '.pdf'"):
        load_corpus(str(write(tmp_path / "x.pdf", b"%PDF")))


def test_all_documents_empty(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "  \n")
    write(tmp_path / "b.jsonl", '{"text": ""}\n')
    with pytest.raises(CorpusError, match="empty corpus"):
        load_corpus(str(tmp_path))


def test_some_empty_documents_are_skipped(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "")
    write(tmp_path / "b.txt", "content")
    assert [d.id for d in load_corpus(str(tmp_path))] == ["b.txt"]


def test_duplicate_ids(tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", '{"id": "same", "text": "one"}\n')
    write(tmp_path / "b.csv", "id,text\nsame,two\n")
    with pytest.raises(CorpusError, match="duplicate document id 'same'"):
        load_corpus(str(tmp_path))


def test_nothing_half_done(tmp_path: Path) -> None:
    """A good file before a bad one: the loader raises rather than return the good part."""
    write(tmp_path / "a.txt", "good")
    write(tmp_path / "z.jsonl", "not json\n")
    with pytest.raises(CorpusError):
        load_corpus(str(tmp_path))


def test_missing_path_is_not_a_corpus(tmp_path: Path) -> None:
    from ragleak.corpora.files import Files

    with pytest.raises(CorpusError, match="no such file or folder"):
        Files(path=tmp_path / "missing").load()
