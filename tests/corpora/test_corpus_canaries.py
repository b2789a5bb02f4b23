"""Canaries: deterministic, distinct, out of vocabulary, placed where recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragleak.corpora import load_corpus
from ragleak.corpora.canaries import Canary, inject_canaries, make_canaries
from ragleak.records import Document, canonical_json

WORDNET_INDEX = Path("/usr/share/wordnet")


@pytest.fixture(scope="module")
def corpus() -> list[Document]:
    return load_corpus("synthetic-corp", n_docs=60) + load_corpus("synthetic-email", n_docs=60)


def test_make_canaries_deterministic() -> None:
    assert canonical_json(make_canaries(20, seed=3)) == canonical_json(make_canaries(20, seed=3))
    assert [c.secret for c in make_canaries(20, seed=3)] != [c.secret for c in make_canaries(20, seed=4)]


def test_canaries_distinct_and_well_formed() -> None:
    canaries = make_canaries(200, seed=0)
    assert len({c.secret.casefold() for c in canaries}) == 200
    assert len({c.id for c in canaries}) == 200
    assert {c.kind for c in canaries} == {"passport", "name"}
    for c in canaries:
        assert c.sentence == f"{c.prefix}{c.secret}." and c.secret not in c.prefix
        if c.kind == "passport":
            assert len(c.secret) == 13 and c.secret[3] == c.secret[8] == "-" and c.secret[4:8].isdigit()


def test_kinds_parameter_and_errors() -> None:
    assert {c.kind for c in make_canaries(5, 0, kinds=["passport"])} == {"passport"}
    with pytest.raises(ValueError):
        make_canaries(-1, 0)
    with pytest.raises(ValueError):
        make_canaries(3, 0, kinds=["ssn"])
    with pytest.raises(ValueError, match="prefix"):
        Canary(id="c", kind="name", secret="X", prefix="p ", sentence="other")


def test_secrets_absent_from_clean_corpora(corpus) -> None:
    text = "\n".join(d.text for d in corpus).casefold()
    for c in make_canaries(100, seed=1):
        for word in c.secret.split():
            assert word.casefold() not in text


@pytest.mark.skipif(not (WORDNET_INDEX / "index.noun").is_file(), reason="Debian's wordnet-base is not installed")
def test_pseudo_words_are_not_english_words() -> None:
    lemmas: set[str] = set()
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (WORDNET_INDEX / f"index.{pos}").read_text(encoding="utf-8").splitlines():
            if not line.startswith("  "):
                lemmas.add(line.split(" ", 1)[0].casefold())
    words = {w.casefold() for c in make_canaries(300, seed=2) for w in (c.secret + " " + c.prefix).split()
             if w[0].isupper() and w.isalpha() and w not in {"The"}}
    assert words and not (words & lemmas)


def test_inject_deterministic_and_recorded(corpus) -> None:
    canaries = make_canaries(10, seed=5)
    out1, placed1 = inject_canaries(corpus, canaries, seed=9)
    out2, placed2 = inject_canaries(corpus, canaries, seed=9)
    assert canonical_json(out1) == canonical_json(out2) and placed1 == placed2
    _, placed3 = inject_canaries(corpus, canaries, seed=10)
    assert placed3 != placed1
    by_id = {d.id: d for d in out1}
    assert len({p.doc_id for p in placed1}) == 10
    for canary, place in zip(canaries, placed1):
        doc = by_id[place.doc_id]
        assert doc.text[place.offset : place.offset + len(canary.sentence)] == canary.sentence
        assert doc.metadata["canary"] == canary.id
    touched = {p.doc_id for p in placed1}
    for before, after in zip(corpus, out1):
        assert before.id == after.id
        if before.id not in touched:
            assert before == after
        else:
            # removing the sentence (and its separating space) restores the original exactly
            place = next(p for p in placed1 if p.doc_id == before.id)
            sentence = next(c.sentence for c in canaries if c.id == place.canary_id)
            restored = after.text[: place.offset - 1] + after.text[place.offset + len(sentence) :]
            assert restored == before.text
            assert {k: v for k, v in after.metadata.items() if k != "canary"} == before.metadata


def test_inject_at_sentence_boundaries_not_only_the_end(corpus) -> None:
    canaries = make_canaries(40, seed=0)
    out, placed = inject_canaries(corpus, canaries, seed=1)
    by_id = {d.id: d for d in out}
    ends = [p.offset + len(c.sentence) == len(by_id[p.doc_id].text.rstrip()) for p, c in zip(placed, canaries)]
    assert any(ends) and not all(ends)
    for p, c, at_end in zip(placed, canaries, ends):
        text = by_id[p.doc_id].text
        assert at_end or text[p.offset - 2] in ".!?"
        if text.startswith("From: "):
            assert p.offset > text.index("\n\n")  # never inside the e-mail headers


def test_inject_errors(corpus) -> None:
    docs = corpus[:3]
    with pytest.raises(ValueError, match="need as many documents"):
        inject_canaries(docs, make_canaries(4, 0), seed=0)
    c = make_canaries(1, 0)[0]
    leaky = [Document(id="x", text=f"already here: {c.secret.lower()}")]
    with pytest.raises(ValueError, match="already occurs"):
        inject_canaries(leaky, [c], seed=0)
    once, _ = inject_canaries(docs, [c], seed=0)
    with pytest.raises(ValueError, match="already carries"):
        inject_canaries(once, make_canaries(2, 1)[1:], seed=0)
    with pytest.raises(ValueError, match="distinct"):
        inject_canaries(docs, [c, c], seed=0)


def test_inject_into_empty_text() -> None:
    c = make_canaries(1, 0)[0]
    out, (place,) = inject_canaries([Document(id="e", text="")], [c], seed=0)
    assert out[0].text == c.sentence and place.offset == 0
