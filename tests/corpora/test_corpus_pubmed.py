"""The PubMedQA loader on a fixture in the published ori_pqal.json layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragleak.corpora import load_corpus
from ragleak.corpora.pubmed import PubMedQA
from ragleak.errors import CorpusError

FIXTURE = Path(__file__).parent / "fixtures" / "pubmedqa_small.json"


def test_loads_all_entries_in_file_order() -> None:
    docs = load_corpus("pubmedqa", path=str(FIXTURE))
    raw = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert [d.metadata["pmid"] for d in docs] == list(raw)
    first = docs[0]
    assert first.id == "pubmed-90000001"
    assert first.text == "\n".join(raw["90000001"]["CONTEXTS"])
    assert first.metadata["question"] == raw["90000001"]["QUESTION"]
    assert first.metadata["final_decision"] == "yes"
    assert first.metadata["long_answer"] == raw["90000001"]["LONG_ANSWER"]
    assert first.metadata["year"] == "2016"
    assert first.metadata["meshes"] == "Aged; Early Ambulation; Hip Fractures; Length of Stay"


def test_long_answer_is_not_in_the_text() -> None:
    for doc in load_corpus("pubmedqa", path=str(FIXTURE)):
        assert doc.metadata["long_answer"] not in doc.text


def test_members_and_non_members_split() -> None:
    members, non_members = PubMedQA(path=FIXTURE, limit=3).load_split()
    assert [d.metadata["pmid"] for d in members] == ["90000001", "90000002", "90000003"]
    assert [d.metadata["pmid"] for d in non_members] == ["90000004", "90000005"]
    assert load_corpus("pubmedqa", path=str(FIXTURE), limit=3) == members
    assert load_corpus("pubmedqa", path=str(FIXTURE), limit=3, split="non-members") == non_members
    assert load_corpus("pubmedqa", path=str(FIXTURE), limit=3, split="all") == members + non_members


def test_default_limit_is_fifty_members() -> None:
    assert PubMedQA(path=FIXTURE).params.limit == 50
    assert len(PubMedQA(path=FIXTURE).load()) == 5  # fewer entries than the limit: all are members


def test_no_non_members_is_an_error() -> None:
    with pytest.raises(CorpusError, match="no non-members"):
        PubMedQA(path=FIXTURE, split="non-members").load()


def test_optional_fields_may_be_missing(tmp_path) -> None:
    path = tmp_path / "ori_pqau.json"
    path.write_text(json.dumps({"1": {"QUESTION": "Q?", "CONTEXTS": ["A.", "B."], "LABELS": ["X", "Y"]}}), encoding="utf-8")
    (doc,) = load_corpus("pubmedqa", path=str(path))
    assert doc.text == "A.\nB." and "final_decision" not in doc.metadata


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object keyed by PMID, got a JSON array"),
        ("{}", "empty corpus"),
        ('{"7": [1]}', "entry '7': expected an object"),
        ('{"7": {"QUESTION": "q?"}}', "entry '7': missing CONTEXTS"),
        ('{"7": {"CONTEXTS": ["c"]}}', "entry '7': missing QUESTION"),
        ('{"7": {"QUESTION": "q?", "CONTEXTS": "c"}}', "CONTEXTS must be a list of strings"),
        ('{"7": {"QUESTION": "q?", "CONTEXTS": [" "]}}', "CONTEXTS is empty"),
        ('{"7": {"QUESTION": "q?", "CONTEXTS": ["c"], "MESHES": "m"}}', "MESHES must be a list of strings"),
    ],
)
def test_malformed_files_name_file_and_problem(tmp_path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CorpusError) as info:
        load_corpus("pubmedqa", path=str(path))
    assert str(path) in str(info.value) and problem in str(info.value)


def test_missing_file(tmp_path) -> None:
    with pytest.raises(CorpusError, match="not found"):
        load_corpus("pubmedqa", path=str(tmp_path / "nope.json"))


def test_path_is_required() -> None:
    from ragleak.errors import ConfigError

    with pytest.raises(ConfigError, match="path"):
        load_corpus("pubmedqa")
