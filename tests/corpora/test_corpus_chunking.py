"""Word-window chunking: spans preserved, counts, ids, parameter checks (hypothesis properties)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.corpora.chunking import chunk_count, chunk_documents, chunk_spans
from ragleak.errors import CorpusError
from ragleak.records import Document

WORD = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=" \t\n\r\x0b\x0c"), min_size=1, max_size=6)
SPACE = st.sampled_from([" ", "  ", "\n", "\n\n", "\t", " \n ", "\u00a0", "\u2003"])


@st.composite
def texts(draw) -> str:
    words = draw(st.lists(WORD, max_size=60))
    out = draw(st.sampled_from(["", " ", "\n"]))
    for word in words:
        out += word + draw(SPACE)
    return out


params = st.integers(1, 12).flatmap(lambda c: st.tuples(st.just(c), st.integers(0, c - 1)))


def words_of(text: str) -> list[str]:
    return text.split()


@settings(max_examples=150, deadline=None)
@given(st.lists(texts(), min_size=1, max_size=4), params)
def test_properties(doc_texts: list[str], cw_ov: tuple[int, int]) -> None:
    chunk_words, overlap = cw_ov
    docs = [Document(id=f"d{i}", text=t, metadata={"i": i}) for i, t in enumerate(doc_texts)]
    passages = chunk_documents(docs, chunk_words, overlap)
    assert len({p.id for p in passages}) == len(passages)
    for doc in docs:
        mine = [p for p in passages if p.doc_id == doc.id]
        words = words_of(doc.text)
        assert len(mine) == chunk_count(len(words), chunk_words, overlap)
        assert [p.id for p in mine] == [f"{doc.id}#{n}" for n in range(len(mine))]
        # every word (by position) is covered, and chunks are exact slices of the original
        covered = [w for p in mine for w in words_of(p.text)]
        assert set(words) <= set(covered)
        spans = chunk_spans(doc.text, chunk_words, overlap)
        assert [doc.text[a:b] for a, b in spans] == [p.text for p in mine]
        if spans:
            assert spans[0][0] == len(doc.text) - len(doc.text.lstrip())
            assert spans[-1][1] == len(doc.text.rstrip())
        for p in mine:
            assert p.metadata == doc.metadata and p.text == p.text.strip()
            assert len(words_of(p.text)) <= chunk_words
        # consecutive chunks share exactly `overlap` words, so the union is the word sequence
        rebuilt: list[str] = []
        for n, p in enumerate(mine):
            rebuilt.extend(words_of(p.text)[overlap if n else 0 :])
        assert rebuilt == words
        if 0 < len(words) <= chunk_words:
            assert [p.text for p in mine] == [doc.text.strip()]


@pytest.mark.parametrize(
    ("n", "chunk", "overlap", "expected"),
    [(0, 120, 20, 0), (1, 120, 20, 1), (120, 120, 20, 1), (121, 120, 20, 2), (220, 120, 20, 2), (221, 120, 20, 3),
     (10, 3, 0, 4), (10, 3, 2, 8)],
)
def test_chunk_count_examples(n: int, chunk: int, overlap: int, expected: int) -> None:
    assert chunk_count(n, chunk, overlap) == expected
    text = " ".join(f"w{i}" for i in range(n))
    assert len(chunk_spans(text, chunk, overlap)) == expected


def test_whitespace_inside_chunks_is_kept() -> None:
    doc = Document(id="d", text="  one\ttwo\n\nthree   four five\n")
    passages = chunk_documents([doc], chunk_words=3, overlap_words=1)
    assert [p.text for p in passages] == ["one\ttwo\n\nthree", "three   four five"]
    assert [p.id for p in passages] == ["d#0", "d#1"] and all(p.doc_id == "d" for p in passages)


def test_default_window_on_long_text() -> None:
    text = " ".join(f"w{i}" for i in range(300))
    passages = chunk_documents([Document(id="x", text=text)])
    assert len(passages) == 3
    assert passages[1].text.split()[0] == "w100" and passages[2].text.split()[-1] == "w299"


def test_empty_document_yields_no_passage() -> None:
    assert chunk_documents([Document(id="e", text=" \n ")]) == []


@pytest.mark.parametrize(("chunk", "overlap", "message"), [
    (0, 0, "chunk_words must be at least 1"), (-5, 0, "chunk_words must be at least 1"),
    (10, -1, "overlap_words must not be negative"), (10, 10, r"overlap_words \(10\) must be smaller"),
    (10, 12, "must be smaller"), (10.0, 2, "must be an integer"), (True, 0, "must be an integer"),
])
def test_parameter_validation(chunk, overlap, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        chunk_documents([Document(id="d", text="a b c")], chunk, overlap)


def test_duplicate_document_ids_rejected() -> None:
    docs = [Document(id="d", text="a"), Document(id="d", text="b")]
    with pytest.raises(CorpusError, match="duplicate document id"):
        chunk_documents(docs)


def test_words_match_str_split() -> None:
    """The chunker's notion of a word is exactly str.split's (same whitespace set)."""
    text = "a\u00a0b\u2028c\x1cd\u3000e\u200bf"
    spans = chunk_spans(text, 100, 0)
    assert re.findall(r"\S+", text) == text.split() and text[spans[0][0]:spans[0][1]] == text.strip()
