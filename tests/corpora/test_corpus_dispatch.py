"""load_corpus dispatch and corpus kinds (the contract over every registered corpus is in
tests/test_contracts.py)."""

from __future__ import annotations

import pytest

from ragleak.corpora import CORPORA, load_corpus, make_corpus
from ragleak.corpora.base import planted_entities
from ragleak.errors import ConfigError
from ragleak.records import Document


def test_kind_values_are_declared() -> None:
    kinds = {CORPORA.get(n).kind for n in CORPORA.names()}
    assert kinds == {"synthetic", "public", "user"}


def test_unknown_name_is_config_error() -> None:
    with pytest.raises(ConfigError, match="not a registered name"):
        load_corpus("no-such-corpus-xyz")


def test_bad_parameter_value_is_config_error() -> None:
    with pytest.raises(ConfigError, match="n_docs"):
        load_corpus("synthetic-corp", n_docs=0)


def test_registered_name_loads_documents() -> None:
    docs = load_corpus("synthetic-corp", n_docs=3, seed=1)
    assert len(docs) == 3 and all(isinstance(d, Document) for d in docs)


def test_path_dispatches_to_files(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("hello world", encoding="utf-8")
    assert make_corpus(str(tmp_path)).name == "files"
    docs = load_corpus(str(tmp_path))
    assert [d.id for d in docs] == ["a.txt"]


def test_registered_name_wins_over_same_named_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "synthetic-corp").mkdir()
    (tmp_path / "synthetic-corp" / "x.txt").write_text("folder text", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert make_corpus("synthetic-corp").name == "synthetic-corp"
    assert make_corpus("./synthetic-corp").name == "files"


def test_planted_entities_splits_joined_values() -> None:
    doc = Document(id="d", text="x", metadata={"person": "A B; C D", "email": "a@b.com", "other": "z"})
    assert planted_entities(doc) == {"person": ["A B", "C D"], "email": ["a@b.com"]}
